/// How much a log line matters, least to most.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    case trace, debug, info, warn, error

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    /// `trace`, `debug`, `info`, `warn`, `error`.
    public var description: String {
        switch self {
        case .trace: "trace"
        case .debug: "debug"
        case .info: "info"
        case .warn: "warn"
        case .error: "error"
        }
    }

    /// Parses a level name (case-insensitive; `warning` is accepted for `warn`).
    public init?(name: String) {
        switch name.lowercased() {
        case "trace": self = .trace
        case "debug": self = .debug
        case "info": self = .info
        case "warn", "warning": self = .warn
        case "error": self = .error
        default: return nil
        }
    }
}
