/// A close status code (RFC 6455 §7.4). Any `UInt16` can be represented; use
/// ``isValidOnWire(_:)`` to check whether a code may appear in a close frame.
public struct WebSocketCloseCode: RawRepresentable, Hashable, Sendable {
    /// The 16-bit code as carried on the wire (big-endian).
    public let rawValue: UInt16

    /// Wraps a raw code; no validation.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// 1000: the purpose of the connection is fulfilled.
    public static let normal = WebSocketCloseCode(rawValue: 1000)
    /// 1001: the endpoint is going away (server shutdown, page navigation).
    public static let goingAway = WebSocketCloseCode(rawValue: 1001)
    /// 1002: the peer broke RFC 6455.
    public static let protocolError = WebSocketCloseCode(rawValue: 1002)
    /// 1003: a data type this endpoint can't accept.
    public static let unsupportedData = WebSocketCloseCode(rawValue: 1003)
    /// "No status code was present"; reported locally, never sent.
    public static let noStatus = WebSocketCloseCode(rawValue: 1005)
    /// "Connection dropped without a close frame"; reported locally, never sent.
    public static let abnormal = WebSocketCloseCode(rawValue: 1006)
    /// 1007: data inconsistent with the message type (invalid UTF-8 in text).
    public static let invalidPayload = WebSocketCloseCode(rawValue: 1007)
    /// 1008: a message violated the endpoint's policy.
    public static let policyViolation = WebSocketCloseCode(rawValue: 1008)
    /// 1009: a frame or message exceeded a configured limit.
    public static let messageTooBig = WebSocketCloseCode(rawValue: 1009)
    /// 1010: (client) the server didn't negotiate a required extension.
    public static let mandatoryExtension = WebSocketCloseCode(rawValue: 1010)
    /// 1011: an unexpected condition in the endpoint.
    public static let internalError = WebSocketCloseCode(rawValue: 1011)
    /// 1012: the service is restarting (IANA registry).
    public static let serviceRestart = WebSocketCloseCode(rawValue: 1012)
    /// 1013: temporary overload; try again later (IANA registry).
    public static let tryAgainLater = WebSocketCloseCode(rawValue: 1013)
    /// 1014: an upstream server failed (IANA registry).
    public static let badGateway = WebSocketCloseCode(rawValue: 1014)

    /// Whether `code` may be carried in a close frame: 1000–1003, 1007–1014 (1012–1014 are
    /// registered with IANA since RFC 6455), and 3000–4999 (registered / private use).
    /// 0–999, 1004–1006, 1015 and the unassigned 1016–2999 are rejected.
    public static func isValidOnWire(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }

    /// Whether this code may be carried in a close frame.
    public var isValidOnWire: Bool { Self.isValidOnWire(rawValue) }
}
