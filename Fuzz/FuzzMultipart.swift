// libFuzzer target: the multipart/form-data parser and the Range/Content-Type helpers.
// Input: the first byte picks chunk sizes, the rest is the body (boundary "XyZ").
// Invariants: whole, byte-by-byte and chunked feeding give the same events (body chunks
// merged); body bytes never exceed the input; every part begins before its body and ends
// before the next; at most one failure, last; limits hold.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMultipart(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let seed = Int(data[0])
    let body = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let limits = MultipartLimits(maxHeaderBytes: 256, maxParts: 4, maxTotalBytes: 4096, maxPreambleBytes: 64)

    func run(_ chunkSize: (Int) -> Int) -> [MultipartEvent] {
        var parser = MultipartParser(boundary: "XyZ", limits: limits)
        var events: [MultipartEvent] = []
        var offset = 0
        var index = 0
        while offset < body.count {
            let n = max(1, min(body.count - offset, chunkSize(index)))
            events += parser.feed(body[offset..<offset + n])
            offset += n
            index += 1
        }
        events += parser.finish()
        return merged(events)
    }
    let whole = run { _ in Int.max }
    let bytewise = run { _ in 1 }
    let chunked = run { (($0 &* 31 &+ seed) % 13) + 1 }
    precondition(whole == bytewise, "byte-by-byte feeding changed the events")
    precondition(whole == chunked, "chunked feeding changed the events")

    var inPart = false
    var parts = 0
    var bodyBytes = 0
    for (index, event) in whole.enumerated() {
        switch event {
        case .partBegin:
            precondition(!inPart, "a part began inside a part")
            inPart = true
            parts += 1
        case .body(let bytes):
            precondition(inPart, "body outside a part")
            bodyBytes += bytes.count
        case .partEnd:
            precondition(inPart, "a part ended twice")
            inPart = false
        case .end:
            precondition(!inPart, "the body ended inside a part")
        case .failed:
            precondition(index == whole.count - 1, "events after a failure")
        }
    }
    precondition(parts <= limits.maxParts, "too many parts")
    precondition(bodyBytes <= body.count, "more body than input")

    // The header-value helpers on the same bytes.
    let text = String(decoding: body.prefix(200), as: UTF8.self)
    if let boundary = MultipartParser.boundary(fromContentType: text) {
        precondition((1...70).contains(boundary.utf8.count), "boundary length")
    }
    switch ByteRangeRequest(header: text, size: seed * 7) {
    case .partial(let range):
        precondition(range.lowerBound >= 0 && range.upperBound < seed * 7, "range outside the file")
    case .whole, .unsatisfiable:
        break
    }
    return 0
}

private func merged(_ events: [MultipartEvent]) -> [MultipartEvent] {
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
