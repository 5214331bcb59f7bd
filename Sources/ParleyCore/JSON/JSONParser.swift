/// Limits that keep one hostile document from costing the server more than it should.
public struct JSONLimits: Sendable, Hashable {
    /// Deepest allowed nesting of arrays and objects (the top-level container is depth 1).
    public var maxDepth: Int
    /// Largest accepted document, in bytes.
    public var maxBytes: Int
    /// Longest accepted string or key, in UTF-8 bytes after unescaping.
    public var maxStringBytes: Int
    /// Most elements (array) or members (object) in one container.
    public var maxElements: Int

    /// Defaults fit any chat payload: depth 64, 1 MiB documents and strings, 100,000 elements.
    public init(
        maxDepth: Int = 64, maxBytes: Int = 1 << 20, maxStringBytes: Int = 1 << 20,
        maxElements: Int = 100_000
    ) {
        self.maxDepth = maxDepth
        self.maxBytes = maxBytes
        self.maxStringBytes = maxStringBytes
        self.maxElements = maxElements
    }
}

/// Why a document was rejected, and where.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset into the input where the problem was found.
    public var offset: Int
    /// What a person reads, e.g. "leading zeros are not allowed in numbers".
    public var message: String

    /// An error at `offset`.
    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    /// "message at byte N".
    public var description: String { "\(message) at byte \(offset)" }
}

/// A strict RFC 8259 parser working on raw UTF-8 bytes.
///
/// It rejects everything the RFC does not allow (trailing commas, comments, leading zeros,
/// NaN, unescaped control characters, lone surrogates, invalid UTF-8, trailing data) and
/// enforces ``JSONLimits``. It is iterative, so nesting costs heap, never stack.
public enum JSONParser {
    /// Parses one JSON document (whitespace allowed around it).
    public static func parse(
        _ bytes: UnsafeRawBufferPointer, limits: JSONLimits = .init()
    ) throws(JSONParseError) -> JSONValue {
        var parser = ByteParser(bytes: bytes, limits: limits)
        return try parser.parseDocument()
    }

    /// Parses one JSON document (whitespace allowed around it).
    public static func parse(
        _ bytes: [UInt8], limits: JSONLimits = .init()
    ) throws(JSONParseError) -> JSONValue {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(JSONParseError) -> JSONValue in try parse(raw, limits: limits) }
        }
        return try result.get()
    }

    /// Parses one JSON document (whitespace allowed around it).
    public static func parse(
        _ string: String, limits: JSONLimits = .init()
    ) throws(JSONParseError) -> JSONValue {
        var string = string
        let result = string.withUTF8 { buffer in
            Result { () throws(JSONParseError) -> JSONValue in
                try parse(UnsafeRawBufferPointer(buffer), limits: limits)
            }
        }
        return try result.get()
    }
}

private let quote = UInt8(ascii: "\"")
private let backslash = UInt8(ascii: "\\")

private struct ByteParser {
    struct Frame {
        var isObject: Bool
        var valueStart: Int
        var keyStart: Int
    }

    let bytes: UnsafeRawBufferPointer
    let limits: JSONLimits
    var pos = 0
    // Finished values and keys of every open container, flattened; a container's own
    // elements are the tail starting at its frame's start indices.
    var values: [JSONValue] = []
    var keys: [String] = []
    var frames: [Frame] = []
    var scratch: [UInt8] = []

    init(bytes: UnsafeRawBufferPointer, limits: JSONLimits) {
        self.bytes = bytes
        self.limits = limits
        // Room for a typical command (a dozen members, a few levels) up front: growing each
        // stack from empty took a new buffer at 1, 2, 4 and 8 elements.
        if bytes.count > 2 {
            values.reserveCapacity(16)
            keys.reserveCapacity(16)
            frames.reserveCapacity(8)
        }
    }

    func fail(_ offset: Int, _ message: String) -> JSONParseError {
        JSONParseError(offset: offset, message: message)
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while pos < bytes.count {
            switch bytes[pos] {
            case 0x20, 0x0A, 0x0D, 0x09: pos += 1
            default: return
            }
        }
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        if bytes.count > limits.maxBytes {
            throw fail(limits.maxBytes, "document is larger than the limit of \(limits.maxBytes) bytes")
        }
        skipWhitespace()
        let result: JSONValue
        nextValue: while true {
            guard pos < bytes.count else {
                throw fail(pos, "unexpected end of input, expected a value")
            }
            var value: JSONValue
            switch bytes[pos] {
            case UInt8(ascii: "{"):
                try open(isObject: true)
                skipWhitespace()
                if pos < bytes.count && bytes[pos] == UInt8(ascii: "}") {
                    pos += 1
                    frames.removeLast()
                    value = .object(JSONObject())
                } else {
                    try parseKeyAndColon()
                    continue nextValue
                }
            case UInt8(ascii: "["):
                try open(isObject: false)
                skipWhitespace()
                if pos < bytes.count && bytes[pos] == UInt8(ascii: "]") {
                    pos += 1
                    frames.removeLast()
                    value = .array([])
                } else {
                    continue nextValue
                }
            case quote:
                value = .string(try parseString())
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                value = .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                value = .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                value = .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                let start = pos
                pos = try JSONNumber.scan(bytes, from: start)
                value = .number(JSONNumber(validatedText: makeString(start, pos)))
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                throw fail(pos, frames.isEmpty ? "unexpected '\(Character(Unicode.Scalar(bytes[pos])))'"
                    : "expected a value (trailing comma?)")
            case let byte:
                throw fail(pos, "unexpected \(describe(byte)), expected a value")
            }

            // Attach the finished value to its container; close containers that end here.
            while true {
                guard let frame = frames.last else {
                    result = value
                    break nextValue
                }
                if values.count - frame.valueStart >= limits.maxElements {
                    throw fail(pos, "container has more than the limit of \(limits.maxElements) elements")
                }
                values.append(value)
                skipWhitespace()
                guard pos < bytes.count else {
                    throw fail(pos, frame.isObject ? "unterminated object, expected ',' or '}'"
                        : "unterminated array, expected ',' or ']'")
                }
                let byte = bytes[pos]
                if byte == UInt8(ascii: ",") {
                    pos += 1
                    skipWhitespace()
                    if frame.isObject { try parseKeyAndColon() }
                    continue nextValue
                }
                if frame.isObject && byte == UInt8(ascii: "}") {
                    pos += 1
                    frames.removeLast()
                    var entries: [JSONObject.Entry] = []
                    entries.reserveCapacity(values.count - frame.valueStart)
                    for (k, v) in zip(keys[frame.keyStart...], values[frame.valueStart...]) {
                        entries.append(JSONObject.Entry(key: k, value: v))
                    }
                    keys.removeSubrange(frame.keyStart...)
                    values.removeSubrange(frame.valueStart...)
                    value = .object(JSONObject(entries: entries))
                } else if !frame.isObject && byte == UInt8(ascii: "]") {
                    pos += 1
                    frames.removeLast()
                    let elements = Array(values[frame.valueStart...])
                    values.removeSubrange(frame.valueStart...)
                    value = .array(elements)
                } else {
                    throw fail(pos, frame.isObject ? "expected ',' or '}' after an object member, found \(describe(byte))"
                        : "expected ',' or ']' after an array element, found \(describe(byte))")
                }
            }
        }
        skipWhitespace()
        if pos != bytes.count {
            throw fail(pos, "unexpected data after the top-level value")
        }
        return result
    }

    mutating func open(isObject: Bool) throws(JSONParseError) {
        if frames.count >= limits.maxDepth {
            throw fail(pos, "nesting is deeper than the limit of \(limits.maxDepth)")
        }
        frames.append(Frame(isObject: isObject, valueStart: values.count, keyStart: keys.count))
        pos += 1
    }

    /// At an object member: `"key"` `:`, leaving `pos` at the value.
    mutating func parseKeyAndColon() throws(JSONParseError) {
        guard pos < bytes.count else { throw fail(pos, "unterminated object, expected a key") }
        guard bytes[pos] == quote else {
            throw fail(pos, bytes[pos] == UInt8(ascii: "}") ? "expected a key (trailing comma?)"
                : "expected a string key, found \(describe(bytes[pos]))")
        }
        keys.append(try parseString())
        skipWhitespace()
        guard pos < bytes.count && bytes[pos] == UInt8(ascii: ":") else {
            throw fail(pos, "expected ':' after an object key")
        }
        pos += 1
        skipWhitespace()
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let n = literal.utf8CodeUnitCount
        let p = literal.utf8Start
        guard pos + n <= bytes.count else { throw fail(pos, "invalid literal") }
        for i in 0..<n where bytes[pos + i] != p[i] {
            throw fail(pos, "invalid literal")
        }
        pos += n
    }

    func describe(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(String(byte, radix: 16))"
    }

    /// A String from bytes already known to be valid UTF-8.
    func makeString(_ start: Int, _ end: Int) -> String {
        UnsafeRawBufferPointer(rebasing: bytes[start..<end]).withMemoryRebound(to: UInt8.self) {
            String(decoding: $0, as: UTF8.self)
        }
    }

    func checkStringLength(_ length: Int, _ start: Int) throws(JSONParseError) {
        if length > limits.maxStringBytes {
            throw fail(start, "string is longer than the limit of \(limits.maxStringBytes) bytes")
        }
    }

    /// At `"`: parses a string, leaving `pos` after the closing quote.
    mutating func parseString() throws(JSONParseError) -> String {
        let open = pos
        let start = pos + 1
        var i = start
        // Fast path: no escapes, so the string is a slice of the input. Plain ASCII goes eight
        // bytes at a time; a word with anything else in it goes byte by byte.
        while i < bytes.count {
            while i &+ 8 <= bytes.count, !JSONBytes.needsLook(bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { i &+= 8 }
            guard i < bytes.count else { break }
            let b = bytes[i]
            if b == quote {
                try checkStringLength(i - start, open)
                pos = i + 1
                return makeString(start, i)
            }
            if b == backslash { break }
            if b < 0x20 { throw fail(i, "unescaped control character \(describe(b)) in a string") }
            i = b < 0x80 ? i + 1 : try validateUTF8(at: i)
        }
        guard i < bytes.count else { throw fail(open, "unterminated string") }

        scratch.removeAll(keepingCapacity: true)
        var runStart = start
        while true {
            while i &+ 8 <= bytes.count, !JSONBytes.needsLook(bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { i &+= 8 }
            guard i < bytes.count else { throw fail(open, "unterminated string") }
            let b = bytes[i]
            if b == quote {
                scratch.append(contentsOf: bytes[runStart..<i])
                try checkStringLength(scratch.count, open)
                pos = i + 1
                return String(decoding: scratch, as: UTF8.self)
            }
            if b == backslash {
                scratch.append(contentsOf: bytes[runStart..<i])
                i = try unescape(at: i)
                runStart = i
                if scratch.count > limits.maxStringBytes { try checkStringLength(scratch.count, open) }
                continue
            }
            if b < 0x20 { throw fail(i, "unescaped control character \(describe(b)) in a string") }
            i = b < 0x80 ? i + 1 : try validateUTF8(at: i)
        }
    }

    /// At `\`: appends the unescaped bytes to `scratch`; returns the index after the escape.
    mutating func unescape(at start: Int) throws(JSONParseError) -> Int {
        guard start + 1 < bytes.count else { throw fail(start, "unterminated escape sequence") }
        let c = bytes[start + 1]
        let simple: UInt8
        switch c {
        case quote: simple = quote
        case backslash: simple = backslash
        case UInt8(ascii: "/"): simple = UInt8(ascii: "/")
        case UInt8(ascii: "b"): simple = 0x08
        case UInt8(ascii: "f"): simple = 0x0C
        case UInt8(ascii: "n"): simple = 0x0A
        case UInt8(ascii: "r"): simple = 0x0D
        case UInt8(ascii: "t"): simple = 0x09
        case UInt8(ascii: "u"):
            var scalar = try hex4(at: start + 2)
            var next = start + 6
            if scalar >= 0xD800 && scalar <= 0xDBFF {
                guard next + 1 < bytes.count, bytes[next] == backslash, bytes[next + 1] == UInt8(ascii: "u")
                else { throw fail(start, "lone high surrogate \\u\(String(scalar, radix: 16, uppercase: true))") }
                let low = try hex4(at: next + 2)
                guard low >= 0xDC00 && low <= 0xDFFF else {
                    throw fail(start, "high surrogate not followed by a low surrogate")
                }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                next += 6
            } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
                throw fail(start, "lone low surrogate \\u\(String(scalar, radix: 16, uppercase: true))")
            }
            appendUTF8(scalar)
            return next
        default:
            throw fail(start, "invalid escape sequence \\\(describe(c))")
        }
        scratch.append(simple)
        return start + 2
    }

    func hex4(at start: Int) throws(JSONParseError) -> UInt32 {
        guard start + 4 <= bytes.count else { throw fail(start - 2, "truncated \\u escape") }
        var v: UInt32 = 0
        for i in start..<start + 4 {
            let b = bytes[i]
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
            default: throw fail(start - 2, "invalid \\u escape, expected 4 hex digits")
            }
            v = v << 4 | UInt32(d)
        }
        return v
    }

    mutating func appendUTF8(_ s: UInt32) {
        switch s {
        case 0..<0x80:
            scratch.append(UInt8(s))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | s >> 6))
            scratch.append(UInt8(0x80 | s & 0x3F))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | s >> 12))
            scratch.append(UInt8(0x80 | s >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | s & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | s >> 18))
            scratch.append(UInt8(0x80 | s >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | s >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | s & 0x3F))
        }
    }

    /// At a non-ASCII byte: checks one well-formed UTF-8 sequence (Unicode table 3-7: no
    /// overlongs, no surrogates, nothing above U+10FFFF); returns the index after it.
    func validateUTF8(at i: Int) throws(JSONParseError) -> Int {
        let b0 = bytes[i]
        let length: Int
        var lo: UInt8 = 0x80
        var hi: UInt8 = 0xBF
        switch b0 {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; lo = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; hi = 0x9F
        case 0xF0: length = 4; lo = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; hi = 0x8F
        default: throw fail(i, "invalid UTF-8")
        }
        guard i + length <= bytes.count else { throw fail(i, "invalid UTF-8 (truncated sequence)") }
        let b1 = bytes[i + 1]
        guard b1 >= lo && b1 <= hi else { throw fail(i, "invalid UTF-8") }
        for j in 2..<length where bytes[i + j] & 0xC0 != 0x80 {
            throw fail(i, "invalid UTF-8")
        }
        return i + length
    }
}

/// Word-at-a-time tests over eight bytes of JSON text (SWAR): whether any of them needs a
/// closer look. Each test is exact for "any byte": a borrow can only start at a byte that
/// already matched.
enum JSONBytes {
    @inline(__always) static func anyBelow(_ word: UInt64, _ n: UInt8) -> Bool {
        (word &- 0x0101_0101_0101_0101 &* UInt64(n)) & ~word & 0x8080_8080_8080_8080 != 0
    }

    @inline(__always) static func anyEqual(_ word: UInt64, _ byte: UInt8) -> Bool {
        anyBelow(word ^ (0x0101_0101_0101_0101 &* UInt64(byte)), 1)
    }

    /// A byte that ends or escapes a string, a control character, or a byte of a multi-byte
    /// UTF-8 sequence (validated one by one).
    @inline(__always) static func needsLook(_ word: UInt64) -> Bool {
        word & 0x8080_8080_8080_8080 != 0 || needsEscape(word)
    }

    /// A byte a JSON string must escape: `"`, `\\`, or a control character.
    @inline(__always) static func needsEscape(_ word: UInt64) -> Bool {
        anyBelow(word, 0x20) || anyEqual(word, UInt8(ascii: "\"")) || anyEqual(word, UInt8(ascii: "\\"))
    }
}
