import Testing
@testable import ParleyCore

/// A stand-in MAC for rule tests (the real HMAC-SHA256 is tested with OpenSSL in
/// ParleyServerTests): deterministic and key-dependent, which is all these rules need.
struct TestMAC: HMACSHA256 {
    func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var hash: UInt64 = 1469598103934665603
        for byte in key + [0] + message { hash = (hash ^ UInt64(byte)) &* 1099511628211 }
        return withUnsafeBytes(of: hash) { Array($0) }
    }
}

@Suite struct ChannelAccessTests {
    let clock = ManualClock(millis: 1_700_000_000_000)
    var verifier: TokenVerifier { TokenVerifier(hmac: TestMAC(), clock: clock) }

    func token(exp: Int64, permissions: [(pattern: String, publish: Bool, subscribe: Bool, history: Int)]) -> String {
        verifier.mint(secret: "s", channel: "c", client: "me", expiresAtSeconds: exp, permissions: permissions)
    }

    @Test func anAuthChannelRefusesEverythingUntilAToken() {
        let access = ChannelAccess(channel: "c", secret: "s", requiresAuth: true, verifier: verifier)
        #expect(access.check(.subscribe, room: "r", nowMillis: clock.nowMillis()).error?.hasPrefix("authentication required") == true)
        #expect(access.check(.publish, room: "r", nowMillis: clock.nowMillis()).error != nil)
    }

    @Test func anOpenChannelWithoutATokenAllowsAll() {
        let access = ChannelAccess(channel: "c", secret: nil, requiresAuth: false, verifier: verifier)
        let result = access.check(.history, room: "r", nowMillis: clock.nowMillis())
        #expect(result.error == nil && result.history == Int.max)
    }

    @Test func aTokenNarrowsWhatIsAllowedAndExpires() {
        var access = ChannelAccess(channel: "c", secret: "s", requiresAuth: false, verifier: verifier)
        let now = clock.nowMillis()
        let exp = now / 1000 + 60
        #expect(access.authenticate(token(exp: exp, permissions: [("read-.*", false, true, 5)]), client: .exactly("me")) == nil)
        #expect(access.check(.subscribe, room: "read-1", nowMillis: now) == (nil, 5))
        #expect(access.check(.publish, room: "read-1", nowMillis: now).error?.hasPrefix("permission denied") == true)
        #expect(access.check(.subscribe, room: "other", nowMillis: now).error?.hasPrefix("permission denied") == true)
        #expect(access.check(.subscribe, room: "read-1", nowMillis: (exp + 1) * 1000).error?.hasPrefix("token expired") == true)
    }

    @Test func aChannelWithoutASecretRefusesTokens() {
        var access = ChannelAccess(channel: "c", secret: nil, requiresAuth: false, verifier: verifier)
        #expect(access.authenticate(token(exp: 9_999_999_999, permissions: []), client: .exactly("me"))?.contains("does not use authentication") == true)
        #expect(!access.isAuthenticated)
    }

    @Test func aBadTokenLeavesTheEarlierClaims() {
        var access = ChannelAccess(channel: "c", secret: "s", requiresAuth: true, verifier: verifier)
        #expect(access.authenticate(token(exp: clock.nowMillis() / 1000 + 60, permissions: [(".*", true, true, 1)]), client: .exactly("me")) == nil)
        #expect(access.authenticate("garbage", client: .exactly("me")) != nil)
        #expect(access.isAuthenticated)
        #expect(access.check(.publish, room: "x", nowMillis: clock.nowMillis()).error == nil)
    }
}
