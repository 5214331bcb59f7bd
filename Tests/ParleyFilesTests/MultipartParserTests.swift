import Testing
@testable import ParleyFiles

/// Merges adjacent body chunks: how a body is split depends on how the bytes arrived.
func normalized(_ events: [MultipartEvent]) -> [MultipartEvent] {
    var out: [MultipartEvent] = []
    for event in events {
        if case .body(let more) = event {
            if more.isEmpty { continue }
            if case .body(let earlier)? = out.last {
                out[out.count - 1] = .body(earlier + more)
                continue
            }
        }
        out.append(event)
    }
    return out
}

/// Feeds `input` whole, one byte at a time, and in random chunks (several seeds); returns
/// the normalized events of the whole feed and whether every feeding agreed.
func dripFeed(_ input: [UInt8], boundary: String = "XyZ", limits: MultipartLimits = .init(),
              finish: Bool = true) -> (events: [MultipartEvent], consistent: Bool) {
    func run(_ chunks: [ArraySlice<UInt8>]) -> [MultipartEvent] {
        var parser = MultipartParser(boundary: boundary, limits: limits)
        var events: [MultipartEvent] = []
        for chunk in chunks { events += parser.feed(chunk) }
        if finish { events += parser.finish() }
        return normalized(events)
    }
    let whole = run([input[...]])
    var consistent = run(input.indices.map { input[$0...$0] }) == whole
    for seed in 1...5 as ClosedRange<UInt64> {
        var generator = SeededGenerator(seed: seed)
        var chunks: [ArraySlice<UInt8>] = []
        var offset = 0
        while offset < input.count {
            let size = Int.random(in: 1...max(1, min(97, input.count - offset)), using: &generator)
            chunks.append(input[offset..<offset + size])
            offset += size
        }
        consistent = consistent && run(chunks) == whole
    }
    return (whole, consistent)
}

func crlf(_ s: String) -> [UInt8] { Array(s.replacingOccurrences(of: "\n", with: "\r\n").utf8) }

@Suite struct MultipartParserTests {
    @Test func formWithFieldAndFile() {
        let body = crlf("""
        --XyZ
        Content-Disposition: form-data; name="caption"

        a cat
        --XyZ
        Content-Disposition: form-data; name="file"; filename="cat.jpg"
        Content-Type: image/jpeg
        """) + crlf("\n\n") + [0xFF, 0xD8, 0x0D, 0x0A, 0x2D, 0x2D, 0x58, 0x79, 0x00, 0xFF] + crlf("\n--XyZ--\n")
        let (events, consistent) = dripFeed(body)
        #expect(consistent)
        #expect(events == [
            .partBegin(MultipartPart(name: "caption", headers: [
                MultipartHeader(name: "Content-Disposition", value: "form-data; name=\"caption\""),
            ])),
            .body(Array("a cat".utf8)),
            .partEnd,
            .partBegin(MultipartPart(name: "file", filename: "cat.jpg", contentType: "image/jpeg", headers: [
                MultipartHeader(name: "Content-Disposition", value: "form-data; name=\"file\"; filename=\"cat.jpg\""),
                MultipartHeader(name: "Content-Type", value: "image/jpeg"),
            ])),
            // CRLF--Xy (a boundary prefix) inside the body is body.
            .body([0xFF, 0xD8, 0x0D, 0x0A, 0x2D, 0x2D, 0x58, 0x79, 0x00, 0xFF]),
            .partEnd,
            .end,
        ])
    }

    @Test func preambleEpilogueAndPadding() {
        let body = crlf("""
        This is the preamble.
        --XyZ \t
        content-disposition: form-data; name=a

        1
        --XyZ--
        epilogue, ignored --XyZ
        """)
        let (events, consistent) = dripFeed(body)
        #expect(consistent)
        #expect(events.count == 4)
        if case .partBegin(let part) = events[0] { #expect(part.name == "a") } else { Issue.record("\(events)") }
        #expect(events[1] == .body(Array("1".utf8)))
        #expect(events[3] == .end)
    }

    @Test func emptyHeadersAndEmptyBodies() {
        let body = crlf("--XyZ\n\n\n--XyZ\nContent-Disposition: form-data; name=\"e\"\n\n\n--XyZ--")
        let (events, consistent) = dripFeed(body)
        #expect(consistent)
        #expect(events == [
            .partBegin(MultipartPart()), .partEnd,
            .partBegin(MultipartPart(name: "e", headers: [MultipartHeader(name: "Content-Disposition", value: "form-data; name=\"e\"")])),
            .partEnd, .end,
        ])
    }

    @Test func fileNamesAsBrowsersAndRFCsSendThem() {
        func filename(_ disposition: String) -> String? {
            let (events, _) = dripFeed(crlf("--XyZ\nContent-Disposition: \(disposition)\n\nx\n--XyZ--"))
            if case .partBegin(let part)? = events.first { return part.filename }
            return nil
        }
        #expect(filename(#"form-data; name="f"; filename="a \"quoted\" name.txt""#) == #"a "quoted" name.txt"#)
        #expect(filename(#"form-data; name="f"; filename="café.jpg""#) == "café.jpg")
        #expect(filename(#"form-data; name="f"; filename="x.jpg"; filename*=UTF-8''%E2%82%AC%20rates.jpg"#) == "€ rates.jpg")
        #expect(filename(#"form-data; name="f"; filename*=utf-8''bad%ZZ; filename="fallback.txt""#) == "fallback.txt")
        #expect(filename(#"form-data; name="f"; filename="C:\\fakepath\\cat.jpg""#) == #"C:\fakepath\cat.jpg"#)
        #expect(filename(#"form-data; name="f"; FILENAME=plain.txt"#) == "plain.txt")
        #expect(filename(#"form-data; name="f""#) == nil)
    }

    @Test func boundaryFromContentType() {
        #expect(MultipartParser.boundary(fromContentType: "multipart/form-data; boundary=----WebKitFormBoundaryAbC123")
            == "----WebKitFormBoundaryAbC123")
        #expect(MultipartParser.boundary(fromContentType: #"Multipart/Form-Data; charset=utf-8; boundary="a b:c""#) == "a b:c")
        #expect(MultipartParser.boundary(fromContentType: "multipart/form-data") == nil)
        #expect(MultipartParser.boundary(fromContentType: "multipart/mixed; boundary=x") == nil)
        #expect(MultipartParser.boundary(fromContentType: "multipart/form-data; boundary=") == nil)
        #expect(MultipartParser.boundary(fromContentType: "multipart/form-data; boundary=" + String(repeating: "a", count: 71)) == nil)
        #expect(MultipartParser.boundary(fromContentType: #"multipart/form-data; boundary="ends with space ""#) == nil)
        #expect(MultipartParser.boundary(fromContentType: "multipart/form-data; boundary=semi<colon>") == nil)
    }

    @Test func truncatedBodyIsRefusedAtTheEnd() {
        let body = crlf("--XyZ\nContent-Disposition: form-data; name=\"f\"\n\nhalf a fi")
        let (events, consistent) = dripFeed(body)
        #expect(consistent)
        guard case .failed(let error)? = events.last else { Issue.record("\(events)"); return }
        #expect(error.code == .truncated)
        #expect(events.first == .partBegin(MultipartPart(name: "f", headers: [
            MultipartHeader(name: "Content-Disposition", value: "form-data; name=\"f\""),
        ])))
        var parser = MultipartParser(boundary: "XyZ")
        #expect(parser.finish().count == 1, "an empty body is truncated too")
    }

    @Test func malformedInput() {
        for body in [
            crlf("--XyZ\nno colon here\n\nx\n--XyZ--"),
            crlf("--XyZ\n folded: header\n\nx\n--XyZ--"),
            crlf("--XyZ\nContent-Disposition: form-data; name=\"unterminated\n\nx\n--XyZ--"),
            crlf("--XyZ\nContent-Type: a\nContent-Type: b\n\nx\n--XyZ--"),
            crlf("--XyZ-x\n\n"),
            Array("--XyZ\r\nA: b\rc\r\n\r\nx".utf8),
            crlf("--XyZ\n\nbody\n--XyZtrailing\n"),
        ] {
            let (events, consistent) = dripFeed(body)
            #expect(consistent)
            guard case .failed(let error)? = events.last else { Issue.record("accepted: \(events)"); continue }
            #expect(error.code == .malformed, "\(error)")
        }
    }

    @Test func limitsGiveTheSameEventsHoweverTheBytesArrive() {
        var limits = MultipartLimits()
        limits.maxParts = 2
        let three = crlf("--XyZ\n\na\n--XyZ\n\nb\n--XyZ\n\nc\n--XyZ--")
        let (parts, partsConsistent) = dripFeed(three, limits: limits)
        #expect(partsConsistent)
        #expect(parts.last == .failed(MultipartError(.tooManyParts, "more than 2 parts")))
        #expect(parts.filter { if case .partBegin = $0 { true } else { false } }.count == 2)

        let header = "Content-Disposition: form-data; n=1"
        limits = MultipartLimits(maxHeaderBytes: header.utf8.count)
        let fits = crlf("--XyZ\n\(header)\n\nx\n--XyZ--")  // exactly at the limit
        #expect(dripFeed(fits, limits: limits).events.last == .end)
        let big = crlf("--XyZ\n\(header)2\n\nx\n--XyZ--")
        let (headerEvents, headerConsistent) = dripFeed(big, limits: limits)
        #expect(headerConsistent)
        guard case .failed(let headerError)? = headerEvents.last else { Issue.record("\(headerEvents)"); return }
        #expect(headerError.code == .headerTooLarge)

        limits = MultipartLimits(maxTotalBytes: 30)
        let long = crlf("--XyZ\n\n0123456789012345678901234567890123456789\n--XyZ--")
        let (total, totalConsistent) = dripFeed(long, limits: limits)
        #expect(totalConsistent)
        guard case .failed(let totalError)? = total.last else { Issue.record("\(total)"); return }
        #expect(totalError.code == .tooLarge)
        #expect(total.first == .partBegin(MultipartPart()))

        limits = MultipartLimits(maxPreambleBytes: 10)
        #expect(dripFeed(crlf("0123456789\n--XyZ\n\nx\n--XyZ--"), limits: limits).events.last == .end)
        let (preamble, preambleConsistent) = dripFeed(crlf("0123456789A\n--XyZ\n\nx\n--XyZ--"), limits: limits)
        #expect(preambleConsistent)
        #expect(preamble.count == 1)
        let (noBoundary, noBoundaryConsistent) = dripFeed(Array(repeating: 0x41, count: 500), limits: limits, finish: false)
        #expect(noBoundaryConsistent)
        #expect(noBoundary.count == 1)
    }

    @Test func largeBinaryBodyStreamsWithBoundedBuffering() {
        var generator = SeededGenerator(seed: 9)
        var payload = (0..<200_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        // Sprinkle near-boundaries into the payload.
        for at in stride(from: 1000, to: 190_000, by: 17_000) {
            payload.replaceSubrange(at..<at + 7, with: crlf("\n--XyZ").prefix(6) + [0])
        }
        let body = crlf("--XyZ\nContent-Disposition: form-data; name=\"f\"; filename=\"b.bin\"\n\n") + payload + crlf("\n--XyZ--\n")
        var parser = MultipartParser(boundary: "XyZ")
        var received: [UInt8] = []
        var offset = 0
        var maxChunk = 0
        while offset < body.count {
            let size = min(4096, body.count - offset)
            for event in parser.feed(body[offset..<offset + size]) {
                if case .body(let bytes) = event {
                    received += bytes
                    maxChunk = max(maxChunk, bytes.count)
                }
            }
            offset += size
        }
        #expect(parser.finish().isEmpty)
        #expect(parser.isComplete)
        #expect(received.count == payload.count)
        let intact = received == payload  // compared outside #expect: 200 kB would be printed
        #expect(intact)
        #expect(maxChunk <= 4096 + 9, "body comes out as it arrives, not at the end")
    }
}

@Suite struct MultipartErrorMappingTests {
    @Test func httpStatuses() {
        #expect(MultipartError(.tooLarge, "big").fileError.code.httpStatus == 413)
        for code in [MultipartError.Code.malformed, .headerTooLarge, .tooManyParts, .truncated] {
            #expect(MultipartError(code, "x").fileError.code.httpStatus == 400)
        }
    }
}
