// libFuzzer target: the RESP2/RESP3 reply decoder (and the command encoder on what it yields).
// Invariants beyond "no crash": the same bytes fed whole, split at a point chosen by the input,
// and one byte at a time give the same values and the same error; nothing decoded breaks the
// limits; a decoded value written back as RESP decodes to itself; bulk strings encoded as a
// command decode to that command.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRedis(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let limits = RESPDecoderLimits(maxBulkLength: 512, maxAggregateLength: 64, maxDepth: 8, maxLineLength: 256, maxValueBytes: 4096)
    let whole = run([bytes], limits)
    let cut = size == 0 ? 0 : Int(bytes[0]) % (size + 1)
    let split = run([Array(bytes[..<cut]), Array(bytes[cut...])], limits)
    let drip = run(bytes.map { [$0] }, limits)
    precondition(whole == split, "split feeding changed the values")
    precondition(whole == drip, "byte-by-byte feeding changed the values")

    for value in whole.raw {
        check(value, depth: 1, limits)
        // Written back as RESP3, the value decodes to itself.
        let again = run([write(value)], RESPDecoderLimits())
        precondition(again.error == nil && again.values == [canonical(value)], "round trip changed \(value)")
    }
    // The encoder: bulk strings found in the input, sent as a command, come back intact.
    let arguments = whole.raw.compactMap { value -> RedisArgument? in
        if case .bulkString(let payload) = value { return .bytes(payload) }
        return nil
    }
    if !arguments.isEmpty {
        var encoder = RESPCommandEncoder()
        encoder.encode(arguments)
        var decoder = RESPDecoder()
        decoder.feed(encoder.buffer)
        let decoded = try? decoder.next()
        precondition(decoded == .array(arguments.map { .bulkString($0.bytes) }), "encoder round trip")
    }
    return 0
}

/// The values (in canonical text, so NaN equals NaN) and the error of one feeding.
private struct Outcome: Equatable {
    var values: [String] = []
    var error: RedisError?
    /// The values themselves (compared through `values`).
    var raw: [RedisValue] = []

    static func == (a: Outcome, b: Outcome) -> Bool { a.values == b.values && a.error == b.error }
}

private func run(_ chunks: [[UInt8]], _ limits: RESPDecoderLimits) -> Outcome {
    var decoder = RESPDecoder(limits: limits)
    var outcome = Outcome()
    for chunk in chunks {
        decoder.feed(chunk)
        do {
            while let value = try decoder.next() {
                outcome.values.append(canonical(value))
                outcome.raw.append(value)
            }
        } catch {
            outcome.error = error
            break
        }
    }
    return outcome
}

private func check(_ value: RedisValue, depth: Int, _ limits: RESPDecoderLimits) {
    switch value {
    case .bulkString(let payload), .verbatimString(_, let payload):
        precondition(payload.count <= limits.maxBulkLength, "bulk over the limit")
    case .array(let items), .set(let items), .push(let items):
        precondition(depth <= limits.maxDepth && items.count <= limits.maxAggregateLength, "aggregate over the limits")
        for item in items { check(item, depth: depth + 1, limits) }
    case .map(let pairs):
        precondition(depth <= limits.maxDepth && pairs.count <= limits.maxAggregateLength, "map over the limits")
        for pair in pairs { check(pair.key, depth: depth + 1, limits); check(pair.value, depth: depth + 1, limits) }
    case .attributed(let attributes, let inner):
        for pair in attributes { check(pair.key, depth: depth + 1, limits); check(pair.value, depth: depth + 1, limits) }
        check(inner, depth: depth, limits)
    default:
        break
    }
}

private func canonical(_ value: RedisValue) -> String {
    String(decoding: write(value), as: UTF8.self)
}

/// RESP3 bytes for a value (errors as blob errors: simple errors cannot hold CR or LF).
private func write(_ value: RedisValue) -> [UInt8] {
    func line(_ prefix: String, _ text: String) -> [UInt8] { Array((prefix + text + "\r\n").utf8) }
    func blob(_ prefix: String, _ payload: [UInt8]) -> [UInt8] { line(prefix, String(payload.count)) + payload + [13, 10] }
    switch value {
    case .simpleString(let text): return blob("$", Array(text.utf8))
    case .error(let text): return blob("!", Array(text.utf8))
    case .integer(let number): return line(":", String(number))
    case .bulkString(let payload): return blob("$", payload)
    case .null: return line("_", "")
    case .array(let items): return line("*", String(items.count)) + items.flatMap(write)
    case .set(let items): return line("~", String(items.count)) + items.flatMap(write)
    case .push(let items): return line(">", String(items.count)) + items.flatMap(write)
    case .map(let pairs): return line("%", String(pairs.count)) + pairs.flatMap { write($0.key) + write($0.value) }
    case .double(let number): return line(",", number.isNaN ? "nan" : number == .infinity ? "inf" : number == -.infinity ? "-inf" : "\(number)")
    case .boolean(let flag): return line("#", flag ? "t" : "f")
    case .bigNumber(let text): return line("(", text)
    case .verbatimString(let format, let text): return blob("=", Array((format + ":").utf8) + text)
    case .attributed(let attributes, let inner):
        return line("|", String(attributes.count)) + attributes.flatMap { write($0.key) + write($0.value) } + write(inner)
    }
}
