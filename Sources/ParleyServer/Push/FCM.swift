import Foundation
import ParleyCore
import Synchronization

/// Firebase Cloud Messaging: the HTTP v1 API. A Google service account signs an RS256 JWT,
/// exchanges it at the token endpoint for an OAuth2 access token (kept until shortly before it
/// expires), and sends each message to `/v1/projects/PROJECT/messages:send`.
final class FCMProvider: Sendable {
    /// What the service account's JSON key file holds that the provider needs.
    struct ServiceAccount: Sendable {
        var projectID: String
        var clientEmail: String
        var privateKeyID: String
        var key: RSAKey

        /// Reads a service account key file (`type` `service_account`, as the Firebase console
        /// downloads it).
        init(json bytes: [UInt8]) throws(StartupError) {
            let value: JSONValue
            do { value = try JSONParser.parse(bytes) } catch { throw StartupError(description: "the FCM service account file is not JSON: \(error)") }
            func field(_ name: String) throws(StartupError) -> String {
                guard let text = value[name]?.stringValue, !text.isEmpty else {
                    throw StartupError(description: "the FCM service account file has no \(name)")
                }
                return text
            }
            guard value["type"]?.stringValue == "service_account" else {
                throw StartupError(description: "the FCM service account file is not a service account key (type must be service_account)")
            }
            projectID = try field("project_id")
            guard projectID.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) }) else {
                throw StartupError(description: "the FCM project id must be lowercase letters, digits and dashes")
            }
            clientEmail = try field("client_email")
            privateKeyID = try field("private_key_id")
            let pem = try field("private_key")
            do { key = try RSAKey(pem: pem) } catch { throw StartupError(description: "the FCM service account's private_key: \(error)") }
        }
    }

    struct Settings: Sendable {
        var account: ServiceAccount
        /// Where messages go (`https://fcm.googleapis.com`).
        var endpoint: String
        /// Where the JWT is exchanged for an access token (also the JWT's audience).
        var tokenEndpoint: String
    }

    static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// The JWT's lifetime (Google takes at most one hour).
    static let assertionSeconds: Int64 = 3600
    /// An access token is renewed this long before it expires.
    static let renewBeforeSeconds: Int64 = 300

    let settings: Settings
    private let accessToken = Mutex<(token: String, expiresSeconds: Int64)?>(nil)

    init(_ settings: Settings) {
        self.settings = settings
    }

    /// The signed assertion for the token endpoint (RFC 7523): the service account as issuer,
    /// the messaging scope, the token endpoint as audience.
    func assertion(nowSeconds: Int64) throws(P256Key.Failure) -> String {
        let header = Base64URL.encode(JSONValue.object(["alg": "RS256", "typ": "JWT", "kid": .string(settings.account.privateKeyID)]).serialized())
        let claims = Base64URL.encode(JSONValue.object([
            "iss": .string(settings.account.clientEmail), "scope": .string(Self.scope), "aud": .string(settings.tokenEndpoint),
            "iat": .number(JSONNumber(Int(nowSeconds))), "exp": .number(JSONNumber(Int(nowSeconds + Self.assertionSeconds))),
        ]).serialized())
        let input = header + "." + claims
        return input + "." + Base64URL.encode(try settings.account.key.signRS256(Array(input.utf8)))
    }

    private enum Token {
        case token(String)
        /// The exchange failed: what the push's outcome is.
        case outcome(PushService.Outcome)
    }

    /// The access token, from the cache or a fresh exchange.
    private func token(nowSeconds: Int64, caFile: String?) -> Token {
        if let current = accessToken.withLock({ $0 }), nowSeconds < current.expiresSeconds - Self.renewBeforeSeconds {
            return .token(current.token)
        }
        let jwt: String
        do { jwt = try assertion(nowSeconds: nowSeconds) } catch { return .outcome(.failed("FCM assertion: \(error)")) }
        // The JWT is base64url and dots: nothing in it needs form encoding.
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + jwt
        let request = OutgoingRequest(url: settings.tokenEndpoint, headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                      body: Array(form.utf8), caFile: caFile)
        switch OutgoingHTTP.send(request) {
        case .failure:
            return .outcome(.retry(5_000))
        case .success(let response):
            let answer = try? JSONParser.parse(response.body)
            guard response.status == 200, let token = answer?["access_token"]?.stringValue, !token.isEmpty,
                  !token.contains("\r"), !token.contains("\n") else {
                if response.status == 429 || response.status >= 500 { return .outcome(.retry(response.retryAfterMillis(default: 5_000))) }
                let why = answer?["error_description"]?.stringValue ?? answer?["error"]?.stringValue ?? "no access_token"
                return .outcome(.failed("the FCM token endpoint refused the service account: HTTP \(response.status) \(why)"))
            }
            let lifetime = Int64(answer?["expires_in"]?.intValue ?? 3600)
            accessToken.withLock { $0 = (token, nowSeconds + max(lifetime, Self.renewBeforeSeconds + 60)) }
            return .token(token)
        }
    }

    /// The v1 message: the notification, the data as strings (FCM's rule), the room as the
    /// Android collapse key and tag (a newer push of the room replaces an older one) with the
    /// badge as notification count, and the APNs fields for iOS devices that take FCM.
    static func message(_ content: PushRules.Content, token: String) -> [UInt8] {
        let collapse = PushService.topic(for: content.room)
        let direct = DirectRoom.isDirect(content.room)
        return JSONValue.object(["message": [
            "token": .string(token),
            "notification": ["title": .string(content.title), "body": .string(content.body)],
            "data": ["channel": .string(content.channel), "room": .string(content.room), "offset": .string(String(content.offset)),
                     "id": .string(content.messageID), "badge": .string(String(content.badge))],
            "android": ["collapse_key": .string(collapse), "priority": .string(direct ? "high" : "normal"), "ttl": "86400s",
                        "notification": ["tag": .string(collapse), "notification_count": .number(JSONNumber(content.badge))]],
            "apns": ["headers": ["apns-collapse-id": .string(collapse)],
                     "payload": ["aps": ["badge": .number(JSONNumber(content.badge)), "thread-id": .string(content.thread),
                                         "mutable-content": 1, "sound": "default"]]],
        ]]).serialized()
    }

    /// What FCM's answer means for the device (its `FcmError` code, else the HTTP status).
    func outcome(of response: OutgoingResponse) -> PushService.Outcome {
        let error = (try? JSONParser.parse(response.body))?["error"]
        let code = error?["details"]?.arrayValue?.lazy.compactMap { $0["errorCode"]?.stringValue }.first ?? error?["status"]?.stringValue ?? ""
        let message = error?["message"]?.stringValue ?? ""
        switch response.status {
        case 200: return .sent
        // Only FCM's own word removes a device: a bare 404 (a wrong project id or endpoint)
        // must not wipe every device of the server.
        case _ where code == "UNREGISTERED" || code == "SENDER_ID_MISMATCH": return .gone
        case 400 where message.localizedCaseInsensitiveContains("registration token"): return .gone
        case 401:
            accessToken.withLock { $0 = nil }
            return .retry(1_000)
        case 429, 500...599: return .retry(response.retryAfterMillis(default: 5_000))
        default: return .failed("HTTP \(response.status) \(code) \(message.prefix(200))")
        }
    }

    func send(_ content: PushRules.Content, to device: PushDevice, nowSeconds: Int64, caFile: String?) -> PushService.Outcome {
        let bearer: String
        switch token(nowSeconds: nowSeconds, caFile: caFile) {
        case .token(let token): bearer = token
        case .outcome(let outcome): return outcome
        }
        let url = settings.endpoint + "/v1/projects/" + settings.account.projectID + "/messages:send"
        let request = OutgoingRequest(url: url, headers: [("Authorization", "Bearer " + bearer), ("Content-Type", "application/json")],
                                      body: Self.message(content, token: device.token), caFile: caFile)
        switch OutgoingHTTP.send(request) {
        case .failure: return .retry(5_000)
        case .success(let response): return outcome(of: response)
        }
    }
}
