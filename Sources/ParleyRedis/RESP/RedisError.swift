/// A Redis failure: a stable code the caller branches on and a message a person can read.
///
/// For ``Code/server`` the message is Redis's own error text, code word first
/// (`WRONGTYPE Operation against a key holding the wrong kind of value`); ``serverCode``
/// returns that word.
public struct RedisError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure: stable, for branching and for mapping to Parley's own errors.
    public let code: Code
    /// What a person reads (for ``Code/server``, Redis's error text).
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(message) [redis \(code.name)]" }

    /// Stable error codes (never renumbered).
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// Redis could not be reached, or the connection was lost before the reply arrived
        /// (the command may or may not have run).
        public static let connection = Code(rawValue: 1)
        /// No reply within the command's timeout (the command may still run).
        public static let timeout = Code(rawValue: 2)
        /// Redis answered with an error; the message is its text.
        public static let server = Code(rawValue: 3)
        /// Redis sent bytes that are not RESP, or a reply over a decoder limit.
        public static let protocolViolation = Code(rawValue: 4)
        /// Too many commands are waiting for replies on this connection.
        public static let queueFull = Code(rawValue: 5)
        /// A Redis URL or address that cannot be used.
        public static let invalidEndpoint = Code(rawValue: 6)
        /// The client (or subscriber) was closed, or the subscription was released first.
        public static let closed = Code(rawValue: 7)
        /// Redis Cluster: no slot map, a slot nobody serves, or too many redirections.
        public static let cluster = Code(rawValue: 8)
        /// A reply of a shape the caller did not expect.
        public static let unexpectedReply = Code(rawValue: 9)

        public var name: String {
            switch self {
            case .connection: return "connection"
            case .timeout: return "timeout"
            case .server: return "server"
            case .protocolViolation: return "protocol"
            case .queueFull: return "queue_full"
            case .invalidEndpoint: return "invalid_endpoint"
            case .closed: return "closed"
            case .cluster: return "cluster"
            case .unexpectedReply: return "unexpected_reply"
            default: return "code\(rawValue)"
            }
        }

        public var description: String { name }
    }

    /// For a server error, its first word (`ERR`, `WRONGTYPE`, `NOSCRIPT`, `MOVED`, …).
    public var serverCode: Substring? {
        guard code == .server else { return nil }
        return message.prefix { $0 != " " }
    }
}
