/// Computes HMAC-SHA256. The domain has no C: the server passes OpenSSL's implementation.
public protocol HMACSHA256: Sendable {
    func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8]
}

/// What one entry of a token's `permissions` grants in the rooms its pattern matches.
public struct RoomPermission: Sendable, Hashable {
    public let pattern: RoomPattern
    public let publish: Bool
    public let subscribe: Bool
    /// How many history messages a subscribe may ask for (0 = none).
    public let history: Int
    /// Edit and delete other members' messages (Parley's `moderate`; an author needs none
    /// for their own).
    public let moderate: Bool

    public init(pattern: RoomPattern, publish: Bool, subscribe: Bool, history: Int, moderate: Bool = false) {
        self.pattern = pattern
        self.publish = publish
        self.subscribe = subscribe
        self.history = history
        self.moderate = moderate
    }
}

/// The verified claims of a Scaledrone-style JWT (docs/protocols.md, "Native").
public struct TokenClaims: Sendable, Hashable {
    public let client: String
    public let channel: String
    /// Expiry in milliseconds since the epoch (tokens may say seconds or milliseconds).
    public let expiresMillis: Int64
    /// In the order the token lists them; the first pattern matching a room decides.
    public let permissions: [RoomPermission]
    /// Becomes the member's `authData`.
    public let data: JSONValue?
    /// The `user` claim (docs/protocols.md, "Users"): the user this connection belongs to,
    /// proved by the signature. nil without one.
    public var user: String? = nil

    /// The permission that applies to `room`, if any pattern matches it.
    public func permission(for room: String) -> RoomPermission? {
        permissions.first { $0.pattern.matches(room) }
    }
}

/// Verifies and mints HS256 JSON Web Tokens. `alg` other than HS256 (including `none`) is
/// refused; the signature is compared in constant time.
public struct TokenVerifier: Sendable {
    public let hmac: any HMACSHA256
    public let clock: any WallClock
    /// Longest token accepted, in bytes.
    public static let maxTokenLength = 8192
    /// Most permission entries in one token.
    public static let maxPermissions = 64

    public init(hmac: any HMACSHA256, clock: any WallClock = SystemWallClock()) {
        self.hmac = hmac
        self.clock = clock
    }

    /// Which `client` claim a door accepts.
    public enum ClientRequirement: Sendable, Equatable {
        /// The connection's own client id (the native door).
        case exactly(String)
        /// `"*"` or no `client` at all: doors whose id is not known before connecting
        /// (Socket.IO, line).
        case wildcard
        /// Any value or none (REST, which has no client id).
        case any
    }

    /// Checks `token` against the channel's `secret`, the expected channel and client id.
    public func verify(_ token: String, secret: String, channel: String, clientID: String) throws(ParleyError) -> TokenClaims {
        try verify(token, secret: secret, channel: channel, client: .exactly(clientID))
    }

    /// Checks `token` against the channel's `secret`, the expected channel and `client` rule.
    public func verify(_ token: String, secret: String, channel: String, client requirement: ClientRequirement) throws(ParleyError) -> TokenClaims {
        guard token.utf8.count <= Self.maxTokenLength else { throw denied("token too long") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw denied("token is not a JWT (three dot-separated parts)") }
        guard let headerBytes = Base64URL.decode(parts[0]), let header = try? JSONParser.parse(headerBytes) else {
            throw denied("token header is not base64url JSON")
        }
        guard header["alg"]?.stringValue == "HS256" else {
            throw denied("token algorithm must be HS256, got \(header["alg"]?.jsonString ?? "none")")
        }
        guard let signature = Base64URL.decode(parts[2]) else { throw denied("token signature is not base64url") }
        let signed = Array("\(parts[0]).\(parts[1])".utf8)
        let expected = hmac.authenticationCode(key: Array(secret.utf8), message: signed)
        guard constantTimeEqual(signature, expected) else { throw denied("token signature does not match") }
        guard let payloadBytes = Base64URL.decode(parts[1]), let payload = try? JSONParser.parse(payloadBytes),
              case .object = payload else {
            throw denied("token payload is not a JSON object")
        }
        guard let tokenChannel = payload["channel"]?.stringValue, tokenChannel == channel else {
            throw denied("token is for another channel")
        }
        let claimed = payload["client"]
        let client: String
        switch requirement {
        case .exactly(let clientID):
            guard let value = claimed?.stringValue, value == clientID else { throw denied("token is for another client") }
            client = value
        case .wildcard:
            guard claimed == nil || claimed?.isNull == true || claimed?.stringValue == "*" else {
                throw denied("token is for one client; this door needs a token whose client is \"*\" or absent")
            }
            client = "*"
        case .any:
            client = claimed?.stringValue ?? "*"
        }
        guard let exp = payload["exp"]?.numberValue?.doubleValue, exp.isFinite else {
            throw denied("token has no numeric exp")
        }
        // Seconds or milliseconds: a seconds value this large would be past the year 5000.
        let expiresMillis = exp > 100_000_000_000 ? Int64(exp) : Int64(exp * 1000)
        guard expiresMillis > clock.nowMillis() else { throw denied("token expired") }
        let permissions = try parsePermissions(payload["permissions"])
        var user: String?
        if let claim = payload["user"], !claim.isNull {
            guard let id = claim.stringValue else { throw denied("token user must be a string") }
            if let problem = UserID.problem(with: id) { throw denied("token user: \(problem)") }
            user = id
        }
        return TokenClaims(client: client, channel: channel, expiresMillis: expiresMillis,
                           permissions: permissions, data: payload["data"], user: user)
    }

    private func parsePermissions(_ value: JSONValue?) throws(ParleyError) -> [RoomPermission] {
        guard let value else { return [] }
        guard case .object(let object) = value else { throw denied("token permissions must be an object") }
        guard object.count <= Self.maxPermissions else { throw denied("token has too many permissions") }
        var list: [RoomPermission] = []
        for (source, grant) in object {
            let pattern: RoomPattern
            do { pattern = try RoomPattern(source) } catch { throw denied("bad room pattern \"\(source)\": \(error.message)") }
            list.append(RoomPermission(pattern: pattern,
                                       publish: grant["publish"]?.boolValue ?? false,
                                       subscribe: grant["subscribe"]?.boolValue ?? false,
                                       history: max(0, grant["history"]?.intValue ?? 0),
                                       moderate: grant["moderate"]?.boolValue ?? false))
        }
        return list
    }

    /// Mints a token (for `parley token` and tests).
    public func mint(secret: String, channel: String, client: String, expiresAtSeconds: Int64,
                     permissions: [(pattern: String, publish: Bool, subscribe: Bool, history: Int)],
                     data: JSONValue? = nil, moderating: Set<String> = []) -> String {
        let header: JSONValue = ["alg": "HS256", "typ": "JWT"]
        var grants = JSONObject()
        for p in permissions {
            var grant: JSONObject = ["publish": .bool(p.publish), "subscribe": .bool(p.subscribe),
                                     "history": .number(JSONNumber(p.history))]
            if moderating.contains(p.pattern) { grant["moderate"] = true }
            grants[p.pattern] = .object(grant)
        }
        var payload: JSONObject = ["client": .string(client), "channel": .string(channel),
                                   "permissions": .object(grants), "exp": .number(JSONNumber(Int(expiresAtSeconds)))]
        if let data { payload["data"] = data }
        let signingInput = Base64URL.encode(header.serialized()) + "." + Base64URL.encode(JSONValue.object(payload).serialized())
        let signature = hmac.authenticationCode(key: Array(secret.utf8), message: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    private func denied(_ message: String) -> ParleyError { ParleyError(.unauthorized, message) }
}

/// Compares without an early exit, so timing does not reveal how much of a signature matched.
public func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in 0..<a.count { difference |= a[i] ^ b[i] }
    return difference == 0
}

/// Base64url without padding (RFC 4648 §5), as JWTs use it.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            for shift in [18, 12, 6, 0] { out.append(alphabet[Int(n >> UInt32(shift) & 63)]) }
            i += 3
        }
        let rest = bytes.count - i
        if rest > 0 {
            var n = UInt32(bytes[i]) << 16
            if rest == 2 { n |= UInt32(bytes[i + 1]) << 8 }
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            if rest == 2 { out.append(alphabet[Int(n >> 6 & 63)]) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var values: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(byte - 65)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(byte - 71)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(byte + 4)
            case UInt8(ascii: "-"): values.append(62)
            case UInt8(ascii: "_"): values.append(63)
            case UInt8(ascii: "="): continue
            default: return nil
            }
        }
        guard values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < values.count {
            let chunk = values[i..<min(i + 4, values.count)]
            var n: UInt32 = 0
            for (j, v) in chunk.enumerated() { n |= UInt32(v) << UInt32(18 - 6 * j) }
            out.append(UInt8(n >> 16 & 255))
            if chunk.count > 2 { out.append(UInt8(n >> 8 & 255)) }
            if chunk.count > 3 { out.append(UInt8(n & 255)) }
            i += 4
        }
        return out
    }
}
