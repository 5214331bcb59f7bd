/// A device that takes push notifications for a user (docs/push.md): an APNs device token, an
/// FCM registration token, or a Web Push subscription.
public struct PushDevice: Sendable, Hashable {
    public enum Platform: String, Sendable, Hashable, CaseIterable {
        case apns, fcm, webpush
    }

    public let channel: String
    public let user: String
    public let platform: Platform
    /// APNs: the device token (hex); FCM: the registration token; Web Push: the endpoint URL.
    /// Unique per platform: registering it again (for another user, say) moves it.
    public let token: String
    /// APNs: the app's bundle id (`apns-topic`).
    public let topic: String?
    /// APNs: `sandbox` or `production`.
    public let sandbox: Bool
    /// Web Push: the subscription's `p256dh` key (65 bytes, uncompressed P-256 point) and
    /// `auth` secret (16 bytes).
    public let p256dh: [UInt8]?
    public let auth: [UInt8]?
    public let registeredMillis: Int64

    public init(channel: String, user: String, platform: Platform, token: String, topic: String? = nil, sandbox: Bool = false,
                p256dh: [UInt8]? = nil, auth: [UInt8]? = nil, registeredMillis: Int64) {
        self.channel = channel
        self.user = user
        self.platform = platform
        self.token = token
        self.topic = topic
        self.sandbox = sandbox
        self.p256dh = p256dh
        self.auth = auth
        self.registeredMillis = registeredMillis
    }

    /// Longest token (an FCM token is ~160 bytes, a Web Push endpoint a few hundred).
    public static let maxTokenBytes = 1024
    /// Most devices one user has per channel: one more replaces the oldest.
    public static let maxPerUser = 10
    /// Most devices one store keeps in all, by default: one more replaces the one registered
    /// longest ago, whoever's (an app registers its device again each time it starts).
    public static let maxStored = 1_000_000

    /// Why this device cannot be registered (before any endpoint rule), or nil.
    public var problem: String? {
        if token.isEmpty || token.utf8.count > Self.maxTokenBytes { return "a device token must be 1-\(Self.maxTokenBytes) bytes" }
        if token.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value > 0x7E }) {
            return "a device token must be printable ASCII without spaces"
        }
        switch platform {
        case .apns:
            guard token.utf8.count >= 32, token.utf8.allSatisfy({ isHex($0) }) else { return "an APNs device token is hex" }
            guard let topic, !topic.isEmpty, topic.utf8.count <= 255, !topic.contains(" ") else { return "an APNs device needs its topic (the bundle id)" }
        case .fcm:
            guard token.utf8.count >= 20, token.utf8.allSatisfy({ isHex($0) || isTokenPunctuation($0) || isLetter($0) }) else {
                return "an FCM registration token is letters, digits, '-', '_' and ':'"
            }
        case .webpush:
            guard token.hasPrefix("https://") || token.hasPrefix("http://") else { return "a Web Push endpoint is an http(s) URL" }
            guard p256dh?.count == 65, p256dh?.first == 4 else { return "a Web Push subscription needs keys.p256dh (a P-256 public key)" }
            guard auth?.count == 16 else { return "a Web Push subscription needs keys.auth (16 bytes)" }
        }
        return nil
    }

    private func isLetter(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    private func isTokenPunctuation(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":")
    }

    private func isHex(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
    }
}

/// A user's mute: of one room, or of every room (`room` nil), until a time.
public struct PushMute: Sendable, Hashable {
    /// Most rooms one user mutes at once per channel (every room counts as one).
    public static let maxPerUser = 200
    public let room: String?
    public let untilMillis: Int64
    public init(room: String?, untilMillis: Int64) {
        self.room = room
        self.untilMillis = untilMillis
    }

    /// A mute of one more room than ``maxPerUser``.
    public static var tooMany: ParleyError {
        ParleyError(.limitReached, "at most \(maxPerUser) rooms muted at once; lift one first")
    }
}
