import Foundation
import ParleyCore
import ParleyIO
@testable import ParleyServer
import ParleyTestSupport
import Testing

/// Channel `acme` requires auth (secret `s3cret`), `open-acme` has a secret but is open,
/// anything else is open unless `openChannels` is turned off.
enum AuthFixtures {
    static let secret = "s3cret"

    /// Real time; an in-process server's manual clock stays at its start, so an expired
    /// token is an hour old (a test that starts slowly under load still sees it expired).
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

extension InProcessNative {
    /// Sends `authenticate` and returns the reply.
    func authenticate(_ token: String) async throws -> JSONValue {
        let callback = takeCallback()
        send(["type": "authenticate", "token": .string(token), "callback": .number(JSONNumber(callback))])
        return try await next { $0["callback"]?.intValue == callback }
    }
}

/// Authentication on every door in-process: the native door's tokens and permissions, the
/// line door's `auth:`, Socket.IO's connect payload, REST's Basic and Bearer credentials.
/// (Tests/EndToEndTests/NativeAuthTests keeps the token-expiry timer.)
@Suite struct AuthInProcessTests {
    typealias F = AuthFixtures

    static func startAuthServer(openChannels: Bool = true, _ configure: @escaping (inout ServerConfiguration) -> Void = { _ in }) throws -> InProcessServer {
        try InProcessServer { c in
            c.channels = [ChannelSettings(id: "acme", secret: AuthFixtures.secret, requireAuth: true),
                          ChannelSettings(id: "open-acme", secret: AuthFixtures.secret, requireAuth: false)]
            c.openChannels = openChannels
            configure(&c)
        }
    }

    /// A server whose lobby is in the auth-requiring channel `acme`.
    static func startLobbyServer() throws -> InProcessServer {
        try startAuthServer { $0.lobby = RoomKey(channel: "acme", room: "observable-room") }
    }

    /// A message action that waited its turn meets the token as it is then: one refreshed
    /// meanwhile without `publish` in the room refuses it.
    @Test func aHeldActionMeetsTheTokenAsItIsWhenItsTurnComes() async throws {
        let store = GatedStore()
        let server = try InProcessServer(store: store) { c in
            c.channels = [ChannelSettings(id: "acme", secret: AuthFixtures.secret, requireAuth: true)]
        }
        defer {
            store.release()
            server.stop()
        }
        let (client, _) = try await server.nativeHandshake(channel: "acme")
        #expect(try await client.authenticate(F.jwt(F.payload(client: client.clientID)))["error"] == nil)
        let target = try await client.holdAnAction(in: "r", store: store)
        client.send(["type": "edit", "room": "r", "target": .string(target), "message": "changed", "callback": 2])
        let readOnly = F.jwt(F.payload(client: client.clientID, permissions: ["^r$": ["subscribe": true]]))
        #expect(try await client.authenticate(readOnly)["error"] == nil)
        store.release()
        let edit = try await client.next { $0["callback"]?.intValue == 2 }
        #expect(edit["error"]?.stringValue?.contains("permission denied") == true, "\(edit)")
    }

    @Test func requireAuthThenAValidTokenUnlocksTheChannel() async throws {
        let server = try Self.startAuthServer()
        defer { server.stop() }
        let (client, reply) = try await server.nativeHandshake(channel: "acme")
        #expect(reply["require_auth"] == true)
        #expect(reply["client_id"]?.stringValue?.isEmpty == false)
        #expect(reply["error"] == nil)
        let refused = try await client.subscribe("room")
        #expect(refused["error"]?.stringValue?.contains("authentication required") == true)
        let refusedPublish = try await client.publishAcknowledged("hi", to: "room")
        #expect(refusedPublish["error"]?.stringValue?.contains("authentication required") == true)
        let refusedHistory = try await client.history("room", limit: 5)
        #expect(refusedHistory["error"]?.stringValue?.contains("authentication required") == true)

        let ok = try await client.authenticate(F.jwt(F.payload(client: client.clientID)))
        #expect(ok["error"] == nil)
        #expect(try await client.subscribe("room")["error"] == nil)
        #expect(try await client.publishAcknowledged("hi", to: "room")["error"] == nil)
        // Open channels answer without require_auth.
        let (_, open) = try await server.nativeHandshake(channel: "demo")
        #expect(open["require_auth"] == nil)
    }

    static let badTokens = [
        ("expired (seconds)", "expired"),
        ("expired (milliseconds)", "expired"),
        ("wrong signature", "signature does not match"),
        ("wrong channel", "another channel"),
        ("wrong client", "another client"),
        ("alg none", "algorithm must be HS256"),
    ]

    /// One server for every kind (fewer servers at once on a loaded machine).
    @Test func badTokensAreRefusedWithAClearErrorAndTheConnectionStays() async throws {
        let server = try Self.startAuthServer()
        defer { server.stop() }
        for (kind, expected) in Self.badTokens {
            try await checkBadToken(server, kind, expected)
        }
    }

    func checkBadToken(_ server: InProcessServer, _ kind: String, _ expected: String) async throws {
        let (client, _) = try await server.nativeHandshake(channel: "acme")
        let id = client.clientID
        let token: String
        switch kind {
        case "expired (seconds)": token = F.jwt(F.payload(client: id, exp: F.nowSeconds - 3600))
        case "expired (milliseconds)": token = F.jwt(F.payload(client: id, exp: (F.nowSeconds - 3600) * 1000))
        case "wrong signature": token = F.jwt(F.payload(client: id), secret: "not-the-secret")
        case "wrong channel": token = F.jwt(F.payload(client: id, channel: "other"))
        case "wrong client": token = F.jwt(F.payload(client: "someone-else"))
        default:
            let none: JSONValue = ["alg": "none", "typ": "JWT"]
            let header = Base64URL.encode(none.serialized())
            token = header + "." + Base64URL.encode(F.payload(client: id).serialized()) + "."
        }
        let reply = try await client.authenticate(token)
        #expect(reply["error"]?.stringValue?.contains(expected) == true, "\(kind): \(reply)")
        // Still refused, still connected.
        #expect(try await client.subscribe("room")["error"]?.stringValue?.contains("authentication required") == true)
        // A millisecond exp in the future is accepted.
        if kind == "expired (milliseconds)" {
            let ok = try await client.authenticate(F.jwt(F.payload(client: id, exp: (F.nowSeconds + 600) * 1000)))
            #expect(ok["error"] == nil)
        }
    }

    @Test func permissionsDecideSubscribePublishAndHistory() async throws {
        let server = try Self.startAuthServer()
        defer { server.stop() }
        let permissions: JSONValue = [
            "^chat-[0-9]+$": ["publish": true, "subscribe": true, "history": 2],
            "readonly": ["publish": false, "subscribe": true, "history": 0],
        ]
        let (writer, _) = try await server.nativeHandshake(channel: "acme")
        #expect(try await writer.authenticate(F.jwt(F.payload(client: writer.clientID)))["error"] == nil)
        for n in 1...4 { #expect(try await writer.publishAcknowledged(.number(JSONNumber(n)), to: "chat-1")["error"] == nil) }
        for n in 1...2 { #expect(try await writer.publishAcknowledged(.number(JSONNumber(n)), to: "readonly")["error"] == nil) }

        let (client, _) = try await server.nativeHandshake(channel: "acme")
        #expect(try await client.authenticate(F.jwt(F.payload(client: client.clientID, permissions: permissions)))["error"] == nil)
        // Subscribe: allowed where a pattern says so, denied elsewhere (an error reply, not a close).
        #expect(try await client.subscribe("chat-x")["error"]?.stringValue?.contains("grants nothing in room \"chat-x\"") == true)
        // History count capped at the permission's 2.
        #expect(try await client.subscribe("chat-1", historyCount: 10)["error"] == nil)
        var indexes: [Int] = []
        while indexes.count < 2 {
            let message = try await client.next { $0["type"] == "history_message" }
            indexes.append(message["index"]?.intValue ?? -1)
        }
        #expect(indexes == [0, 1])
        // No third one: a message published after the subscribe is the next thing it gets.
        #expect(try await writer.publishAcknowledged("marker 1", to: "chat-1")["error"] == nil)
        let afterHistory = try await client.next()
        #expect(afterHistory["type"] == "publish" && afterHistory["message"] == "marker 1", "\(afterHistory)")
        // history 0: subscribe gets no history, the history command is refused.
        #expect(try await client.subscribe("readonly", historyCount: 10)["error"] == nil)
        #expect(try await writer.publishAcknowledged("marker 2", to: "readonly")["error"] == nil)
        let afterSubscribe = try await client.next()
        #expect(afterSubscribe["type"] == "publish" && afterSubscribe["message"] == "marker 2", "\(afterSubscribe)")
        #expect(try await client.history("readonly", limit: 10)["error"]?.stringValue?.contains("does not allow reading the history") == true)
        let page = try await client.history("chat-1", limit: 10)
        #expect(page["messages"]?.arrayValue?.count == 2)
        // Publish: allowed / denied by the permission.
        #expect(try await client.publishAcknowledged("hi", to: "chat-1")["error"] == nil)
        #expect(try await client.publishAcknowledged("hi", to: "readonly")["error"]?.stringValue?.contains("does not allow publishing") == true)
        #expect(try await client.publishAcknowledged("hi", to: "elsewhere")["error"]?.stringValue?.contains("grants nothing") == true)
        // Subscribe denied by an explicit false.
        let (other, _) = try await server.nativeHandshake(channel: "acme")
        let noSubscribe: JSONValue = [".*": ["publish": true, "subscribe": false, "history": 0]]
        #expect(try await other.authenticate(F.jwt(F.payload(client: other.clientID, permissions: noSubscribe)))["error"] == nil)
        #expect(try await other.subscribe("chat-1")["error"]?.stringValue?.contains("does not allow subscribing") == true)
        #expect(try await other.publishAcknowledged("ok", to: "chat-1")["error"] == nil)
    }

    @Test func authDataIsShownToOthersInObservableRooms() async throws {
        let server = try Self.startAuthServer()
        defer { server.stop() }
        let (alice, _) = try await server.nativeHandshake(channel: "acme", clientData: ["name": "alice"])
        #expect(try await alice.authenticate(F.jwt(F.payload(client: alice.clientID, data: ["role": "admin"])))["error"] == nil)
        #expect(try await alice.subscribe("observable-team")["error"] == nil)
        _ = try await alice.next { $0["type"] == "observable_members" }

        let (bob, _) = try await server.nativeHandshake(channel: "acme", clientData: ["name": "bob"])
        #expect(try await bob.authenticate(F.jwt(F.payload(client: bob.clientID, data: ["role": "guest", "n": 2])))["error"] == nil)
        #expect(try await bob.subscribe("observable-team")["error"] == nil)
        let members = try await bob.next { $0["type"] == "observable_members" }
        let list = members["data"]?.arrayValue ?? []
        #expect(list.contains(["id": .string(alice.clientID), "clientData": ["name": "alice"], "authData": ["role": "admin"]]))
        #expect(list.contains(["id": .string(bob.clientID), "clientData": ["name": "bob"], "authData": ["role": "guest", "n": 2]]))
        let join = try await alice.next { $0["type"] == "observable_member_join" }
        #expect(join["data"] == ["id": .string(bob.clientID), "clientData": ["name": "bob"], "authData": ["role": "guest", "n": 2]])
    }

    @Test func anAuthenticatedConnectionOnAnOpenChannelIsCheckedToo() async throws {
        let server = try Self.startAuthServer()
        defer { server.stop() }
        let (client, reply) = try await server.nativeHandshake(channel: "open-acme")
        #expect(reply["require_auth"] == nil)
        #expect(try await client.subscribe("anything")["error"] == nil)
        let onlyLobby: JSONValue = ["lobby": ["publish": true, "subscribe": true, "history": 0]]
        let token = F.jwt(F.payload(client: client.clientID, channel: "open-acme", permissions: onlyLobby))
        #expect(try await client.authenticate(token)["error"] == nil)
        #expect(try await client.subscribe("lobby")["error"] == nil)
        #expect(try await client.subscribe("other")["error"]?.stringValue?.contains("grants nothing") == true)
        // A channel with no secret cannot authenticate at all.
        let (plain, _) = try await server.nativeHandshake(channel: "demo")
        #expect(try await plain.authenticate(token)["error"]?.stringValue?.contains("does not use authentication") == true)
    }

    @Test func anUnlistedChannelIsRefusedWhenChannelsAreClosed() async throws {
        let server = try Self.startAuthServer(openChannels: false)
        defer { server.stop() }
        let (client, reply) = try await server.nativeHandshake(channel: "demo")
        #expect(reply["error"] == "channel \"demo\" is not open on this server")
        #expect(reply["client_id"]?.stringValue?.isEmpty == false)
        #expect(try await client.subscribe("room")["error"] == "handshake first")
        let (_, listed) = try await server.nativeHandshake(channel: "open-acme")
        #expect(listed["error"] == nil)
    }

    // MARK: the other doors

    func authPayload(_ token: JSONValue) -> String {
        let value: JSONValue = ["token": token]
        return value.jsonString
    }

    func connectError(_ client: InProcessPolling) async throws -> JSONValue? {
        let packet = try await client.poll(until: { $0.hasPrefix("44") || $0.hasPrefix("40") })
        guard packet.hasPrefix("44") else { return nil }
        return try JSONParser.parse(String(packet.dropFirst(2)))
    }

    @Test func socketIOConnectNeedsAValidTokenForAnAuthLobby() async throws {
        let server = try Self.startLobbyServer()
        defer { server.stop() }
        // No token.
        let anonymous = try await InProcessPolling.open(server)
        try await anonymous.post(["40"])
        #expect(try await connectError(anonymous) == ["message": "this lobby requires authentication: connect with auth: {token: \"<JWT>\"}"])
        // Events stay refused.
        try await anonymous.post(["421[\"connectUser\",\"mallory\"]"])
        #expect(try await anonymous.poll(until: { $0.hasPrefix("43") || $0.hasPrefix("44") }).hasPrefix("44"))
        // Bad tokens.
        let bad = [
            F.jwt(F.payload(client: nil), secret: "wrong"),
            F.jwt(F.payload(client: nil, exp: F.nowSeconds - 3600)),
            F.jwt(F.payload(client: "a-native-client-id")),
            "not.a.jwt",
        ]
        for token in bad {
            let client = try await InProcessPolling.open(server)
            try await client.post(["40" + authPayload(.string(token))])
            let error = try #require(try await connectError(client))
            #expect(error["message"]?.stringValue?.hasPrefix("authentication failed: ") == true, "\(error)")
        }
        // A good token (client "*" or absent), with authData visible to a native watcher.
        let watcher = try await server.native(channel: "acme")
        watcher.send(["type": "authenticate", "callback": 7, "token": .string(F.jwt(F.payload(client: watcher.clientID)))])
        #expect(try await watcher.next { $0["callback"] == 7 }["error"] == nil)
        #expect(try await watcher.subscribe("observable-room")["error"] == nil)
        for client in [nil, "*"] as [String?] {
            let sio = try await InProcessPolling.open(server)
            try await sio.post(["40" + authPayload(.string(F.jwt(F.payload(client: client, data: ["via": "sio"]))))])
            #expect(try await connectError(sio) == nil)
            let nick = "sio\(client == nil ? "a" : "b")"
            try await sio.post(["421[\"connectUser\",\"\(nick)\"]"])
            #expect(try await sio.poll(until: { $0.hasPrefix("43") }) == "431[]")
            let join = try await watcher.next { $0["type"] == "observable_member_join" }
            #expect(join["data"]?["authData"] == ["via": "sio"])
            #expect(join["data"]?["clientData"]?["name"]?.stringValue == nick)
        }
    }

    @Test func socketIOTokenPermissionsApplyToTheLobbyRoom() async throws {
        let server = try Self.startLobbyServer()
        defer { server.stop() }
        let readOnly: JSONValue = ["observable-room": ["publish": false, "subscribe": true, "history": 0]]
        let sio = try await InProcessPolling.open(server)
        try await sio.post(["40" + authPayload(.string(F.jwt(F.payload(client: nil, permissions: readOnly))))])
        #expect(try await connectError(sio) == nil)
        try await sio.post(["421[\"connectUser\",\"reader\"]"])
        #expect(try await sio.poll(until: { $0.hasPrefix("43") }) == "431[]")
        try await sio.post(["422[\"chatMessage\",\"reader\",\"hi\"]"])
        let ack = try await sio.poll(until: { $0.hasPrefix("43") })
        #expect(ack.contains("does not allow publishing"))
    }

    @Test func socketIOOnAClosedLobbyChannelIsRefused() async throws {
        let server = try Self.startAuthServer(openChannels: false)  // lobby demo/observable-room, not listed
        defer { server.stop() }
        let sio = try await InProcessPolling.open(server)
        try await sio.post(["40"])
        #expect(try await connectError(sio) == ["message": "channel \"demo\" is not open on this server"])
    }

    // MARK: line

    @Test func lineAuthFlow() async throws {
        let server = try Self.startLobbyServer()
        defer { server.stop() }
        let refused = try await server.line()
        refused.send("iam:mallory\n")
        #expect(try await refused.readLine() == "error: this lobby requires authentication: send auth:TOKEN first")
        refused.send("auth:not.a.jwt\n")
        #expect(try await refused.readLine().hasPrefix("error: authentication failed: "))
        refused.send("auth:\(F.jwt(F.payload(client: "someone")))\n")
        #expect(try await refused.readLine().hasPrefix("error: authentication failed: token is for one client"))
        refused.send("auth:\(F.jwt(F.payload(client: nil, exp: F.nowSeconds - 3600)))\n")
        #expect(try await refused.readLine() == "error: authentication failed: token expired")

        let alice = try await server.line()
        alice.send("auth:\(F.jwt(F.payload(client: "*", data: ["via": "line"])))\n")
        #expect(try await alice.readLine() == "auth ok")
        alice.send("iam:alice\n")
        #expect(try await alice.readLine(until: { $0 == "alice has joined" }) == "alice has joined")
        alice.send("msg:hello\n")
        #expect(try await alice.readLine() == "alice:hello")
        #expect(server.server.hub.members(of: server.lobby).first?.authData == ["via": "line"])

        // Permissions: a read-only token joins but cannot send.
        let reader = try await server.line()
        let readOnly: JSONValue = ["observable-room": ["publish": false, "subscribe": true, "history": 0]]
        reader.send("auth:\(F.jwt(F.payload(client: nil, permissions: readOnly)))\n")
        #expect(try await reader.readLine() == "auth ok")
        reader.send("iam:reader\n")
        _ = try await reader.readLine(until: { $0 == "reader has joined" })
        reader.send("msg:hi\n")
        #expect(try await reader.readLine(until: { $0.hasPrefix("error") }).contains("does not allow publishing"))
    }

    @Test func lineOnAnOpenLobbyNeedsNoToken() async throws {
        let server = try Self.startAuthServer()
        defer { server.stop() }
        let socket = try await server.line()
        socket.send("auth:whatever\n")
        #expect(try await socket.readLine().contains("does not use authentication"))
        socket.send("iam:bob\n")
        #expect(try await socket.readLine() == "bob has joined")
    }

    // MARK: REST

    func basic(_ text: String) -> (String, String) { ("Authorization", "Basic " + Data(text.utf8).base64EncodedString()) }

    @Test func restCredentials() async throws {
        let server = try Self.startAuthServer()
        defer { server.stop() }
                let body = Array(#""hello""#.utf8)
        // None on an auth channel: 401 with WWW-Authenticate.
        let none = try await server.request("POST", "/acme/room/publish", body: body)
        #expect(none.status == 401)
        #expect(none.header("WWW-Authenticate")?.contains("Basic") == true)
        #expect(none.body.contains("requires authentication"))
        #expect(try await server.request("GET", "/acme/stats").status == 401)
        // Basic.
        #expect(try await server.request("POST", "/acme/room/publish", headers: [basic("acme:s3cret")], body: body).status == 200)
        #expect(try await server.request("GET", "/acme/stats", headers: [basic("acme:s3cret")]).status == 200)
        let wrong = try await server.request("POST", "/acme/room/publish", headers: [basic("acme:nope")], body: body)
        #expect(wrong.status == 401 && wrong.body == "wrong channel or secret\n" && wrong.header("WWW-Authenticate") != nil)
        #expect(try await server.request("GET", "/acme/stats", headers: [basic("open-acme:s3cret")]).status == 401)
        // Bearer.
        let limited: JSONValue = ["room": ["publish": true, "subscribe": false, "history": 0]]
        let token = F.jwt(F.payload(client: nil, permissions: limited))
        #expect(try await server.request("POST", "/acme/room/publish", headers: [("Authorization", "Bearer " + token)], body: body).status == 200)
        #expect(try await server.request("GET", "/acme/members", headers: [("Authorization", "Bearer " + token)]).status == 200)
        let denied = try await server.request("POST", "/acme/publish/rooms?r=room&r=other", headers: [("Authorization", "Bearer " + token)], body: body)
        #expect(denied.status == 403 && denied.body.contains("\"other\""))
        for bad in [F.jwt(F.payload(client: nil), secret: "x"), F.jwt(F.payload(client: nil, exp: F.nowSeconds - 3600)),
                    F.jwt(F.payload(client: nil, channel: "open-acme")), "garbage"] {
            let response = try await server.request("POST", "/acme/room/publish", headers: [("Authorization", "Bearer " + bad)], body: body)
            #expect(response.status == 401 && response.header("WWW-Authenticate") != nil, "\(response.body)")
        }
        // Open channels need nothing; a closed server refuses unlisted channels.
        #expect(try await server.request("POST", "/demo/room/publish", body: body).status == 200)
        #expect(try await server.request("POST", "/open-acme/room/publish", body: body).status == 200)
    }

    @Test func restOnAClosedChannel() async throws {
        let server = try Self.startAuthServer(openChannels: false)
        defer { server.stop() }
        let response = try await server.request("GET", "/demo/stats")
        #expect(response.status == 404 && response.body == "channel \"demo\" is not open on this server\n")
    }
}
