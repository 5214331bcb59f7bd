import Testing
@testable import ParleyRedis
