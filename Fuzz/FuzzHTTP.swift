// libFuzzer target: the HTTP/1.1 request parser.
// Invariants beyond "no crash": the same bytes fed whole and split at a point chosen by the
// input give the same events (after merging adjacent body chunks), and nothing follows .error.
import ParleyHTTP

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var whole = HTTPRequestParser(limits: HTTPParserLimits(maxBodyBytes: 4096))
    let one = normalize(whole.feed(bytes))
    var split = HTTPRequestParser(limits: HTTPParserLimits(maxBodyBytes: 4096))
    let cut = size == 0 ? 0 : Int(bytes[0]) % (size + 1)
    let two = normalize(split.feed(Array(bytes[..<cut])) + split.feed(Array(bytes[cut...])))
    precondition(one == two, "split feeding changed the events")
    if let index = one.firstIndex(where: { if case .error = $0 { return true } else { return false } }) {
        precondition(index == one.count - 1, "events after .error")
    }
    return 0
}

private func normalize(_ events: [HTTPParserEvent]) -> [HTTPParserEvent] {
    var out: [HTTPParserEvent] = []
    for event in events {
        switch (out.last, event) {
        case (.body(let a)?, .body(let b)): out[out.count - 1] = .body(a + b)
        case (.upgrade(let a)?, .upgrade(let b)): out[out.count - 1] = .upgrade(leftover: a + b)
        default: out.append(event)
        }
    }
    return out
}
