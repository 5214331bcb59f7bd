import Foundation
import ParleyCore
import Synchronization

/// Apple Push Notification service: the HTTP/2 provider API with token-based authentication
/// (an ES256 JWT signed with the team's `.p8` key, `kid` the key id, `iss` the team id),
/// refreshed well before Apple's one-hour limit.
final class APNsProvider: Sendable {
    struct Settings: Sendable {
        var key: P256Key
        var keyID: String
        var teamID: String
        var endpoint: String
        var sandboxEndpoint: String
    }

    let settings: Settings
    /// The current provider token and when it was made (Unix seconds).
    private let token = Mutex<(jwt: String, issuedSeconds: Int64)?>(nil)
    /// A token is used this long (Apple refuses one older than an hour, and one refreshed
    /// more often than every 20 minutes).
    static let tokenLifetimeSeconds: Int64 = 50 * 60

    init(_ settings: Settings) {
        self.settings = settings
    }

    /// The provider token for `now` (a fresh one after ``tokenLifetimeSeconds``).
    func providerToken(nowSeconds: Int64) throws(P256Key.Failure) -> String {
        if let current = token.withLock({ $0 }), nowSeconds - current.issuedSeconds < Self.tokenLifetimeSeconds { return current.jwt }
        let header = Base64URL.encode(JSONValue.object(["alg": "ES256", "kid": .string(settings.keyID)]).serialized())
        let claims = Base64URL.encode(JSONValue.object(["iss": .string(settings.teamID), "iat": .number(JSONNumber(Int(nowSeconds)))]).serialized())
        let input = header + "." + claims
        let jwt = input + "." + Base64URL.encode(try settings.key.signES256(Array(input.utf8)))
        token.withLock { $0 = (jwt, nowSeconds) }
        return jwt
    }

    /// The notification: an alert with title and body, the badge, the room as `thread-id`,
    /// `mutable-content` (a Notification Service Extension may fetch what is missing), and
    /// where it leads beside `aps`.
    static func payload(_ content: PushRules.Content) -> [UInt8] {
        JSONValue.object([
            "aps": ["alert": ["title": .string(content.title), "body": .string(content.body)], "badge": .number(JSONNumber(content.badge)),
                    "sound": "default", "thread-id": .string(content.thread), "mutable-content": 1],
            "channel": .string(content.channel), "room": .string(content.room), "offset": .number(JSONNumber(Int(content.offset))),
            "id": .string(content.messageID),
        ]).serialized()
    }

    /// `apns-collapse-id`: one per room (at most 64 bytes), so a newer push of the room
    /// replaces one not yet shown.
    static func collapseID(for room: String) -> String { PushService.topic(for: room) }

    func send(_ content: PushRules.Content, to device: PushDevice, nowSeconds: Int64, caFile: String?) -> PushService.Outcome {
        let jwt: String
        do { jwt = try providerToken(nowSeconds: nowSeconds) } catch { return .failed("provider token: \(error)") }
        let base = device.sandbox ? settings.sandboxEndpoint : settings.endpoint
        let request = OutgoingRequest(url: base + "/3/device/" + device.token, headers: [
            ("authorization", "bearer " + jwt), ("apns-topic", device.topic ?? ""), ("apns-push-type", "alert"),
            ("apns-priority", "10"), ("apns-expiration", String(nowSeconds + 86_400)), ("apns-collapse-id", Self.collapseID(for: content.room)),
            ("content-type", "application/json"),
        ], body: Self.payload(content), http2: true, caFile: caFile)
        switch OutgoingHTTP.send(request) {
        case .failure:
            return .retry(5_000)
        case .success(let response):
            let reason = (try? JSONParser.parse(response.body))?["reason"]?.stringValue ?? ""
            switch response.status {
            case 200: return .sent
            case 410: return .gone
            case 400 where reason == "BadDeviceToken" || reason == "DeviceTokenNotForTopic": return .gone
            case 403 where reason == "ExpiredProviderToken":
                token.withLock { $0 = nil }
                return .retry(1_000)
            case 429, 500...599:
                return .retry(response.retryAfterMillis(default: 5_000))
            default:
                return .failed("HTTP \(response.status) \(reason)")
            }
        }
    }
}
