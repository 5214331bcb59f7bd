import Testing
@testable import ParleyIO
