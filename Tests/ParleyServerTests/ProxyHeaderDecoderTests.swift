import ParleyCore
import ParleyTestSupport
import Testing

@testable import ParleyServer

/// Feeds `input` in chunks of `sizes` until the decoder answers; the answer's leftover then
/// includes everything after the header, as a door would read it.
private func decode(_ input: [UInt8], chunks sizes: [Int]) -> ProxyHeaderEvent {
    var decoder = ProxyHeaderDecoder()
    var i = 0, k = 0
    while i < input.count {
        let n = min(sizes[k % sizes.count], input.count - i)
        let event = decoder.feed(Array(input[i..<i + n]))
        i += n
        k += 1
        switch event {
        case .needMoreData: continue
        case .header(let header, let leftover): return .header(header, leftover: leftover + Array(input[i...]))
        case .invalid: return event
        }
    }
    return .needMoreData
}

/// Whole, byte by byte and in seeded random chunks: the same answer.
private func dripFeed(_ input: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> ProxyHeaderEvent {
    let whole = decode(input, chunks: [max(input.count, 1)])
    #expect(decode(input, chunks: [1]) == whole, "one byte at a time", sourceLocation: sourceLocation)
    var rng = SeededRNG(seed: 7)
    for _ in 0..<20 {
        let sizes = (0..<8).map { _ in Int.random(in: 1...max(2, input.count / 3 + 1), using: &rng) }
        #expect(decode(input, chunks: sizes) == whole, "chunks \(sizes)", sourceLocation: sourceLocation)
    }
    return whole
}

private func header(_ ip: String, _ port: Int, then leftover: String = "") -> ProxyHeaderEvent {
    .header(ProxyHeader(source: IPAddress(parsing: ip)!, sourcePort: port), leftover: Array(leftover.utf8))
}

private func v2(command: UInt8 = 0x21, family: UInt8, payload: [UInt8]) -> [UInt8] {
    ProxyHeaderDecoder.v2Signature + [command, family, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
}

@Suite struct ProxyHeaderDecoderTests {
    @Test func v1TCP4WithTheLineProtocolAfterIt() {
        #expect(dripFeed(Array("PROXY TCP4 203.0.113.9 192.0.2.1 51234 8081\r\niam:alice\n".utf8))
                == header("203.0.113.9", 51234, then: "iam:alice\n"))
    }

    @Test func v1TCP6() {
        #expect(dripFeed(Array("PROXY TCP6 2001:db8::7 2001:db8::1 4000 8081\r\n".utf8)) == header("2001:db8::7", 4000))
    }

    @Test func v1UnknownMeansThePeerItself() {
        #expect(dripFeed(Array("PROXY UNKNOWN\r\nmsg:x".utf8)) == .header(ProxyHeader(), leftover: Array("msg:x".utf8)))
        #expect(dripFeed(Array("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n".utf8)) == .header(ProxyHeader(), leftover: []))
    }

    @Test func v1LongestAllowedAndOneByteMore() {
        // 107 bytes is the protocol's worst case (UNKNOWN with two full IPv6 addresses).
        let body = "PROXY UNKNOWN " + String(repeating: "f", count: 107 - 16) + "\r\n"
        #expect(body.utf8.count == 107)
        #expect(dripFeed(Array(body.utf8)) == .header(ProxyHeader(), leftover: []))
        let tooLong = "PROXY UNKNOWN " + String(repeating: "f", count: 107 - 15) + "\r\n"
        guard case .invalid = dripFeed(Array(tooLong.utf8)) else { Issue.record("108 bytes accepted"); return }
        // Without a line end it stops at the limit, not at the end of the input.
        guard case .invalid = decode(Array(repeating: UInt8(ascii: "P"), count: 1) + Array("ROXY ".utf8) + Array(repeating: 0x41, count: 5000), chunks: [1]) else {
            Issue.record("an endless v1 header was buffered"); return
        }
    }

    @Test func v1Malformed() {
        for bad in ["PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n",
                    "PROXY TCP4 1.2.3.4 5.6.7.8 70000 2\r\n", "PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", "PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
                    "PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", "PROXY TCP4 1.2.3.4\u{7}5.6.7.8 1 2\r\n", "proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
                    "iam:alice\n", "GET / HTTP/1.1\r\n"] {
            guard case .invalid = dripFeed(Array(bad.utf8)) else { Issue.record("accepted \(bad.debugDescription)"); continue }
        }
    }

    @Test func garbageIsRefusedAtItsFirstByte() {
        var decoder = ProxyHeaderDecoder()
        guard case .invalid = decoder.feed([UInt8(ascii: "i")]) else { Issue.record("waited for more"); return }
        var v2 = ProxyHeaderDecoder()
        guard case .invalid = v2.feed([0x0D, 0x0A, 0x0D, 0x0A, 0x01]) else { Issue.record("a wrong v2 signature waited"); return }
    }

    @Test func v2IPv4AndIPv6() {
        let v4 = v2(family: 0x11, payload: [198, 51, 100, 4, 10, 0, 0, 1, 0x1F, 0x90, 0x1F, 0x91])
        #expect(dripFeed(v4 + Array("iam:bob\n".utf8)) == header("198.51.100.4", 8080, then: "iam:bob\n"))
        let six = IPAddress(parsing: "2001:db8:1:2::9")!.bytes
        let v6 = v2(family: 0x21, payload: six + IPAddress(parsing: "2001:db8::1")!.bytes + [0x00, 0x50, 0x1F, 0x91])
        #expect(dripFeed(v6) == header("2001:db8:1:2::9", 80))
    }

    @Test func v2WithTLVsAndLocal() {
        let tlv: [UInt8] = [0x04, 0x00, 0x03, 1, 2, 3]  // PP2_TYPE_NOOP
        let v4 = v2(family: 0x11, payload: [198, 51, 100, 4, 10, 0, 0, 1, 0, 1, 0, 2] + tlv)
        #expect(dripFeed(v4) == header("198.51.100.4", 1))
        #expect(dripFeed(v2(command: 0x20, family: 0x00, payload: []) + [0x41]) == .header(ProxyHeader(), leftover: [0x41]))
        // A UNIX-socket family has no address to take: the peer is the client.
        #expect(dripFeed(v2(family: 0x31, payload: Array(repeating: 0, count: 216))) == .header(ProxyHeader(), leftover: []))
    }

    @Test func v2Bounds() {
        let limit = ProxyHeaderDecoder.maxV2PayloadBytes
        let atLimit = v2(family: 0x11, payload: [1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2] + Array(repeating: 0, count: limit - 12))
        #expect(dripFeed(atLimit) == header("1.2.3.4", 1))
        // A length over the bound is refused on the length field, before any payload.
        let over = ProxyHeaderDecoder.v2Signature + [0x21, 0x11, UInt8((limit + 1) >> 8), UInt8((limit + 1) & 0xFF)]
        guard case .invalid = decode(over, chunks: [1]) else { Issue.record("an oversized v2 header was waited for"); return }
        guard case .invalid = dripFeed(v2(family: 0x11, payload: [1, 2, 3])) else { Issue.record("short IPv4 addresses accepted"); return }
        guard case .invalid = dripFeed(v2(command: 0x11, family: 0x11, payload: [])) else { Issue.record("version 1 in a v2 header"); return }
        guard case .invalid = dripFeed(v2(command: 0x22, family: 0x11, payload: [])) else { Issue.record("command 2 accepted"); return }
    }

    @Test func randomGarbageNeverCrashesAndNeverBuffersPastTheLimit() {
        var rng = SeededRNG(seed: 42)
        for _ in 0..<2_000 {
            let prefix: [UInt8] = Bool.random(using: &rng) ? Array("PROXY ".utf8) : ProxyHeaderDecoder.v2Signature
            let count = Int.random(in: 0...1_200, using: &rng)
            let input = prefix.prefix(Int.random(in: 0...prefix.count, using: &rng))
                + (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            var decoder = ProxyHeaderDecoder()
            var fed = 0
            for byte in input {
                fed += 1
                if decoder.feed([byte]) != .needMoreData { break }
            }
            #expect(fed <= 16 + ProxyHeaderDecoder.maxV2PayloadBytes)
        }
    }
}

@Suite struct TrustedProxiesTests {
    let proxies = TrustedProxies([IPNetwork(parsing: "10.0.0.0/8")!, IPNetwork(parsing: "::1")!])

    @Test func fromAnyoneElseTheHeaderIsIgnored() {
        #expect(proxies.client(peer: "198.51.100.7", forwardedFor: ["203.0.113.1"]) == "198.51.100.7")
        #expect(TrustedProxies([]).client(peer: "10.0.0.1", forwardedFor: ["203.0.113.1"]) == "10.0.0.1")
    }

    @Test func theRightmostEntryThatIsNotAProxy() {
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["203.0.113.1"]) == "203.0.113.1")
        // A client may write its own left-hand entries; only what proxies appended counts.
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["1.1.1.1, 203.0.113.1, 10.0.0.2"]) == "203.0.113.1")
        #expect(proxies.client(peer: "::1", forwardedFor: ["1.1.1.1", "203.0.113.1:4444,10.9.9.9"]) == "203.0.113.1")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["[2001:DB8::5]:80"]) == "2001:db8::5")
    }

    /// RFC 7239: `for=` of each element, quoted IPv6 with a port, parameters in any case and
    /// order; the standard header wins over `X-Forwarded-For` when both are there.
    @Test func theForwardedHeaderIsReadLikeXForwardedFor() {
        #expect(proxies.client(peer: "10.0.0.1", forwarded: ["for=203.0.113.1"], forwardedFor: []) == "203.0.113.1")
        #expect(proxies.client(peer: "10.0.0.1", forwarded: [#"for=1.1.1.1, FOR="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.2;by=10.0.0.1"#],
                               forwardedFor: []) == "2001:db8:cafe::17")
        #expect(proxies.client(peer: "10.0.0.1", forwarded: ["proto=https;for=203.0.113.9:8080"], forwardedFor: ["198.51.100.1"]) == "203.0.113.9",
                "Forwarded wins")
        #expect(proxies.client(peer: "10.0.0.1", forwarded: [], forwardedFor: ["198.51.100.1"]) == "198.51.100.1")
        // A comma inside a quoted value does not split an element.
        #expect(TrustedProxies.forwardedElements(#"for="a,b";by=x, for=1.2.3.4"#).count == 2)
        // Obfuscated or missing `for`: the walk stops at the last proxy that vouched.
        #expect(proxies.client(peer: "10.0.0.1", forwarded: ["for=_hidden"], forwardedFor: []) == "10.0.0.1")
        #expect(proxies.client(peer: "10.0.0.1", forwarded: ["for=unknown, for=10.0.0.3"], forwardedFor: []) == "10.0.0.3")
        #expect(proxies.client(peer: "10.0.0.1", forwarded: ["by=10.0.0.9"], forwardedFor: []) == "10.0.0.1")
        // From anyone else, and past the bounds, it is ignored.
        #expect(proxies.client(peer: "198.51.100.7", forwarded: ["for=203.0.113.1"], forwardedFor: []) == "198.51.100.7")
        let huge = Array(repeating: "for=203.0.113.1", count: 400).joined(separator: ", ")
        #expect(proxies.client(peer: "10.0.0.1", forwarded: [huge], forwardedFor: []) == "10.0.0.1")
    }

    @Test func garbageOrNothingLeavesTheLastProxy() {
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["unknown"]) == "10.0.0.1")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["203.0.113.1, garbage, 10.0.0.3"]) == "10.0.0.3")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["10.0.0.2"]) == "10.0.0.2")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: [""]) == "10.0.0.1")
    }

    @Test func bounded() {
        let hops = Array(repeating: "10.1.1.1", count: TrustedProxies.maxForwardedEntries).joined(separator: ",")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["203.0.113.1," + hops]) == "10.1.1.1")
        let huge = String(repeating: "203.0.113.1,", count: 1_000)
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: [huge]) == "10.0.0.1")
    }
}
