/// An operator's ban: a name or an IP address kept out until a time. Kept by a ``BanStore``
/// (durable, and cluster-wide in cluster mode) and checked from a cache on every node.
public struct Ban: Sendable, Equatable {
    public enum Target: Sendable, Equatable, Hashable {
        case name(String)
        case ip(String)

        /// Whether a client with this address and name is covered. An address ban covers
        /// what counts as one client for the per-IP limits (``IPAddress/limitKey``): the
        /// address, and for IPv6 its whole /64, which one host can move around in.
        public func covers(ip: String?, name: String?) -> Bool {
            switch self {
            case .ip(let banned):
                guard let ip else { return false }
                return ip == banned || IPAddress.limitKey(ip) == IPAddress.limitKey(banned)
            case .name(let banned): return name.map { Ban.normalized($0) == banned } ?? false
            }
        }

        public var kind: String {
            switch self {
            case .name: "name"
            case .ip: "ip"
            }
        }

        public var value: String {
            switch self {
            case .name(let name): name
            case .ip(let ip): ip
            }
        }
    }

    public let id: Int
    public let target: Target
    public let reason: String
    public let createdMillis: Int64
    public let untilMillis: Int64

    public init(id: Int, target: Target, reason: String, createdMillis: Int64, untilMillis: Int64) {
        self.id = id
        self.target = target
        self.reason = reason
        self.createdMillis = createdMillis
        self.untilMillis = untilMillis
    }

    /// Names are stored normalized (``normalized(_:)``), so one name has one ban.
    public static func target(_ target: Target) -> Target {
        if case .name(let name) = target { .name(normalized(name)) } else { target }
    }

    /// Names are compared trimmed and case-insensitively (`Alice ` is `alice`).
    public static func normalized(_ name: String) -> String {
        let scalars = name.unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[first...last]).lowercased()
    }
}

