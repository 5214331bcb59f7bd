@testable import ParleyHTTP
@_exported import ParleyTestSupport


func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Merges adjacent `.body` chunks (and adjacent `.upgrade` hand-backs): how a body is split
/// depends on how the bytes arrived, the bytes themselves must not.
func normalized(_ events: [HTTPParserEvent]) -> [HTTPParserEvent] {
    var out: [HTTPParserEvent] = []
    for event in events {
        switch (out.last, event) {
        case (.body(let a)?, .body(let b)):
            out[out.count - 1] = .body(a + b)
        case (.upgrade(let a)?, .upgrade(let b)):
            out[out.count - 1] = .upgrade(leftover: a + b)
        case (_, .body(let b)) where b.isEmpty:
            continue
        default:
            out.append(event)
        }
    }
    return out
}

/// Feeds `input` split at the given chunk sizes (the last chunk takes the rest).
func parse(_ input: [UInt8], chunks: [Int]? = nil, limits: HTTPParserLimits = .init()) -> [HTTPParserEvent] {
    var parser = HTTPRequestParser(limits: limits)
    guard let chunks else { return parser.feed(input) }
    var events: [HTTPParserEvent] = []
    var offset = 0
    for size in chunks where offset < input.count {
        let end = min(input.count, offset + size)
        events += parser.feed(Array(input[offset..<end]))
        offset = end
    }
    if offset < input.count { events += parser.feed(Array(input[offset...])) }
    return events
}

/// The drip-feed check: one piece, one byte at a time and random splits (several seeds)
/// must all give the same normalized events. Returns the one-piece events.
func dripFeed(_ input: [UInt8], limits: HTTPParserLimits = .init(),
              seeds: [UInt64] = [1, 2, 3, 42, 1234]) -> (events: [HTTPParserEvent], consistent: Bool) {
    let whole = normalized(parse(input, limits: limits))
    var consistent = normalized(parse(input, chunks: Array(repeating: 1, count: input.count), limits: limits)) == whole
    for seed in seeds {
        var rng = SeededRNG(seed: seed)
        var chunks: [Int] = []
        var total = 0
        while total < input.count {
            let size = Int.random(in: 1...max(1, min(64, input.count / 3 + 1)), using: &rng)
            chunks.append(size)
            total += size
        }
        if normalized(parse(input, chunks: chunks, limits: limits)) != whole { consistent = false }
    }
    return (whole, consistent)
}

extension HTTPParserEvent {
    var head: HTTPRequestHead? { if case .head(let h) = self { h } else { nil } }
    var error: HTTPParseError? { if case .error(let e) = self { e } else { nil } }
}
