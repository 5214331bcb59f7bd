import Testing
import ParleyCore
@testable import ParleyServer

@Suite struct RoomPatternTests {
    @Test func matchesTheWholeName() throws {
        let pattern = try RoomPattern("room-[0-9]+")
        #expect(pattern.matches("room-42"))
        #expect(!pattern.matches("room-42x"))
        #expect(!pattern.matches("xroom-42"))
        #expect(!pattern.matches("room-"))
    }

    @Test func supportsTheUsualSyntax() throws {
        #expect(try RoomPattern("^main$").matches("main"))
        #expect(try RoomPattern(".*").matches(""))
        #expect(try RoomPattern(".*").matches("anything at all"))
        #expect(try RoomPattern("observable-(a|b)c?").matches("observable-bc"))
        #expect(try RoomPattern("observable-(?:a|b)c?").matches("observable-a"))
        #expect(!(try RoomPattern("a|b").matches("ab")))
        #expect(try RoomPattern("[^-]+-\\d{2,3}").matches("x-123"))
        #expect(!(try RoomPattern("[^-]+-\\d{2,3}").matches("x-1234")))
        #expect(try RoomPattern("\\w+\\.\\w+").matches("a_b.c9"))
        #expect(try RoomPattern("[a\\-z]").matches("-"))
        #expect(try RoomPattern("x{3}").matches("xxx"))
        #expect(try RoomPattern("x{2,}").matches("xxxxx"))
    }

    @Test func refusesWhatItCannotDo() {
        for bad in ["(", "a)", "[abc", "*a", "a{3,1}", "\\q", "(?=x)", String(repeating: "a", count: 300), "(a{100}){100}"] {
            #expect(throws: RoomPattern.SyntaxError.self, "\(bad.prefix(20))") { try RoomPattern(bad) }
        }
    }

    /// Nested repeats multiply: `(){9999}{9999}{9999}` emitted no instruction and looped
    /// 10^12 times while compiling (the instruction cap never fired). The work of compiling is
    /// bounded, and such a pattern is refused, saying why.
    @Test func nestedRepeatsOfNothingAreRefusedNotCompiledForever() throws {
        for bad in ["(){9999}{9999}", "(?:){9999}{9999}", "(a{0}){9999}{9999}", "((){99}){99}{99}", "(){9999}{9999}{9999}"] {
            let error = #expect(throws: RoomPattern.SyntaxError.self, "\(bad)") { try RoomPattern(bad) }
            #expect(error?.message.hasPrefix("room pattern too complex (its repeats expand to more than") == true, "\(bad): \(String(describing: error))")
        }
        // Repeats that stay small still compile.
        #expect(try RoomPattern("(){99}x{3}").matches("xxx"))
        #expect(try RoomPattern("(ab{2}){10}").matches(String(repeating: "abb", count: 10)))
    }

    @Test func pathologicalPatternsRunInLinearTime() throws {
        // Catastrophic for a backtracking engine; a pass over 10,000 characters here.
        let pattern = try RoomPattern("(a*)*(a|aa)*b")
        let name = String(repeating: "a", count: 10_000)
        let start = ContinuousClock.now
        #expect(!pattern.matches(name))
        #expect(ContinuousClock.now - start < .seconds(5))
    }
}

@Suite struct TokenTests {
    let clock = ManualClock(millis: 1_700_000_000_000)
    var verifier: TokenVerifier { TokenVerifier(hmac: OpenSSLHMAC(), clock: clock) }
    var nowSeconds: Int64 { clock.nowMillis() / 1000 }

    func token(secret: String = "s3cret", channel: String = "chan", client: String = "c1", exp: Int64? = nil,
               permissions: [(pattern: String, publish: Bool, subscribe: Bool, history: Int)] = [("main|observable-.*", true, true, 50)]) -> String {
        verifier.mint(secret: secret, channel: channel, client: client, expiresAtSeconds: exp ?? nowSeconds + 60,
                      permissions: permissions, data: ["role": "admin"])
    }

    @Test func clientRequirements() throws {
        let wildcard = token(client: "*"), specific = token(client: "c1")
        #expect(try verifier.verify(wildcard, secret: "s3cret", channel: "chan", client: .wildcard).client == "*")
        #expect(throws: ParleyError.self) { try verifier.verify(specific, secret: "s3cret", channel: "chan", client: .wildcard) }
        #expect(try verifier.verify(specific, secret: "s3cret", channel: "chan", client: .any).client == "c1")
        #expect(try verifier.verify(specific, secret: "s3cret", channel: "chan", client: .exactly("c1")).client == "c1")
        #expect(throws: ParleyError.self) { try verifier.verify(wildcard, secret: "s3cret", channel: "chan", client: .exactly("c1")) }
    }

    @Test func hmacMatchesRFC4231() {
        // RFC 4231 test case 2.
        let mac = OpenSSLHMAC().authenticationCode(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        let hex = mac.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        #expect(hex == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func validTokenGivesItsClaims() throws {
        let claims = try verifier.verify(token(), secret: "s3cret", channel: "chan", clientID: "c1")
        #expect(claims.data == ["role": "admin"])
        #expect(claims.permission(for: "main")?.publish == true)
        #expect(claims.permission(for: "observable-room")?.history == 50)
        #expect(claims.permission(for: "secret") == nil)
    }

    @Test func expiredTokensAreRefusedInSecondsAndMilliseconds() throws {
        #expect(throws: ParleyError.self) { try verifier.verify(token(exp: nowSeconds - 1), secret: "s3cret", channel: "chan", clientID: "c1") }
        // Milliseconds: valid one minute from now, expired one minute ago.
        let future = token(exp: clock.nowMillis() + 60_000)
        #expect(try verifier.verify(future, secret: "s3cret", channel: "chan", clientID: "c1").expiresMillis == clock.nowMillis() + 60_000)
        #expect(throws: ParleyError.self) { try verifier.verify(token(exp: clock.nowMillis() - 60_000), secret: "s3cret", channel: "chan", clientID: "c1") }
    }

    @Test func wrongSignatureChannelOrClientAreRefused() {
        #expect(throws: ParleyError.self) { try verifier.verify(token(secret: "other"), secret: "s3cret", channel: "chan", clientID: "c1") }
        #expect(throws: ParleyError.self) { try verifier.verify(token(channel: "other"), secret: "s3cret", channel: "chan", clientID: "c1") }
        #expect(throws: ParleyError.self) { try verifier.verify(token(client: "c2"), secret: "s3cret", channel: "chan", clientID: "c1") }
        #expect(throws: ParleyError.self) { try verifier.verify("not.a.jwt.at.all", secret: "s3cret", channel: "chan", clientID: "c1") }
    }

    @Test func algNoneAndOtherAlgorithmsAreRefused() throws {
        let good = token()
        let parts = good.split(separator: ".").map(String.init)
        let none = Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "." + parts[1] + "."
        let hs512 = Base64URL.encode(Array(#"{"alg":"HS512","typ":"JWT"}"#.utf8)) + "." + parts[1] + "." + parts[2]
        for bad in [none, hs512] {
            let error = try #require(throws: ParleyError.self) { try verifier.verify(bad, secret: "s3cret", channel: "chan", clientID: "c1") }
            #expect(error.code == .unauthorized)
        }
    }

    @Test func tamperedPayloadIsRefused() {
        let parts = token().split(separator: ".").map(String.init)
        let forged = Base64URL.encode(Array(#"{"client":"c1","channel":"chan","exp":9999999999,"permissions":{".*":{"publish":true,"subscribe":true,"history":1000}}}"#.utf8))
        #expect(throws: ParleyError.self) { try verifier.verify(parts[0] + "." + forged + "." + parts[2], secret: "s3cret", channel: "chan", clientID: "c1") }
    }

    @Test func base64URLRoundTrips() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
        #expect(Base64URL.decode("a") == nil)
        #expect(Base64URL.decode("a+b/") == nil)
    }
}

@Suite struct TokenCommandTests {
    @Test func mintsATokenTheVerifierAccepts() throws {
        let clock = ManualClock()
        let secret = "a-channel-secret-of-32-bytes-ok!"
        let token = try TokenCommand.run(arguments: ["--channel", "chan", "--secret", secret, "--client", "me",
                                                     "--room-regex", "room-.*", "--publish", "false", "--history", "7",
                                                     "--ttl", "60", "--data", #"{"name":"me"}"#], clock: clock)
        let claims = try TokenVerifier(hmac: OpenSSLHMAC(), clock: clock).verify(token, secret: secret, channel: "chan", clientID: "me")
        let grant = try #require(claims.permission(for: "room-1"))
        #expect(!grant.publish && grant.subscribe && grant.history == 7)
        #expect(!grant.moderate, "moderation is off unless asked for")
        #expect(claims.permission(for: "other") == nil)
        #expect(claims.data == ["name": "me"])
        #expect(claims.expiresMillis == clock.nowMillis() + 60_000)
    }

    @Test func refusesAShortSecretAsTheConfigFileDoes() {
        let short = String(repeating: "x", count: ChannelSettings.minimumSecretBytes - 1)
        #expect {
            try TokenCommand.run(arguments: ["--channel", "c", "--secret", short, "--client", "x"])
        } throws: { error in
            (error as? ServerConfiguration.UsageError)?.description.contains("at least 32 bytes (it is 31)") == true
        }
        #expect(throws: Never.self) {
            try TokenCommand.run(arguments: ["--channel", "c", "--secret", short + "x", "--client", "x"])
        }
    }

    @Test func mintsAModeratorToken() throws {
        let clock = ManualClock()
        let token = try TokenCommand.run(arguments: ["--channel", "chan", "--secret", String(repeating: "k", count: 32), "--client", "me", "--moderate", "true"],
                                         clock: clock)
        let claims = try TokenVerifier(hmac: OpenSSLHMAC(), clock: clock).verify(token, secret: String(repeating: "k", count: 32), channel: "chan", clientID: "me")
        #expect(claims.permission(for: "any-room")?.moderate == true)
    }

    @Test func refusesBadArguments() {
        for bad in [["--channel", "c"], ["--channel", "c", "--secret", "s", "--client", "x", "--ttl", "0"],
                    ["--channel", "c", "--secret", "s", "--client", "x", "--room-regex", "("],
                    ["--channel", "c", "--secret", "s", "--client", "x", "--publish", "maybe"], ["--what", "x"]] {
            #expect(throws: ServerConfiguration.UsageError.self) { try TokenCommand.run(arguments: bad) }
        }
    }
}

@Suite struct IPRateLimiterTests {
    @Test func theTableIsBoundedAndForgetsRefilledAddressesAsItGoes() {
        let limiter = IPRateLimiter(ratePerSecond: 10, burst: 2, capacity: 1_000, shardCount: 4)
        // 50,000 addresses, one request each: the table never passes its bound.
        for n in 0..<50_000 {
            #expect(limiter.allow(ip: "10.0.\(n / 256).\(n % 256)", nowMillis: 0))
            if n % 5_000 == 0 { #expect(limiter.trackedAddresses <= 1_000) }
        }
        #expect(limiter.trackedAddresses <= 1_000)
        // A second later every bucket has refilled: each address added prunes refilled ones a
        // few at a time, with no sweep of the whole table, so the table shrinks as it goes.
        for n in 0..<600 { _ = limiter.allow(ip: "192.0.\(n / 256).\(n % 256)", nowMillis: 1_000) }
        #expect(limiter.trackedAddresses < 800)
        // A known address is one lookup: it neither prunes nor grows the table.
        let before = limiter.trackedAddresses
        for _ in 0..<2_000 { _ = limiter.allow(ip: "192.0.0.1", nowMillis: 1_000) }
        #expect(limiter.trackedAddresses == before)
        // The limit itself still holds for a busy address.
        let busy = IPRateLimiter(ratePerSecond: 1, burst: 2)
        #expect(busy.allow(ip: "a", nowMillis: 0))
        #expect(busy.allow(ip: "a", nowMillis: 0))
        #expect(!busy.allow(ip: "a", nowMillis: 0))
        #expect(busy.allow(ip: "a", nowMillis: 1_000))
    }

    /// Shared across nodes: what an address spent is recorded until reported, once, and the
    /// cluster's level (lower, when other nodes spent too) brings the bucket down; never up.
    @Test func sharedSpendingIsReportedOnceAndTheClusterLevelIsAdopted() {
        let bytes = IPRateLimiter(ratePerSecond: 1_000, burst: 4_000)
        let key = IPRateLimiter.Key("2001:db8:1:2::7")
        #expect(bytes.spend(key, 500, nowMillis: 0))
        #expect(bytes.takeUnsynced(limit: 10).isEmpty, "not shared: nothing recorded")
        bytes.shareAcrossNodes()
        #expect(bytes.spend(key, 500, nowMillis: 0))
        bytes.charge(.init("2001:db8:1:2::8"), 250, nowMillis: 0)
        #expect(bytes.allow(.init("192.0.2.1"), nowMillis: 0))
        #expect(bytes.hasBudget(.init("192.0.2.9"), nowMillis: 0))
        // The two IPv6 addresses are one /64; a check spends nothing.
        let prefix = IPAddress.limitKey("2001:db8:1:2::7")
        let reported = bytes.takeUnsynced(limit: 10).sorted { $0.address < $1.address }
        #expect(reported.map(\.address) == ["192.0.2.1", prefix])
        #expect(reported.map(\.amount) == [1, 750])
        #expect(bytes.takeUnsynced(limit: 10).isEmpty, "reported once")
        // 3,000 left here; the cluster has 200 left, and 100 were spent here since the report.
        #expect(bytes.spend(key, 100, nowMillis: 0))
        bytes.adopt(prefix, clusterTokens: 200, nowMillis: 0)
        #expect(bytes.spend(key, 150, nowMillis: 0), "100 left")
        #expect(!bytes.spend(key, 1, nowMillis: 0), "spent")
        // A higher cluster level never raises the bucket.
        bytes.adopt(prefix, clusterTokens: 4_000, nowMillis: 0)
        #expect(!bytes.spend(key, 1, nowMillis: 0))
        #expect(bytes.spend(key, 1, nowMillis: 1_000), "it refills as before")
        // At most `limit` addresses a report; the rest wait for the next.
        for n in 0..<30 { _ = bytes.allow(.init("198.51.100.\(n)"), nowMillis: 2_000) }
        #expect(bytes.takeUnsynced(limit: 20).count == 20)
        #expect(bytes.takeUnsynced(limit: 20).count == 11, "30 addresses and the /64's 251 bytes since")
    }

    /// A budget charged after the work (bytes read): it may go into debt, one burst deep at
    /// most, and the address waits it off; a refilled bucket of any size is forgotten at once.
    @Test func aChargedBudgetGoesIntoDebtAndIsWaitedOff() {
        let bytes = IPRateLimiter(ratePerSecond: 1_000_000, burst: 4_000_000)
        #expect(bytes.hasBudget(.init("a"), nowMillis: 0))
        bytes.charge(.init("a"), 6_000_000, nowMillis: 0)
        #expect(!bytes.hasBudget(.init("a"), nowMillis: 0))
        #expect(!bytes.hasBudget(.init("a"), nowMillis: 2_000))
        #expect(bytes.hasBudget(.init("a"), nowMillis: 2_001))
        // The debt stops at one burst: a huge charge is waited off in one burst's time (4 s).
        bytes.charge(.init("b"), 1e15, nowMillis: 0)
        #expect(!bytes.hasBudget(.init("b"), nowMillis: 3_999))
        #expect(bytes.hasBudget(.init("b"), nowMillis: 4_001))
        // isFull does not count tokens one by one (a burst of millions).
        var bucket = TokenBucket(ratePerSecond: 1, burst: 1e12)
        #expect(bucket.isFull(nowMillis: 0))
        _ = bucket.take(nowMillis: 0)
        #expect(!bucket.isFull(nowMillis: 0))
    }
}
