/// What a command needs from a token's permissions.
public enum AuthAction: Sendable {
    case subscribe, publish, history
    /// Edit or delete another member's message (the token's `moderate`).
    case moderate
}

/// One connection's standing in one channel: whether the channel requires a token, and the
/// verified claims once one was presented. Shared by every door, so they refuse alike.
///
/// Rules (README.md, "Security"):
/// - a channel that requires auth refuses everything until a token is verified;
/// - once a connection has a token, its permissions apply on ANY channel, open ones included
///   (as Scaledrone does), so a token can narrow what a client may do;
/// - after `exp`, every checked command is refused ("token expired").
public struct ChannelAccess: Sendable {
    public let channel: String
    /// The channel's secret (nil: it does not use tokens).
    public let secret: String?
    public let requiresAuth: Bool
    /// Verifies tokens (the server passes OpenSSL's HMAC).
    private let verifier: TokenVerifier
    public private(set) var claims: TokenClaims?

    public init(channel: String, secret: String?, requiresAuth: Bool, verifier: TokenVerifier) {
        self.channel = channel
        self.secret = secret
        self.requiresAuth = requiresAuth
        self.verifier = verifier
    }

    public var isAuthenticated: Bool { claims != nil }

    /// Verifies `token` against the channel's secret; on success the claims replace any
    /// earlier ones (a client may refresh its token). Returns the error text on failure.
    public mutating func authenticate(_ token: String, client: TokenVerifier.ClientRequirement) -> String? {
        guard let secret else {
            return "channel \"\(channel)\" does not use authentication (no secret is configured for it)"
        }
        do {
            claims = try verifier.verify(token, secret: secret, channel: channel, client: client)
            return nil
        } catch {
            return error.message
        }
    }

    /// Nil when `action` on `room` is allowed, else the error text; `history` is the number
    /// of history messages allowed (Int.max with no token).
    public func check(_ action: AuthAction, room: String, nowMillis: Int64) -> (error: String?, history: Int) {
        guard let claims else {
            if requiresAuth { return ("authentication required: this channel needs a token (send authenticate first)", 0) }
            return (nil, Int.max)
        }
        guard claims.expiresMillis > nowMillis else {
            return ("token expired: authenticate again with a fresh token", 0)
        }
        guard let permission = claims.permission(for: room) else {
            return ("permission denied: the token grants nothing in room \"\(room)\"", 0)
        }
        switch action {
        case .subscribe:
            if !permission.subscribe { return ("permission denied: the token does not allow subscribing to room \"\(room)\"", 0) }
        case .publish:
            if !permission.publish { return ("permission denied: the token does not allow publishing to room \"\(room)\"", 0) }
        case .history:
            if permission.history <= 0 { return ("permission denied: the token does not allow reading the history of room \"\(room)\"", 0) }
        case .moderate:
            if !permission.moderate { return ("permission denied: the token does not allow moderating room \"\(room)\"", 0) }
        }
        return (nil, permission.history)
    }
}
