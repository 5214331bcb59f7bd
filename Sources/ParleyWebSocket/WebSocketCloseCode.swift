/// A close status code (RFC 6455 §7.4). Any `UInt16` can be represented; use
/// ``isValidOnWire(_:)`` to check whether a code may appear in a close frame.
public struct WebSocketCloseCode: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt16

    /// Wraps a raw code; no validation.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let normal = WebSocketCloseCode(rawValue: 1000)
    public static let goingAway = WebSocketCloseCode(rawValue: 1001)
    public static let protocolError = WebSocketCloseCode(rawValue: 1002)
    public static let unsupportedData = WebSocketCloseCode(rawValue: 1003)
    /// "No status code was present"; reported locally, never sent.
    public static let noStatus = WebSocketCloseCode(rawValue: 1005)
    /// "Connection dropped without a close frame"; reported locally, never sent.
    public static let abnormal = WebSocketCloseCode(rawValue: 1006)
    public static let invalidPayload = WebSocketCloseCode(rawValue: 1007)
    public static let policyViolation = WebSocketCloseCode(rawValue: 1008)
    public static let messageTooBig = WebSocketCloseCode(rawValue: 1009)
    public static let mandatoryExtension = WebSocketCloseCode(rawValue: 1010)
    public static let internalError = WebSocketCloseCode(rawValue: 1011)
    public static let serviceRestart = WebSocketCloseCode(rawValue: 1012)
    public static let tryAgainLater = WebSocketCloseCode(rawValue: 1013)
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
