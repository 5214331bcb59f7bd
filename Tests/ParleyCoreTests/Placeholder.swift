import Testing
@testable import ParleyCore
