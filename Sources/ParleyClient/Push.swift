import Foundation
import ParleyCore

private typealias Field = NativeProtocol.Field
private typealias MessageType = NativeProtocol.MessageType

/// A device that takes this user's push notifications while the app is away (docs/push.md).
public enum PushRegistration: Sendable, Hashable {
    /// An APNs device token (as `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)`
    /// gives it), the app's bundle id, and whether it is a development (sandbox) build.
    case apns(deviceToken: Data, topic: String, sandbox: Bool)
    /// An FCM registration token (Firebase's `Messaging.messaging().token`), for apps that
    /// send through Firebase (Android, or iOS through FCM).
    case fcm(token: String)
    /// A Web Push subscription: its endpoint and keys (`PushSubscription.toJSON()`).
    case webPush(endpoint: String, p256dh: String, auth: String)

    /// The device token as APNs names it: lowercase hex.
    public static func hex(_ token: Data) -> String {
        token.map { String(format: "%02x", $0) }.joined()
    }

    var command: JSONObject {
        var command: JSONObject = [Field.type: .string(MessageType.registerDevice)]
        switch self {
        case .apns(let token, let topic, let sandbox):
            command.append(key: Field.platform, value: "apns")
            command.append(key: Field.token, value: .string(Self.hex(token)))
            command.append(key: Field.topic, value: .string(topic))
            command.append(key: Field.environment, value: .string(sandbox ? "sandbox" : "production"))
        case .fcm(let token):
            command.append(key: Field.platform, value: "fcm")
            command.append(key: Field.token, value: .string(token))
        case .webPush(let endpoint, let p256dh, let auth):
            command.append(key: Field.platform, value: "webpush")
            command.append(key: Field.subscription, value: [Field.endpoint: .string(endpoint),
                                                            Field.keys: [Field.p256dh: .string(p256dh), Field.auth: .string(auth)]])
        }
        return command
    }

    var unregisterCommand: JSONObject {
        switch self {
        case .apns(let token, _, _):
            [Field.type: .string(MessageType.unregisterDevice), Field.platform: "apns", Field.token: .string(Self.hex(token))]
        case .fcm(let token):
            [Field.type: .string(MessageType.unregisterDevice), Field.platform: "fcm", Field.token: .string(token)]
        case .webPush(let endpoint, _, _):
            [Field.type: .string(MessageType.unregisterDevice), Field.platform: "webpush", Field.token: .string(endpoint)]
        }
    }
}

extension ParleyClient {
    /// Registers this user's device for push notifications (needs a user: `userID`, or a
    /// token's `user` claim). The server remembers it across restarts until it is unregistered
    /// or the push service says it is gone.
    public func registerDevice(_ registration: PushRegistration) async throws(ParleyClientError) {
        let reply = try await send(registration.command)
        if let error = reply[Field.error]?.stringValue { throw ParleyClientError(.server, error) }
    }

    /// Stops push notifications to this device.
    public func unregisterDevice(_ registration: PushRegistration) async throws(ParleyClientError) {
        let reply = try await send(registration.unregisterCommand)
        if let error = reply[Field.error]?.stringValue { throw ParleyClientError(.server, error) }
    }

    /// Mutes `room` (nil: every room) until `until`; a date in the past lifts the mute. A
    /// mention or a direct message may still come through, as the server is set up.
    public func mute(_ room: String?, until: Date) async throws(ParleyClientError) {
        var command: JSONObject = [Field.type: .string(MessageType.mute),
                                   Field.until: .number(JSONNumber(max(0, Int(until.timeIntervalSince1970))))]
        if let room { command.append(key: Field.room, value: .string(room)) }
        let reply = try await send(command)
        if let error = reply[Field.error]?.stringValue { throw ParleyClientError(.server, error) }
    }
}

#if canImport(UserNotifications)
import UserNotifications

extension ParleyClient {
    /// Apple glue, kept thin: asks for permission to show alerts and badges. The device token
    /// comes to the app delegate; pass it to ``registerDevice(_:)`` as `.apns`.
    public nonisolated static func requestNotificationPermission() async -> Bool {
        (try? await UNUserNotificationCenter.current().requestAuthorization(options: [.alert, .badge, .sound])) ?? false
    }
}
#endif
