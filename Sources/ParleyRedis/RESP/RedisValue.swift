/// One value of the Redis serialization protocol (RESP2 and RESP3).
///
/// RESP2 replies use the first six cases; RESP3 adds the rest. Both `$-1` / `*-1` (RESP2)
/// and `_` (RESP3) decode to ``null``. The accessors (``string``, ``int``, ``array``,
/// ``pairs``, …) read a reply the same way under either protocol, so code built on them does
/// not care which one the connection negotiated (e.g. `HGETALL` is a map in RESP3 and a flat
/// array in RESP2; ``pairs`` reads both).
public enum RedisValue: Sendable, Hashable {
    /// `+OK`: a short status text.
    case simpleString(String)
    /// `-ERR …` or RESP3 `!` (blob error): the whole error text, code word first.
    case error(String)
    /// `:42`
    case integer(Int64)
    /// `$5\r\nhello`: binary-safe bytes.
    case bulkString([UInt8])
    /// `$-1`, `*-1` (RESP2) or `_` (RESP3).
    case null
    /// `*N`
    case array([RedisValue])
    /// RESP3 `%N`: key/value pairs in the order Redis sent them.
    case map([RedisPair])
    /// RESP3 `~N`
    case set([RedisValue])
    /// RESP3 `>N`: out-of-band data (pub/sub messages), not the reply to a command.
    case push([RedisValue])
    /// RESP3 `,1.5` (also `inf`, `-inf`, `nan`).
    case double(Double)
    /// RESP3 `#t` / `#f`
    case boolean(Bool)
    /// RESP3 `(` : an integer of any size, as its decimal text.
    case bigNumber(String)
    /// RESP3 `=`: text with a three-letter format (`txt`, `mkd`).
    case verbatimString(format: String, text: [UInt8])
    /// RESP3 `|N`: auxiliary data Redis attached to the value that followed it.
    indirect case attributed(attributes: [RedisPair], value: RedisValue)
}

/// One key/value pair of a RESP3 map or attribute.
public struct RedisPair: Sendable, Hashable {
    /// The key (usually a string).
    public var key: RedisValue
    /// The value for ``key``.
    public var value: RedisValue
    public init(key: RedisValue, value: RedisValue) {
        self.key = key
        self.value = value
    }
}

extension RedisValue {
    /// The value without RESP3 attributes (at the top level).
    public var withoutAttributes: RedisValue {
        if case .attributed(_, let value) = self { return value.withoutAttributes }
        return self
    }

    /// The bytes of a bulk, simple or verbatim string, or the decimal text of a number.
    public var bytes: [UInt8]? {
        switch self {
        case .bulkString(let bytes): return bytes
        case .simpleString(let text), .bigNumber(let text): return Array(text.utf8)
        case .verbatimString(_, let text): return text
        case .integer(let value): return Array(String(value).utf8)
        case .attributed(_, let value): return value.bytes
        default: return nil
        }
    }

    /// The text of a bulk, simple or verbatim string (UTF-8, invalid bytes replaced), or the
    /// decimal text of a number.
    public var string: String? {
        switch self {
        case .simpleString(let text), .bigNumber(let text): return text
        case .bulkString(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .verbatimString(_, let text): return String(decoding: text, as: UTF8.self)
        case .integer(let value): return String(value)
        case .double(let value): return String(value)
        case .attributed(_, let value): return value.string
        default: return nil
        }
    }

    /// An integer, or a string holding one (RESP2 sends some numbers as bulk strings).
    public var int: Int64? {
        switch self {
        case .integer(let value): return value
        case .boolean(let value): return value ? 1 : 0
        case .bulkString(let bytes): return RESPNumber.parseInt64(bytes[...])
        case .simpleString(let text), .bigNumber(let text): return RESPNumber.parseInt64(Array(text.utf8)[...])
        case .attributed(_, let value): return value.int
        default: return nil
        }
    }

    /// A double, integer, or a string holding a number (RESP2 sends scores as bulk strings).
    public var double: Double? {
        switch self {
        case .double(let value): return value
        case .integer(let value): return Double(value)
        case .bulkString(let bytes): return RESPNumber.parseDouble(bytes[...])
        case .simpleString(let text): return RESPNumber.parseDouble(Array(text.utf8)[...])
        case .attributed(_, let value): return value.double
        default: return nil
        }
    }

    /// A RESP3 boolean, or the integers 0 and 1 RESP2 uses instead.
    public var bool: Bool? {
        switch self {
        case .boolean(let value): return value
        case .integer(let value) where value == 0 || value == 1: return value == 1
        case .attributed(_, let value): return value.bool
        default: return nil
        }
    }

    /// The elements of an array, set or push.
    public var array: [RedisValue]? {
        switch self {
        case .array(let values), .set(let values), .push(let values): return values
        case .attributed(_, let value): return value.array
        default: return nil
        }
    }

    /// The pairs of a RESP3 map, or of a RESP2 flat array `[k1, v1, k2, v2, …]`.
    public var pairs: [RedisPair]? {
        switch self {
        case .map(let pairs): return pairs
        case .array(let values) where values.count % 2 == 0:
            return stride(from: 0, to: values.count, by: 2).map { RedisPair(key: values[$0], value: values[$0 + 1]) }
        case .attributed(_, let value): return value.pairs
        default: return nil
        }
    }

    /// True for `null` (either protocol).
    public var isNull: Bool {
        switch self {
        case .null: return true
        case .attributed(_, let value): return value.isNull
        default: return false
        }
    }

    /// The text of an error value.
    public var errorMessage: String? {
        if case .error(let message) = self { return message }
        return nil
    }
}

extension RedisValue: CustomStringConvertible {
    /// A short readable form for logs and test failures (bulk strings as text when printable).
    public var description: String {
        switch self {
        case .simpleString(let text): return "+\(text)"
        case .error(let text): return "-\(text)"
        case .integer(let value): return ":\(value)"
        case .bulkString(let bytes): return "\"\(String(decoding: bytes.prefix(200), as: UTF8.self))\(bytes.count > 200 ? "…" : "")\""
        case .null: return "null"
        case .array(let values): return "[" + values.map(\.description).joined(separator: ", ") + "]"
        case .map(let pairs): return "{" + pairs.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case .set(let values): return "~[" + values.map(\.description).joined(separator: ", ") + "]"
        case .push(let values): return ">[" + values.map(\.description).joined(separator: ", ") + "]"
        case .double(let value): return ",\(value)"
        case .boolean(let value): return value ? "#t" : "#f"
        case .bigNumber(let text): return "(\(text)"
        case .verbatimString(let format, let text): return "=\(format):\(String(decoding: text, as: UTF8.self))"
        case .attributed(let attributes, let value):
            return "|{" + attributes.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "} \(value)"
        }
    }
}

/// Strict number parsing shared by the decoder and the accessors.
enum RESPNumber {
    /// An optional sign and at least one decimal digit, nothing else; nil on overflow.
    static func parseInt64(_ bytes: ArraySlice<UInt8>) -> Int64? {
        var index = bytes.startIndex
        var negative = false
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: "+") {
            negative = bytes[index] == UInt8(ascii: "-")
            index += 1
        }
        guard index < bytes.endIndex else { return nil }
        var value: Int64 = 0
        while index < bytes.endIndex {
            let byte = bytes[index]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let digit = Int64(byte - UInt8(ascii: "0"))
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            // Accumulate negatively so Int64.min parses.
            let (next, overflow2) = negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
            if overflow1 || overflow2 { return nil }
            value = next
            index += 1
        }
        return value
    }

    /// A decimal or exponent number (`1`, `-1.5`, `2e10`), or `inf`, `-inf`, `nan`; no hex,
    /// no spaces.
    static func parseDouble(_ bytes: ArraySlice<UInt8>) -> Double? {
        guard !bytes.isEmpty, bytes.count <= 400 else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        switch text.lowercased() {
        case "inf", "+inf": return .infinity
        case "-inf": return -.infinity
        case "nan", "-nan": return .nan
        default: break
        }
        var sawDigit = false
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): sawDigit = true
            case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): break
            default: return nil
            }
        }
        guard sawDigit else { return nil }
        return Double(text)
    }
}
