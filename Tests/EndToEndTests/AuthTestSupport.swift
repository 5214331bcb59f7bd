import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport

/// Channel `acme` requires auth (secret `s3cret`), `open-acme` has a secret but is open,
/// anything else is open unless `openChannels` is turned off.
func startAuthServer(openChannels: Bool = true, _ configure: (inout ServerConfiguration) -> Void = { _ in }) throws -> ParleyServer {
    try startTestServer { c in
        c.channels = [ChannelSettings(id: "acme", secret: AuthFixtures.secret, requireAuth: true),
                      ChannelSettings(id: "open-acme", secret: AuthFixtures.secret, requireAuth: false)]
        c.openChannels = openChannels
        configure(&c)
    }
}

enum AuthFixtures {
    static let secret = "s3cret"

    static var nowSeconds: Int64 { Int64(Date().timeIntervalSince1970) }

    /// A signed JWT with exactly this header and payload.
    static func jwt(header: JSONValue = ["alg": "HS256", "typ": "JWT"], _ payload: JSONValue, secret: String = secret) -> String {
        let input = Base64URL.encode(header.serialized()) + "." + Base64URL.encode(payload.serialized())
        let signature = OpenSSLHMAC().authenticationCode(key: Array(secret.utf8), message: Array(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }

    /// A payload granting everything in every room unless `permissions` says otherwise.
    static func payload(client: String?, channel: String = "acme", exp: Int64? = nil,
                        permissions: JSONValue = [".*": ["publish": true, "subscribe": true, "history": 100]],
                        data: JSONValue? = nil) -> JSONValue {
        var object: JSONObject = ["channel": .string(channel), "exp": .number(JSONNumber(Int(exp ?? nowSeconds + 3600))),
                                  "permissions": permissions]
        if let client { object.append(key: "client", value: .string(client)) }
        if let data { object.append(key: "data", value: data) }
        return .object(object)
    }
}

extension NativeClient {
    /// Connects and handshakes; returns the client and the whole handshake reply.
    static func handshake(_ server: ParleyServer, channel: String, clientData: JSONValue? = nil) async throws -> (NativeClient, JSONValue) {
        let client = try NativeClient(port: server.httpPort)
        var handshake: JSONObject = ["type": "handshake", "channel": .string(channel), "callback": 0]
        if let clientData { handshake.append(key: "client_data", value: clientData) }
        try client.send(.object(handshake))
        let reply = try await client.next()
        client.clientID = reply["client_id"]?.stringValue ?? ""
        return (client, reply)
    }

    /// Sends `authenticate` and returns the reply.
    func authenticate(_ token: String) async throws -> JSONValue {
        let callback = takeCallback()
        try send(["type": "authenticate", "token": .string(token), "callback": .number(JSONNumber(callback))])
        return try await next { $0["callback"]?.intValue == callback }
    }

    /// Publishes with a callback and returns the reply.
    func publishAcknowledged(_ message: JSONValue, to room: String) async throws -> JSONValue {
        let callback = takeCallback()
        try send(["type": "publish", "room": .string(room), "message": message, "callback": .number(JSONNumber(callback))])
        return try await next { $0["callback"]?.intValue == callback }
    }

    /// Parley's `history` command; returns the reply.
    func history(_ room: String, limit: Int) async throws -> JSONValue {
        let callback = takeCallback()
        try send(["type": "history", "room": .string(room), "limit": .number(JSONNumber(limit)), "callback": .number(JSONNumber(callback))])
        return try await next { $0["callback"]?.intValue == callback }
    }
}
