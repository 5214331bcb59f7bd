import ParleyCore
import Testing

@testable import ParleyServer

/// What an address ban covers: the address, and for IPv6 its whole /64 (the same grouping
/// as every per-IP limit: one host usually holds the /64 and can move within it).
@Suite struct BanTargetTests {
    @Test func ipv4BansTheAddressOnly() {
        let ban = Ban.Target.ip("203.0.113.9")
        #expect(ban.covers(ip: "203.0.113.9", name: nil))
        #expect(ban.covers(ip: "::ffff:203.0.113.9", name: nil))
        #expect(!ban.covers(ip: "203.0.113.10", name: nil))
        #expect(!ban.covers(ip: nil, name: "x"))
    }

    @Test func ipv6BansTheSlash64() {
        let ban = Ban.Target.ip("2001:db8:1:2::1")
        #expect(ban.covers(ip: "2001:db8:1:2::1", name: nil))
        #expect(ban.covers(ip: "2001:db8:1:2:ffff:1:2:3", name: nil))
        #expect(ban.covers(ip: "2001:DB8:1:2:0::7", name: nil))
        #expect(!ban.covers(ip: "2001:db8:1:3::1", name: nil))
    }
}
