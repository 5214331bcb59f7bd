import ParleyCore

private typealias Field = NativeProtocol.Field

/// A device as a client names it (native `register_device`, REST): the platform and its
/// token, or a Web Push subscription as the browser's `PushSubscription.toJSON()` gives it.
struct PushDeviceRequest: Equatable, Sendable {
    let platform: PushDevice.Platform
    let token: String
    var topic: String?
    var sandbox = false
    var p256dh: [UInt8]?
    var auth: [UInt8]?

    struct Problem: Error, Equatable { let message: String }

    /// `{platform: "webpush", subscription: {endpoint, keys: {p256dh, auth}}}`, or
    /// `{platform: "apns", token, topic, environment}` / `{platform: "fcm", token}`; an
    /// unregister needs only the platform and the token (or the endpoint).
    static func parse(_ fields: JSONValue) -> Result<PushDeviceRequest, Problem> {
        guard let name = fields[Field.platform]?.stringValue, let platform = PushDevice.Platform(rawValue: name) else {
            return .failure(Problem(message: "platform must be apns, fcm or webpush"))
        }
        if platform == .webpush {
            let subscription = fields[Field.subscription] ?? fields
            guard let endpoint = subscription[Field.endpoint]?.stringValue ?? fields[Field.token]?.stringValue else {
                return .failure(Problem(message: "a Web Push device needs subscription.endpoint"))
            }
            var request = PushDeviceRequest(platform: .webpush, token: endpoint)
            if let keys = subscription[Field.keys] {
                guard let p256dh = keys[Field.p256dh]?.stringValue.flatMap({ Base64URL.decode($0) }),
                      let auth = keys[Field.auth]?.stringValue.flatMap({ Base64URL.decode($0) }) else {
                    return .failure(Problem(message: "subscription.keys needs p256dh and auth, base64url"))
                }
                request.p256dh = p256dh
                request.auth = auth
            }
            return .success(request)
        }
        guard let token = fields[Field.token]?.stringValue else { return .failure(Problem(message: "missing or non-string token")) }
        var request = PushDeviceRequest(platform: platform, token: token)
        request.topic = fields[Field.topic]?.stringValue
        if let environment = fields[Field.environment]?.stringValue {
            guard environment == "sandbox" || environment == "production" else {
                return .failure(Problem(message: "environment must be sandbox or production"))
            }
            request.sandbox = environment == "sandbox"
        }
        return .success(request)
    }

    func device(channel: String, user: String, nowMillis: Int64) -> PushDevice {
        PushDevice(channel: channel, user: user, platform: platform, token: token, topic: topic, sandbox: sandbox, p256dh: p256dh,
                   auth: auth, registeredMillis: nowMillis)
    }
}
