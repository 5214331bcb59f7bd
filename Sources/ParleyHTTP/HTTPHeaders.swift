/// An ordered list of HTTP header fields.
///
/// Order and duplicates are kept exactly as received (or added), because some fields
/// (`Set-Cookie`, `Content-Length` conflicts, `Transfer-Encoding` chains) mean different
/// things when merged. Name lookups compare ASCII case-insensitively, as RFC 9110 requires.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// One field as stored; a struct rather than a tuple so the list can be `Equatable`.
    struct Field: Sendable, Equatable {
        var name: String
        var value: String
    }

    private(set) var fields: [Field] = []

    /// An empty header list.
    public init() {}

    /// A header list holding `pairs` in order (duplicates kept).
    public init(_ pairs: [(String, String)]) {
        fields.reserveCapacity(pairs.count)
        for (name, value) in pairs { fields.append(Field(name: name, value: value)) }
    }

    /// A header list from a literal; unlike a `Dictionary`, repeated names are kept.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The number of fields, counting repeated names separately.
    public var count: Int { fields.count }

    /// Whether there are no fields at all.
    public var isEmpty: Bool { fields.isEmpty }

    /// The value of the first field called `name`, or `nil`.
    public subscript(name: String) -> String? {
        for field in fields where httpNameEquals(field.name, name) { return field.value }
        return nil
    }

    /// The values of every field called `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.lazy.filter { httpNameEquals($0.name, name) }.map(\.value)
    }

    /// How many fields are called `name`.
    public func count(_ name: String) -> Int {
        fields.reduce(0) { $0 + (httpNameEquals($1.name, name) ? 1 : 0) }
    }

    /// Appends a field, keeping any earlier field with the same name.
    public mutating func add(_ name: String, _ value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Replaces every field called `name` with one field holding `value`.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    /// Removes every field called `name`.
    public mutating func remove(_ name: String) {
        fields.removeAll { httpNameEquals($0.name, name) }
    }

    /// Whether any field called `name` lists `token` in its comma-separated value
    /// (e.g. `Connection: keep-alive, Upgrade`), compared case-insensitively.
    public func contains(_ name: String, token: String) -> Bool {
        for field in fields where httpNameEquals(field.name, name) {
            for item in field.value.utf8.split(separator: UInt8(ascii: ",")) {
                if httpTokenEquals(trimOWS(item), token) { return true }
            }
        }
        return false
    }

    /// Iterates `(name, value)` pairs in order.
    public func makeIterator() -> some IteratorProtocol<(name: String, value: String)> {
        fields.lazy.map { (name: $0.name, value: $0.value) }.makeIterator()
    }
}

/// ASCII case-insensitive comparison of two header names without allocating.
@inline(__always)
func httpNameEquals(_ a: String, _ b: String) -> Bool {
    let a = a.utf8, b = b.utf8
    guard a.count == b.count else { return false }
    return zip(a, b).allSatisfy { asciiLower($0) == asciiLower($1) }
}

@inline(__always)
func httpTokenEquals(_ a: Substring.UTF8View, _ b: String) -> Bool {
    let b = b.utf8
    guard a.count == b.count else { return false }
    return zip(a, b).allSatisfy { asciiLower($0) == asciiLower($1) }
}

@inline(__always)
func asciiLower(_ c: UInt8) -> UInt8 {
    (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z")) ? c | 0x20 : c
}

/// Strips optional whitespace (SP / HTAB) from both ends.
func trimOWS(_ s: Substring.UTF8View) -> Substring.UTF8View {
    var s = s
    while let f = s.first, f == 0x20 || f == 0x09 { s.removeFirst() }
    while let l = s.last, l == 0x20 || l == 0x09 { s.removeLast() }
    return s
}
