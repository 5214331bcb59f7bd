import Testing
@testable import ParleyWebSocket
