import Testing
@testable import ParleyRedis
import ParleyTestSupport

/// What a decoder made of some input: the values, then the error that stopped it (if any).
struct Decoded: Equatable {
    var values: [RedisValue] = []
    var error: RedisError?
}

func decode(_ chunks: [[UInt8]], limits: RESPDecoderLimits = RESPDecoderLimits()) -> Decoded {
    var decoder = RESPDecoder(limits: limits)
    var result = Decoded()
    for chunk in chunks {
        decoder.feed(chunk)
        do {
            while let value = try decoder.next() { result.values.append(value) }
        } catch {
            result.error = error
            return result
        }
    }
    return result
}

/// Decodes `input` whole, one byte at a time and in random chunks (several seeds); all must
/// agree. Returns the whole-input result.
func dripFeed(_ input: [UInt8], limits: RESPDecoderLimits = RESPDecoderLimits(),
              sourceLocation: SourceLocation = #_sourceLocation) -> Decoded {
    let whole = decode([input], limits: limits)
    let bytewise = decode(input.map { [$0] }, limits: limits)
    #expect(bytewise == whole, "one byte at a time differs", sourceLocation: sourceLocation)
    for seed in 1...5 as ClosedRange<UInt64> {
        var rng = SeededRNG(seed: seed)
        var chunks: [[UInt8]] = []
        var index = 0
        while index < input.count {
            let size = Int.random(in: 1...max(1, min(17, input.count - index)), using: &rng)
            chunks.append(Array(input[index..<(index + size)]))
            index += size
        }
        #expect(decode(chunks, limits: limits) == whole, "random chunks (seed \(seed)) differ", sourceLocation: sourceLocation)
    }
    return whole
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

@Suite struct RESPDecoderTests {
    @Test func resp2Types() throws {
        let input = "+OK\r\n-ERR unknown command 'x'\r\n:42\r\n:-7\r\n$5\r\nhello\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n"
            + "*3\r\n:1\r\n$3\r\nfoo\r\n*2\r\n+a\r\n$-1\r\n"
        let result = dripFeed(bytes(input))
        #expect(result.error == nil)
        #expect(result.values == [
            .simpleString("OK"), .error("ERR unknown command 'x'"), .integer(42), .integer(-7),
            .bulkString(bytes("hello")), .bulkString([]), .null, .null, .array([]),
            .array([.integer(1), .bulkString(bytes("foo")), .array([.simpleString("a"), .null])]),
        ])
    }

    @Test func resp3Types() throws {
        let input = "_\r\n#t\r\n#f\r\n,1.5\r\n,-2\r\n,inf\r\n,-inf\r\n(3492890328409238509324850943850943825024385\r\n"
            + "!21\r\nSYNTAX invalid syntax\r\n=15\r\ntxt:Some string\r\n"
            + "%2\r\n+first\r\n:1\r\n$6\r\nsecond\r\n#f\r\n~3\r\n:1\r\n:2\r\n:3\r\n"
            + ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nbody\r\n"
        let result = dripFeed(bytes(input))
        #expect(result.error == nil)
        #expect(result.values == [
            .null, .boolean(true), .boolean(false), .double(1.5), .double(-2), .double(.infinity), .double(-.infinity),
            .bigNumber("3492890328409238509324850943850943825024385"),
            .error("SYNTAX invalid syntax"), .verbatimString(format: "txt", text: bytes("Some string")),
            .map([RedisPair(key: .simpleString("first"), value: .integer(1)),
                  RedisPair(key: .bulkString(bytes("second")), value: .boolean(false))]),
            .set([.integer(1), .integer(2), .integer(3)]),
            .push([.bulkString(bytes("message")), .bulkString(bytes("ch")), .bulkString(bytes("body"))]),
        ])
    }

    @Test func nanDouble() throws {
        // NaN is not equal to itself, so compare by hand instead of with dripFeed.
        for chunks in [[bytes(",nan\r\n")], bytes(",nan\r\n").map { [$0] }] {
            let result = decode(chunks)
            guard result.values.count == 1, case .double(let value) = result.values[0] else {
                Issue.record("no double: \(result)")
                return
            }
            #expect(value.isNaN)
        }
    }

    @Test func attributesAttachToTheNextValueAtTheirLevel() throws {
        // An attribute before a top-level value, and one inside an array (not an element).
        let input = "|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*2\r\n:2039123\r\n:9543892\r\n"
            + "*2\r\n:1\r\n|1\r\n+ttl\r\n:3600\r\n:2\r\n"
        let result = dripFeed(bytes(input))
        #expect(result.error == nil)
        #expect(result.values == [
            .attributed(attributes: [RedisPair(key: .simpleString("key-popularity"),
                                               value: .map([RedisPair(key: .bulkString(bytes("a")), value: .double(0.19))]))],
                        value: .array([.integer(2_039_123), .integer(9_543_892)])),
            .array([.integer(1), .attributed(attributes: [RedisPair(key: .simpleString("ttl"), value: .integer(3600))],
                                             value: .integer(2))]),
        ])
        #expect(result.values[0].withoutAttributes == .array([.integer(2_039_123), .integer(9_543_892)]))
    }

    @Test func binaryBulkStringsKeepEveryByte() throws {
        let payload: [UInt8] = [0, 13, 10, 255, 36, 42, 13, 10, 13]
        let result = dripFeed(bytes("$\(payload.count)\r\n") + payload + bytes("\r\n"))
        #expect(result.values == [.bulkString(payload)])
    }

    @Test func deepAndWideNesting() throws {
        var input = ""
        for _ in 0..<10 { input += "*2\r\n:1\r\n" }
        input += ":0\r\n"
        var expected = RedisValue.integer(0)
        for _ in 0..<10 { expected = .array([.integer(1), expected]) }
        #expect(dripFeed(bytes(input)).values == [expected])

        let wide = "*1000\r\n" + String(repeating: ":7\r\n", count: 1000)
        #expect(dripFeed(bytes(wide)).values == [.array(Array(repeating: .integer(7), count: 1000))])
    }

    @Test func integerEdges() throws {
        #expect(dripFeed(bytes(":9223372036854775807\r\n:-9223372036854775808\r\n:+5\r\n")).values
                == [.integer(.max), .integer(.min), .integer(5)])
        #expect(dripFeed(bytes(":9223372036854775808\r\n")).error?.code == .protocolViolation)
        #expect(dripFeed(bytes(":12a\r\n")).error?.code == .protocolViolation)
        #expect(dripFeed(bytes(":\r\n")).error?.code == .protocolViolation)
    }

    @Test func valuesBeforeAnErrorAreReturnedThenTheErrorSticks() throws {
        var decoder = RESPDecoder()
        decoder.feed(bytes("+one\r\n:2\r\n?oops\r\n+never\r\n"))
        #expect(try decoder.next() == .simpleString("one"))
        #expect(try decoder.next() == .integer(2))
        #expect(throws: RedisError.self) { try decoder.next() }
        decoder.feed(bytes("+more\r\n"))
        #expect(throws: RedisError.self) { try decoder.next() }
        #expect(decoder.hasFailed)
    }

    @Test func garbageIsAProtocolViolation() throws {
        let garbage = [
            "hello\r\n",                    // unknown type byte
            "+OK\rX",                       // CR without LF
            "+OK\n",                        // bare LF
            "$3\r\nabcd\r\n",               // payload longer than declared
            "$3\r\nabc\n",                  // payload not ended by CRLF
            "$-2\r\n",                      // negative length
            "$abc\r\n",                     // not a length
            "*-5\r\n",                      // negative count
            "%-1\r\n",                      // null map is not RESP
            "#x\r\n",                       // not a boolean
            ",1.2.3x\r\n",                  // not a double
            ",0x10\r\n",                    // no hex
            "(12a\r\n",                     // not a big number
            "_x\r\n",                       // null with content
            "=2\r\nab\r\n",                 // verbatim without format
            "=5\r\n\u{1}xt:a\r\n",            // verbatim with a format that is not text
            "$?\r\n",                       // streamed strings are not supported
            "*?\r\n",
        ]
        for input in garbage {
            let result = dripFeed(bytes(input))
            #expect(result.values.isEmpty, "\(input.debugDescription)")
            #expect(result.error?.code == .protocolViolation, "\(input.debugDescription)")
        }
    }

    @Test func limitsFailAsSoonAsTheHeaderSaysSo() throws {
        let limits = RESPDecoderLimits(maxBulkLength: 10, maxAggregateLength: 4, maxDepth: 3, maxLineLength: 16, maxValueBytes: 64)
        #expect(dripFeed(bytes("$10\r\n0123456789\r\n"), limits: limits).values == [.bulkString(bytes("0123456789"))])
        // Only the header has arrived: the decoder fails without waiting for the payload.
        #expect(decode([bytes("$11\r\n")], limits: limits).error?.message.contains("limit 10") == true)
        #expect(decode([bytes("*5\r\n")], limits: limits).error?.message.contains("limit 4") == true)
        #expect(decode([bytes("%5\r\n")], limits: limits).error?.code == .protocolViolation)
        #expect(dripFeed(bytes("*1\r\n*1\r\n*1\r\n:1\r\n"), limits: limits).values == [.array([.array([.array([.integer(1)])])])])
        #expect(dripFeed(bytes("*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"), limits: limits).error?.message.contains("deeper") == true)
        // An empty aggregate is a level too (found by the fuzzer: `%0` one level past the limit).
        #expect(dripFeed(bytes("*1\r\n*1\r\n*0\r\n"), limits: limits).values == [.array([.array([.array([])])])])
        #expect(dripFeed(bytes("*1\r\n*1\r\n*1\r\n%0\r\n"), limits: limits).error?.message.contains("deeper") == true)
        #expect(dripFeed(bytes("+" + String(repeating: "x", count: 17) + "\r\n"), limits: limits).error?.message.contains("line") == true)
        // 4 bulk strings of 10 bytes: each fits, the whole reply (> 64 bytes) does not.
        let big = "*4\r\n" + String(repeating: "$10\r\n0123456789\r\n", count: 4)
        #expect(dripFeed(bytes(big), limits: limits).error?.message.contains("larger than 64") == true)
        // The byte count starts again for every top-level value.
        let many = String(repeating: "$10\r\n0123456789\r\n", count: 20)
        #expect(dripFeed(bytes(many), limits: limits).values.count == 20)
    }

    @Test func aHugeDeclaredCountJustWaitsForItsElements() throws {
        var decoder = RESPDecoder()
        decoder.feed(bytes("*1000000\r\n:1\r\n"))
        #expect(try decoder.next() == nil)
        #expect(!decoder.hasFailed)
    }

    @Test func randomValuesRoundTripThroughAnyChunking() throws {
        var rng = SeededRNG(seed: 42)
        for _ in 0..<50 {
            let value = randomValue(depth: 0, using: &rng)
            let result = dripFeed(serialize(value))
            #expect(result.error == nil)
            #expect(result.values == [value])
        }
    }
}

/// A random RESP3 value (no doubles: NaN breaks equality).
func randomValue(depth: Int, using rng: inout SeededRNG) -> RedisValue {
    let choice = Int.random(in: 0..<(depth > 3 ? 6 : 10), using: &rng)
    switch choice {
    case 0: return .simpleString(String((0..<Int.random(in: 0...8, using: &rng)).map { _ in Character(UnicodeScalar(UInt8.random(in: 97...122, using: &rng))) }))
    case 1: return .integer(Int64.random(in: .min ... .max, using: &rng))
    case 2: return .bulkString((0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
    case 3: return .null
    case 4: return .boolean(Bool.random(using: &rng))
    case 5: return .error("ERR " + String(Int.random(in: 0...999, using: &rng)))
    case 6: return .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in randomValue(depth: depth + 1, using: &rng) })
    case 7: return .set((0..<Int.random(in: 0...4, using: &rng)).map { _ in randomValue(depth: depth + 1, using: &rng) })
    case 8: return .map((0..<Int.random(in: 0...3, using: &rng)).map { _ in
        RedisPair(key: randomValue(depth: depth + 1, using: &rng), value: randomValue(depth: depth + 1, using: &rng)) })
    default: return .push((0..<Int.random(in: 1...4, using: &rng)).map { _ in randomValue(depth: depth + 1, using: &rng) })
    }
}

/// The RESP3 bytes of a value (test oracle for the decoder).
func serialize(_ value: RedisValue) -> [UInt8] {
    func line(_ prefix: String, _ text: String) -> [UInt8] { bytes(prefix + text + "\r\n") }
    switch value {
    case .simpleString(let text): return line("+", text)
    case .error(let text): return line("-", text)
    case .integer(let value): return line(":", String(value))
    case .bulkString(let payload): return line("$", String(payload.count)) + payload + bytes("\r\n")
    case .null: return bytes("_\r\n")
    case .array(let values): return line("*", String(values.count)) + values.flatMap(serialize)
    case .set(let values): return line("~", String(values.count)) + values.flatMap(serialize)
    case .push(let values): return line(">", String(values.count)) + values.flatMap(serialize)
    case .map(let pairs): return line("%", String(pairs.count)) + pairs.flatMap { serialize($0.key) + serialize($0.value) }
    case .double(let value): return line(",", String(value))
    case .boolean(let value): return line("#", value ? "t" : "f")
    case .bigNumber(let text): return line("(", text)
    case .verbatimString(let format, let text): return line("=", String(text.count + 4)) + bytes(format + ":") + text + bytes("\r\n")
    case .attributed(let attributes, let value):
        return line("|", String(attributes.count)) + attributes.flatMap { serialize($0.key) + serialize($0.value) } + serialize(value)
    }
}
