import Testing
@testable import ParleyHTTP

@Suite struct DripFeedTests {
    @Test func simpleGet() throws {
        let (events, consistent) = dripFeed(bytes("GET /rooms/a%20b?x=1&y=a+b HTTP/1.1\r\nHost: example\r\nAccept: */*\r\n\r\n"))
        #expect(consistent)
        #expect(events.count == 2)
        let head = try #require(events.first?.head)
        #expect(head.method == "GET")
        #expect(head.target == "/rooms/a%20b?x=1&y=a+b")
        #expect(head.path == "/rooms/a b")
        #expect(head.query("x") == "1")
        #expect(head.query("y") == "a b")
        #expect(head.versionMinor == 1)
        #expect(head.headers["host"] == "example")
        #expect(head.keepAlive)
        #expect(!head.isUpgrade)
        #expect(events.last == .end)
    }

    @Test func postWithContentLength() throws {
        let (events, consistent) = dripFeed(bytes("POST /publish HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world"))
        #expect(consistent)
        #expect(events.count == 3)
        #expect(events.first?.head?.method == "POST")
        #expect(events[1] == .body(bytes("hello world")))
        #expect(events[2] == .end)
    }

    @Test func chunkedWithExtensionsAndTrailers() {
        let input = "POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;name=value\r\nhello\r\n" + "6 ; x\r\n world\r\n" + "A\r\n0123456789\r\n"
            + "0\r\nX-Checksum: abc\r\nX-Other: d\r\n\r\n"
        let (events, consistent) = dripFeed(bytes(input))
        #expect(consistent)
        #expect(events.count == 3)
        #expect(events.first?.head?.headers["Transfer-Encoding"] == "chunked")
        #expect(events[1] == .body(bytes("hello world0123456789")))
        #expect(events[2] == .end)
    }

    @Test func threePipelinedRequests() {
        let input = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
            + "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
            + "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\n"
        let (events, consistent) = dripFeed(bytes(input))
        #expect(consistent)
        #expect(events.compactMap(\.head).map(\.path) == ["/a", "/b", "/c"])
        #expect(events.filter { $0 == .end }.count == 3)
        #expect(events.contains(.body(bytes("abc"))))
        #expect(events.contains(.body(bytes("de"))))
    }

    @Test func partialNextRequestStaysBuffered() {
        var parser = HTTPRequestParser()
        let events = parser.feed(bytes("GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HT"))
        #expect(events.count == 2)
        #expect(!parser.isIdle)
        let rest = parser.feed(bytes("TP/1.1\r\nHost: h\r\n\r\n"))
        #expect(rest.first?.head?.path == "/b")
        #expect(parser.isIdle)
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\nHost: h\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", false),
        ("GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, Close\r\n\r\n", false),
        ("GET / HTTP/1.0\r\n\r\n", false),
        ("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
        ("GET / HTTP/1.0\r\nHost: h\r\nConnection: keep-alive\r\n\r\n", true),
    ])
    func keepAliveDetection(input: String, keepAlive: Bool) throws {
        let (events, consistent) = dripFeed(bytes(input))
        #expect(consistent)
        let head = try #require(events.first?.head)
        #expect(head.keepAlive == keepAlive)
        #expect(events.last == .end)
    }

    @Test func upgradeHandsBackLeftover() throws {
        let frame: [UInt8] = [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58, 0x0D, 0x0A]
        let input = bytes("GET /v3/websocket HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n") + frame
        let (events, consistent) = dripFeed(input)
        #expect(consistent)
        #expect(events.count == 2)
        let head = try #require(events.first?.head)
        #expect(head.isUpgrade)
        #expect(events[1] == .upgrade(leftover: frame))
    }

    @Test func upgradeFeedsAfterwardAreHandedBack() {
        var parser = HTTPRequestParser()
        let events = parser.feed(bytes("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"))
        #expect(events.last == .upgrade(leftover: []))
        #expect(parser.feed([1, 2, 3]) == [.upgrade(leftover: [1, 2, 3])])
        #expect(!parser.isIdle)
    }

    @Test func idleOnlyBetweenRequests() {
        var parser = HTTPRequestParser()
        #expect(parser.isIdle)
        _ = parser.feed(bytes("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nab"))
        #expect(!parser.isIdle)  // mid-body
        #expect(parser.feed(bytes("cd")) == [.body(bytes("cd")), .end])
        #expect(parser.isIdle)
        _ = parser.feed(bytes("G"))
        #expect(!parser.isIdle)  // a request has started trickling in
    }

    @Test func nonGetUpgradeIsAPlainRequest() {
        let events = parse(bytes("POST / HTTP/1.1\r\nHost: h\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nContent-Length: 1\r\n\r\nx"))
        #expect(events.first?.head?.isUpgrade == true)
        #expect(Array(events.dropFirst()) == [.body(bytes("x")), .end])
        let old = parse(bytes("GET / HTTP/1.0\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"))
        #expect(old.first?.head?.isUpgrade == false)
        #expect(old.last == .end)
    }

    @Test func leadingEmptyLinesAreIgnored() {
        let (events, consistent) = dripFeed(bytes("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"))
        #expect(consistent)
        #expect(events.first?.head?.path == "/")
    }

    @Test func absoluteFormAndAsterisk() {
        let a = parse(bytes("GET http://example.com/x/y?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"))
        #expect(a.first?.head?.path == "/x/y")
        #expect(a.first?.head?.query("q") == "1")
        let b = parse(bytes("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"))
        #expect(b.first?.head?.path == "*")
    }

    @Test func headerValuesAreTrimmedAndOrdered() throws {
        let events = parse(bytes("GET / HTTP/1.1\r\nHost: h\r\nX-A:  one \t\r\nx-a: two\r\nEmpty:\r\n\r\n"))
        let head = try #require(events.first?.head)
        #expect(head.headers.values("X-A") == ["one", "two"])
        #expect(head.headers["empty"] == "")
        #expect(head.headers.map(\.name) == ["Host", "X-A", "x-a", "Empty"])
    }

    @Test func zeroContentLengthEndsImmediately() {
        let events = parse(bytes("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"))
        #expect(events.count == 2)
        #expect(events.last == .end)
    }

    @Test func identicalDuplicateContentLengthIsAccepted() {
        let events = parse(bytes("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"))
        #expect(events.dropFirst().first == .body(bytes("ok")))
    }
}

@Suite struct RejectionTests {
    /// The status the parser ends with for `input`, checked under drip-feeding as well.
    func status(_ input: String, limits: HTTPParserLimits = .init()) -> Int? {
        status(bytes(input), limits: limits)
    }

    func status(_ input: [UInt8], limits: HTTPParserLimits = .init()) -> Int? {
        let (events, consistent) = dripFeed(input, limits: limits, seeds: [7, 8])
        #expect(consistent)
        return events.last?.error?.status
    }

    @Test func requestLineTooLong() {
        let long = "GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: h\r\n\r\n"
        #expect(status(long) == 414)
        // Detected without waiting for the end of the line, and nothing beyond the limit is kept.
        var parser = HTTPRequestParser()
        let events = parser.feed(bytes("GET /" + String(repeating: "a", count: 9000)))
        #expect(events.last?.error?.status == 414)
        #expect(parser.bufferedByteCount == 0)
    }

    @Test func requestLineAtLimitIsAccepted() {
        let target = "/" + String(repeating: "a", count: 8192 - "GET  HTTP/1.1".count - 1)
        let line = "GET \(target) HTTP/1.1"
        #expect(line.utf8.count == 8192)
        #expect(parse(bytes(line + "\r\nHost: h\r\n\r\n")).last == .end)
        #expect(status("GET \(target)a HTTP/1.1\r\nHost: h\r\n\r\n") == 414)
    }

    @Test func tooManyHeaderFields() {
        var input = "GET / HTTP/1.1\r\nHost: h\r\n"
        for n in 0..<100 { input += "X-\(n): v\r\n" }
        #expect(status(input + "\r\n") == 431)
        #expect(status(input + "\r\n") == 431)
        var ok = "GET / HTTP/1.1\r\nHost: h\r\n"
        for n in 0..<99 { ok += "X-\(n): v\r\n" }
        #expect(parse(bytes(ok + "\r\n")).last == .end)
    }

    @Test func headerSectionTooLarge() {
        let big = String(repeating: "v", count: 40_000)
        #expect(status("GET / HTTP/1.1\r\nHost: h\r\nA: \(big)\r\nB: \(big)\r\n\r\n") == 431)
        // An endless header line is cut off at the limit, not buffered.
        var parser = HTTPRequestParser()
        _ = parser.feed(bytes("GET / HTTP/1.1\r\nHost: h\r\nA: "))
        var last: [HTTPParserEvent] = []
        for _ in 0..<20 where !parser.isDead {
            last = parser.feed(Array(repeating: UInt8(ascii: "v"), count: 4096))
            #expect(parser.bufferedByteCount <= 65536)
        }
        #expect(last.last?.error?.status == 431)
    }

    @Test func trailersCountTowardHeaderLimits() {
        let limits = HTTPParserLimits(maxHeaderCount: 3)
        let input = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT1: a\r\nT2: b\r\n\r\n"
        #expect(status(input, limits: limits) == 431)
    }

    @Test func bodyTooLargeByContentLength() {
        #expect(status("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1048577\r\n\r\n") == 413)
        #expect(status("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999999\r\n\r\n") == 413)
        // Reported from the head alone, before any body byte arrives and without a .head event.
        #expect(parse(bytes("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2000000\r\n\r\n")).count == 1)
    }

    @Test func bodyTooLargeByChunkSum() {
        let limits = HTTPParserLimits(maxBodyBytes: 10)
        let input = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n5\r\nghijk\r\n0\r\n\r\n"
        #expect(status(input, limits: limits) == 413)
        #expect(status("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFFFFFF\r\n") == 413)
    }

    @Test(arguments: [
        "GET / HTTP/1.1 extra\r\nHost: h\r\n\r\n",          // extra field in request line
        "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",               // empty target
        "GET /\r\nHost: h\r\n\r\n",                         // no version
        "G(T / HTTP/1.1\r\nHost: h\r\n\r\n",                // bad method char
        "GET /a\u{7}b HTTP/1.1\r\nHost: h\r\n\r\n",         // control char in target
        "GET /ä HTTP/1.1\r\nHost: h\r\n\r\n",                // raw non-ASCII in target
        "GET a/b HTTP/1.1\r\nHost: h\r\n\r\n",              // not origin-form
        "GET / HTTP/1.1x\r\nHost: h\r\n\r\n",               // malformed version
        "GET / http/1.1\r\nHost: h\r\n\r\n",                // lowercase version
        "GET / HTTP/1.1\nHost: h\n\n",                      // bare LF
        "GET / HTTP/1.1\r\nHost : h\r\n\r\n",               // space before colon
        "GET / HTTP/1.1\r\nHost\t: h\r\n\r\n",              // tab before colon
        "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n  folded\r\n\r\n", // obs-fold
        "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\n: novalue\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX: a\u{0}b\r\n\r\n",   // NUL in value
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 1\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",                           // missing Host on 1.1
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",     // two Hosts
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n",       // bad chunk size
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",          // empty chunk size
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\n",       // junk after size
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", // no CRLF after data
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + String(repeating: "0", count: 2000) + "1\r\n",
        "GET /a%2 HTTP/1.1\r\nHost: h\r\n\r\n",             // truncated escape
        "GET /a%zz HTTP/1.1\r\nHost: h\r\n\r\n",            // non-hex escape
        "GET /a%00b HTTP/1.1\r\nHost: h\r\n\r\n",           // NUL
        "GET /a%FF HTTP/1.1\r\nHost: h\r\n\r\n",            // not UTF-8
        "GET /a#frag HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET * HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: upgrade\r\nContent-Length: 2\r\n\r\nab",
    ])
    func badRequest(input: String) {
        #expect(status(input) == 400)
    }

    @Test(arguments: [
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\n",
        "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    ])
    func notImplemented(input: String) {
        #expect(status(input) == 501)
    }

    @Test(arguments: ["HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "HTTP/3.0"])
    func versionNotSupported(version: String) {
        #expect(status("GET / \(version)\r\nHost: h\r\n\r\n") == 505)
    }

    @Test func tooManyLeadingEmptyLines() {
        #expect(status(String(repeating: "\r\n", count: 100) + "GET / HTTP/1.1\r\nHost: h\r\n\r\n") == 400)
    }

    @Test func deadParserStaysDead() {
        var parser = HTTPRequestParser()
        #expect(parser.feed(bytes("BAD\r\n")).last?.error?.status == 400)
        #expect(parser.isDead)
        #expect(parser.feed(bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n")).isEmpty)
    }

    @Test func errorStopsPipeline() {
        let events = parse(bytes("GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/9.9\r\n\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n"))
        #expect(events.compactMap(\.head).map(\.path) == ["/a"])
        #expect(events.last?.error?.status == 505)
    }
}

@Suite struct GarbageTests {
    /// Random buffers (pure noise, and noise spliced into a valid request) never crash the
    /// parser, never buffer past the limits, and anything after an `.error` is nothing.
    @Test func randomBytesNeverCrash() {
        var rng = SeededRNG(seed: 0xBAD5EED)
        let valid = bytes("POST /x?y=1 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nX: y\r\n\r\n5;e\r\nhello\r\n0\r\nT: 1\r\n\r\n")
        let alphabet = bytes("GET POST HTTP/1.1\r\n:;%0aF \t/Host Content-Length Transfer-Encoding chunked upgrade")
        let limits = HTTPParserLimits(maxRequestLineBytes: 64, maxHeaderBytes: 256, maxHeaderCount: 8, maxBodyBytes: 128)
        for iteration in 0..<2000 {
            var input: [UInt8]
            switch iteration % 3 {
            case 0:
                input = (0..<Int.random(in: 0...400, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            case 1:
                input = (0..<Int.random(in: 0...400, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
            default:
                input = valid
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    input[Int.random(in: 0..<input.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            }
            var parser = HTTPRequestParser(limits: limits)
            var events: [HTTPParserEvent] = []
            var offset = 0
            while offset < input.count {
                let end = min(input.count, offset + Int.random(in: 1...50, using: &rng))
                events += parser.feed(Array(input[offset..<end]))
                #expect(parser.bufferedByteCount <= 256 + 2)
                offset = end
            }
            // However it was split, the same bytes give the same verdict.
            #expect(normalized(events) == normalized(HTTPRequestParser(limits: limits).feedAll(input)))
            if let errorIndex = events.firstIndex(where: { $0.error != nil }) {
                #expect(errorIndex == events.count - 1)
                #expect(parser.isDead)
            }
        }
    }
}

extension HTTPRequestParser {
    func feedAll(_ input: [UInt8]) -> [HTTPParserEvent] {
        var copy = self
        return copy.feed(input)
    }
}
