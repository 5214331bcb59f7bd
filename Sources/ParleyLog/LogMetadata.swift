/// One value attached to a log line. Text handlers print it as `key=value`; JSON handlers keep
/// its type.
public enum LogValue: Sendable, Equatable, CustomStringConvertible {
    case string(String)
    case int(Int)
    case double(Double)
    case bool(Bool)

    public var description: String {
        switch self {
        case .string(let text): text
        case .int(let number): String(number)
        case .double(let number): String(number)
        case .bool(let flag): flag ? "true" : "false"
        }
    }
}

extension LogValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
                    ExpressibleByFloatLiteral, ExpressibleByStringInterpolation {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
}

/// The key/value pairs of a log line, in the order they were given (lines read the same way
/// every time). A later key replaces an earlier one of the same name in place.
public struct LogMetadata: Sendable, Equatable, ExpressibleByDictionaryLiteral, Sequence {
    public private(set) var pairs: [(key: String, value: LogValue)] = []

    public init() {}

    public init(dictionaryLiteral elements: (String, LogValue)...) {
        for (key, value) in elements { self[key] = value }
    }

    public var isEmpty: Bool { pairs.isEmpty }

    public subscript(key: String) -> LogValue? {
        get { pairs.first { $0.key == key }?.value }
        set {
            if let index = pairs.firstIndex(where: { $0.key == key }) {
                if let newValue { pairs[index].value = newValue } else { pairs.remove(at: index) }
            } else if let newValue {
                pairs.append((key, newValue))
            }
        }
    }

    /// These pairs, then `other`'s (which win on equal keys).
    public func merging(_ other: LogMetadata) -> LogMetadata {
        guard !other.isEmpty else { return self }
        guard !isEmpty else { return other }
        var merged = self
        for (key, value) in other.pairs { merged[key] = value }
        return merged
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: LogValue)]> { pairs.makeIterator() }

    public static func == (lhs: LogMetadata, rhs: LogMetadata) -> Bool {
        lhs.pairs.count == rhs.pairs.count && zip(lhs.pairs, rhs.pairs).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}
