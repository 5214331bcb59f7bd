/// A JSON value as a client sent it.
///
/// Message bodies and `clientData` travel through Parley as `JSONValue`s and must come back
/// out as the same JSON the client sent, so objects keep their key order (and duplicate keys)
/// and numbers keep their literal text. Equality follows from that: it is structural and
/// order-sensitive, and `1` and `1.0` are different numbers.
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, kept as its literal text.
    case number(JSONNumber)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object, with its keys in the order they were written.
    case object(JSONObject)
}

extension JSONValue {
    /// The string, if this is a string.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The integer, if this is a number written as an integer literal that fits in `Int`.
    public var intValue: Int? {
        if case .number(let n) = self { return n.intValue }
        return nil
    }

    /// The number as a `Double`, if this is a number.
    public var doubleValue: Double? {
        if case .number(let n) = self { return n.doubleValue }
        return nil
    }

    /// The number, if this is a number.
    public var numberValue: JSONNumber? {
        if case .number(let n) = self { return n }
        return nil
    }

    /// The Boolean, if this is `true` or `false`.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The object, if this is an object.
    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// Whether this is `null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The member named `key` (the last one, if the key is duplicated); `nil` unless this is
    /// an object that has it.
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }
}

extension JSONValue: ExpressibleByStringLiteral {
    /// A string value.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    /// An integer number.
    public init(integerLiteral value: Int) { self = .number(JSONNumber(value)) }
}

extension JSONValue: ExpressibleByFloatLiteral {
    /// A number written the way Swift prints the `Double` (shortest round-tripping form).
    public init(floatLiteral value: Double) { self = .number(JSONNumber(value)) }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    /// `true` or `false`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue: ExpressibleByArrayLiteral {
    /// An array.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// An object whose keys keep the literal's order.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements))
    }
}

extension JSONValue: ExpressibleByNilLiteral {
    /// `null`. Note that `let v: JSONValue? = nil` is still `Optional.none`.
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue: CustomStringConvertible {
    /// The compact JSON text.
    public var description: String { jsonString }
}

/// A JSON number kept as the literal text it was written with.
///
/// Parley never reformats a client's number: `1.50`, `1e3` and `12345678901234567890123`
/// round-trip verbatim. Convert with ``intValue`` or ``doubleValue`` when the domain needs
/// arithmetic.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The literal, always valid under RFC 8259's number grammar.
    public let text: String

    /// A number from its literal text; `nil` unless `text` is exactly one RFC 8259 number
    /// (no surrounding whitespace, no leading `+`, no leading zeros, no `NaN`/`Infinity`).
    public init?(text: String) {
        var copy = text
        let valid = copy.withUTF8 { buffer -> Bool in
            let raw = UnsafeRawBufferPointer(buffer)
            guard let end = try? JSONNumber.scan(raw, from: 0) else { return false }
            return end == raw.count
        }
        guard valid else { return nil }
        self.text = text
    }

    /// An integer number.
    public init(_ int: Int) {
        text = String(int)
    }

    /// A number in Swift's shortest round-tripping form (`1.0`, `0.1`, `1e-05`).
    ///
    /// - Precondition: `double` is finite; JSON has no NaN or infinity.
    public init(_ double: Double) {
        precondition(double.isFinite, "JSON cannot represent \(double)")
        text = double.description
    }

    /// Trusts the caller: `text` was already scanned as a valid number.
    init(validatedText: String) {
        text = validatedText
    }

    /// The value, if the literal is an integer literal (no fraction, no exponent) that fits
    /// in `Int`. `5.0` and `1e3` give `nil`: use ``doubleValue`` for those.
    public var intValue: Int? {
        for byte in text.utf8 where byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e")
            || byte == UInt8(ascii: "E")
        {
            return nil
        }
        return Int(text)
    }

    /// The nearest `Double`; literals beyond its range give ±infinity.
    public var doubleValue: Double {
        if let d = Double(text) { return d }
        return text.utf8.first == UInt8(ascii: "-") ? -.infinity : .infinity
    }

    /// The literal text.
    public var description: String { text }

    /// Scans one number starting at `start`; returns the index just past it.
    static func scan(_ b: UnsafeRawBufferPointer, from start: Int) throws(JSONParseError) -> Int {
        let n = b.count
        var i = start
        if i < n && b[i] == UInt8(ascii: "-") { i += 1 }
        guard i < n else { throw JSONParseError(offset: i, message: "expected a digit") }
        if b[i] == UInt8(ascii: "0") {
            i += 1
            if i < n && isDigit(b[i]) {
                throw JSONParseError(offset: i - 1, message: "leading zeros are not allowed in numbers")
            }
        } else if isDigit(b[i]) {
            i += 1
            while i < n && isDigit(b[i]) { i += 1 }
        } else {
            throw JSONParseError(offset: i, message: "expected a digit")
        }
        if i < n && b[i] == UInt8(ascii: ".") {
            i += 1
            guard i < n && isDigit(b[i]) else {
                throw JSONParseError(offset: i, message: "expected a digit after the decimal point")
            }
            while i < n && isDigit(b[i]) { i += 1 }
        }
        if i < n && (b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E")) {
            i += 1
            if i < n && (b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-")) { i += 1 }
            guard i < n && isDigit(b[i]) else {
                throw JSONParseError(offset: i, message: "expected a digit in the exponent")
            }
            while i < n && isDigit(b[i]) { i += 1 }
        }
        return i
    }

    @inline(__always)
    static func isDigit(_ b: UInt8) -> Bool { b &- UInt8(ascii: "0") < 10 }
}

/// A JSON object: members in the order they were written, duplicates kept.
///
/// Lookup by key is a linear scan from the end (the last duplicate wins, as in most JSON
/// libraries); chat payloads are small, and keeping order matters more here than O(1) lookup.
public struct JSONObject: Sendable, Hashable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    struct Entry: Sendable, Hashable {
        var key: String
        var value: JSONValue
    }

    var entries: [Entry]

    /// An empty object.
    public init() { entries = [] }

    /// An object with these members, in this order.
    public init(_ pairs: [(String, JSONValue)]) {
        entries = pairs.map { Entry(key: $0.0, value: $0.1) }
    }

    /// An object with these members, in this order.
    public init(_ pairs: KeyValuePairs<String, JSONValue>) {
        entries = pairs.map { Entry(key: $0.key, value: $0.value) }
    }

    /// An object with the literal's members, in the literal's order.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements)
    }

    init(entries: [Entry]) { self.entries = entries }

    /// A member: its key and value.
    public typealias Element = (key: String, value: JSONValue)

    /// The first member's position.
    public var startIndex: Int { 0 }
    /// One past the last member's position.
    public var endIndex: Int { entries.count }

    /// The member at `position`.
    public subscript(position: Int) -> (key: String, value: JSONValue) {
        let e = entries[position]
        return (e.key, e.value)
    }

    /// The keys in order (duplicates included).
    public var keys: [String] { entries.map(\.key) }

    /// The values in order.
    public var values: [JSONValue] { entries.map(\.value) }

    /// The value of the last member named `key`.
    ///
    /// Setting replaces the value of the last member named `key` in place (keeping its
    /// position), or appends a member if there is none; setting `nil` removes every member
    /// named `key`.
    public subscript(key: String) -> JSONValue? {
        get {
            var i = entries.count
            while i > 0 {
                i -= 1
                if entries[i].key == key { return entries[i].value }
            }
            return nil
        }
        set {
            if let newValue {
                if let i = entries.lastIndex(where: { $0.key == key }) {
                    entries[i].value = newValue
                } else {
                    entries.append(Entry(key: key, value: newValue))
                }
            } else {
                entries.removeAll { $0.key == key }
            }
        }
    }

    /// Appends a member without looking for an existing one with the same key.
    public mutating func append(key: String, value: JSONValue) {
        entries.append(Entry(key: key, value: value))
    }
}

extension JSONValue {
    /// About how many bytes this value takes in memory (its text plus a fixed cost per
    /// value): what the history cache counts against its byte limits.
    public var approximateSize: Int {
        switch self {
        case .null, .bool: 8
        case .number(let number): 16 + number.text.utf8.count
        case .string(let string): 16 + string.utf8.count
        case .array(let values): values.reduce(16) { $0 + $1.approximateSize }
        case .object(let object): object.entries.reduce(16) { $0 + 16 + $1.key.utf8.count + $1.value.approximateSize }
        }
    }
}
