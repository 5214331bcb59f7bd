import Testing
@testable import ParleyHTTP

/// A route may have its own body limit (file uploads): asked once per request, on its head.
@Suite struct BodyLimitTests {
    /// Uploads (`POST /x/files`) may send 100 bytes, everything else 10.
    static let limit: @Sendable (HTTPRequestHead) -> Int? = { head in head.path.hasSuffix("/files") ? 100 : nil }

    func events(_ input: [UInt8], split: Int? = nil) -> [HTTPParserEvent] {
        var parser = HTTPRequestParser(limits: HTTPParserLimits(maxBodyBytes: 10), bodyLimit: Self.limit)
        guard let split else { return normalized(parser.feed(input)) }
        var events: [HTTPParserEvent] = []
        var offset = 0
        while offset < input.count {
            let end = min(input.count, offset + split)
            events += parser.feed(Array(input[offset..<end]))
            offset = end
        }
        return normalized(events)
    }

    func request(_ path: String, length: Int) -> [UInt8] {
        bytes("POST \(path) HTTP/1.1\r\nHost: h\r\nContent-Length: \(length)\r\n\r\n") + Array(repeating: 0x61, count: length)
    }

    func chunked(_ path: String, chunks: [Int]) -> [UInt8] {
        var text = bytes("POST \(path) HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
        for size in chunks { text += bytes(String(size, radix: 16) + "\r\n") + Array(repeating: 0x62, count: size) + bytes("\r\n") }
        return text + bytes("0\r\n\r\n")
    }

    @Test(arguments: [nil, 1, 7])
    func theRouteLimitAppliesToItsRequestsOnly(split: Int?) {
        // 50 bytes: fine for the upload route, too much for the other.
        let upload = events(request("/demo/files", length: 50), split: split)
        #expect(upload.count == 3 && upload.last == .end && upload[1] == .body(Array(repeating: 0x61, count: 50)))
        let other = events(request("/demo/room/publish", length: 50), split: split)
        #expect(other.count == 1 && other.first?.error?.status == 413)
        // Over the route's own limit: refused on the head, before any body byte.
        #expect(events(request("/demo/files", length: 101), split: split).first?.error?.status == 413)
        // Pipelined: each request gets its own limit.
        let both = events(request("/demo/files", length: 60) + request("/demo/x", length: 5), split: split)
        #expect(both.filter { $0 == .end }.count == 2)
        #expect(events(request("/demo/files", length: 60) + request("/demo/x", length: 11), split: split).last?.error?.status == 413)
    }

    @Test(arguments: [nil, 1, 5])
    func chunkedBodiesCountAgainstTheRouteLimit(split: Int?) {
        #expect(events(chunked("/demo/files", chunks: [40, 40, 20]), split: split).last == .end)
        #expect(events(chunked("/demo/files", chunks: [40, 40, 21]), split: split).last?.error?.status == 413)
        #expect(events(chunked("/demo/other", chunks: [6, 5]), split: split).last?.error?.status == 413)
    }
}
