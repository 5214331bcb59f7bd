import Testing
@testable import ParleyServer
