import Testing
@testable import ParleyHTTP
