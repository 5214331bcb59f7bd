import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// Authentication on the Socket.IO, line and REST doors (the native door: NativeAuthTests).
/// In the line suite (serialized): these tests block their thread, and one more suite doing
/// so in parallel starves the async tests of the small concurrency pool.
extension LineDoorTests {
    typealias F = AuthFixtures

    /// A server whose lobby is in the auth-requiring channel `acme`.
    func startLobbyServer() throws -> ParleyServer {
        try startAuthServer { $0.lobby = RoomKey(channel: "acme", room: "observable-room") }
    }

    // MARK: Socket.IO

    func authPayload(_ token: JSONValue) -> String {
        let value: JSONValue = ["token": token]
        return value.jsonString
    }

    func connectError(_ client: PollingClient) throws -> JSONValue? {
        let packet = try client.poll(until: { $0.hasPrefix("44") || $0.hasPrefix("40") })
        guard packet.hasPrefix("44") else { return nil }
        return try JSONParser.parse(String(packet.dropFirst(2)))
    }

    @Test func socketIOConnectNeedsAValidTokenForAnAuthLobby() throws {
        let server = try startLobbyServer()
        defer { server.shutdown() }
        // No token.
        let anonymous = try PollingClient.open(port: server.httpPort, version: 4)
        try anonymous.post(["40"])
        #expect(try connectError(anonymous) == ["message": "this lobby requires authentication: connect with auth: {token: \"<JWT>\"}"])
        // Events stay refused.
        try anonymous.post(["421[\"connectUser\",\"mallory\"]"])
        #expect(try anonymous.poll(until: { $0.hasPrefix("43") || $0.hasPrefix("44") }).hasPrefix("44"))
        // Bad tokens.
        let bad = [
            F.jwt(F.payload(client: nil), secret: "wrong"),
            F.jwt(F.payload(client: nil, exp: F.nowSeconds - 5)),
            F.jwt(F.payload(client: "a-native-client-id")),
            "not.a.jwt",
        ]
        for token in bad {
            let client = try PollingClient.open(port: server.httpPort, version: 4)
            try client.post(["40" + authPayload(.string(token))])
            let error = try #require(try connectError(client))
            #expect(error["message"]?.stringValue?.hasPrefix("authentication failed: ") == true, "\(error)")
        }
        // A good token (client "*" or absent), with authData visible to a native watcher.
        let watcher = try NativeClient.connect(server, channel: "acme")
        try watcher.send(["type": "authenticate", "callback": 7, "token": .string(F.jwt(F.payload(client: watcher.clientID)))])
        #expect(try watcher.next { $0["callback"] == 7 }["error"] == nil)
        #expect(try watcher.subscribe("observable-room")["error"] == nil)
        for client in [nil, "*"] as [String?] {
            let sio = try PollingClient.open(port: server.httpPort, version: 4)
            try sio.post(["40" + authPayload(.string(F.jwt(F.payload(client: client, data: ["via": "sio"]))))])
            #expect(try connectError(sio) == nil)
            let nick = "sio\(client == nil ? "a" : "b")"
            try sio.post(["421[\"connectUser\",\"\(nick)\"]"])
            #expect(try sio.poll(until: { $0.hasPrefix("43") }) == "431[]")
            let join = try watcher.next { $0["type"] == "observable_member_join" }
            #expect(join["data"]?["authData"] == ["via": "sio"])
            #expect(join["data"]?["clientData"]?["name"]?.stringValue == nick)
        }
    }

    @Test func socketIOTokenPermissionsApplyToTheLobbyRoom() throws {
        let server = try startLobbyServer()
        defer { server.shutdown() }
        let readOnly: JSONValue = ["observable-room": ["publish": false, "subscribe": true, "history": 0]]
        let sio = try PollingClient.open(port: server.httpPort, version: 4)
        try sio.post(["40" + authPayload(.string(F.jwt(F.payload(client: nil, permissions: readOnly))))])
        #expect(try connectError(sio) == nil)
        try sio.post(["421[\"connectUser\",\"reader\"]"])
        #expect(try sio.poll(until: { $0.hasPrefix("43") }) == "431[]")
        try sio.post(["422[\"chatMessage\",\"reader\",\"hi\"]"])
        let ack = try sio.poll(until: { $0.hasPrefix("43") })
        #expect(ack.contains("does not allow publishing"))
    }

    @Test func socketIOOnAClosedLobbyChannelIsRefused() throws {
        let server = try startAuthServer(openChannels: false)  // lobby demo/observable-room, not listed
        defer { server.shutdown() }
        let sio = try PollingClient.open(port: server.httpPort, version: 4)
        try sio.post(["40"])
        #expect(try connectError(sio) == ["message": "channel \"demo\" is not open on this server"])
    }

    // MARK: line

    @Test func lineAuthFlow() throws {
        let server = try startLobbyServer()
        defer { server.shutdown() }
        let refused = try TestSocket(port: server.linePort)
        try refused.send("iam:mallory\n")
        #expect(try refused.readLine() == "error: this lobby requires authentication: send auth:TOKEN first")
        try refused.send("auth:not.a.jwt\n")
        #expect(try refused.readLine().hasPrefix("error: authentication failed: "))
        try refused.send("auth:\(F.jwt(F.payload(client: "someone")))\n")
        #expect(try refused.readLine().hasPrefix("error: authentication failed: token is for one client"))
        try refused.send("auth:\(F.jwt(F.payload(client: nil, exp: F.nowSeconds - 1)))\n")
        #expect(try refused.readLine() == "error: authentication failed: token expired")

        let alice = try TestSocket(port: server.linePort)
        try alice.send("auth:\(F.jwt(F.payload(client: "*", data: ["via": "line"])))\n")
        #expect(try alice.readLine() == "auth ok")
        try alice.send("iam:alice\n")
        #expect(try alice.readLine(until: { $0 == "alice has joined" }) == "alice has joined")
        try alice.send("msg:hello\n")
        #expect(try alice.readLine() == "alice:hello")
        #expect(server.hub.members(of: server.configuration.lobby).first?.authData == ["via": "line"])

        // Permissions: a read-only token joins but cannot send.
        let reader = try TestSocket(port: server.linePort)
        let readOnly: JSONValue = ["observable-room": ["publish": false, "subscribe": true, "history": 0]]
        try reader.send("auth:\(F.jwt(F.payload(client: nil, permissions: readOnly)))\n")
        #expect(try reader.readLine() == "auth ok")
        try reader.send("iam:reader\n")
        _ = try reader.readLine(until: { $0 == "reader has joined" })
        try reader.send("msg:hi\n")
        #expect(try reader.readLine(until: { $0.hasPrefix("error") }).contains("does not allow publishing"))
    }

    @Test func lineOnAnOpenLobbyNeedsNoToken() throws {
        let server = try startAuthServer()
        defer { server.shutdown() }
        let socket = try TestSocket(port: server.linePort)
        try socket.send("auth:whatever\n")
        #expect(try socket.readLine().contains("does not use authentication"))
        try socket.send("iam:bob\n")
        #expect(try socket.readLine() == "bob has joined")
    }

    // MARK: REST

    func basic(_ text: String) -> (String, String) { ("Authorization", "Basic " + Data(text.utf8).base64EncodedString()) }

    @Test func restCredentials() throws {
        let server = try startAuthServer()
        defer { server.shutdown() }
        let port = server.httpPort
        let body = Array(#""hello""#.utf8)
        // None on an auth channel: 401 with WWW-Authenticate.
        let none = try httpRequest(port: port, "POST", "/acme/room/publish", body: body)
        #expect(none.status == 401)
        #expect(none.header("WWW-Authenticate")?.contains("Basic") == true)
        #expect(none.body.contains("requires authentication"))
        #expect(try httpRequest(port: port, "GET", "/acme/stats").status == 401)
        // Basic.
        #expect(try httpRequest(port: port, "POST", "/acme/room/publish", body: body, headers: [basic("acme:s3cret")]).status == 200)
        #expect(try httpRequest(port: port, "GET", "/acme/stats", headers: [basic("acme:s3cret")]).status == 200)
        let wrong = try httpRequest(port: port, "POST", "/acme/room/publish", body: body, headers: [basic("acme:nope")])
        #expect(wrong.status == 401 && wrong.body == "wrong channel or secret\n" && wrong.header("WWW-Authenticate") != nil)
        #expect(try httpRequest(port: port, "GET", "/acme/stats", headers: [basic("open-acme:s3cret")]).status == 401)
        // Bearer.
        let limited: JSONValue = ["room": ["publish": true, "subscribe": false, "history": 0]]
        let token = F.jwt(F.payload(client: nil, permissions: limited))
        #expect(try httpRequest(port: port, "POST", "/acme/room/publish", body: body, headers: [("Authorization", "Bearer " + token)]).status == 200)
        #expect(try httpRequest(port: port, "GET", "/acme/members", headers: [("Authorization", "Bearer " + token)]).status == 200)
        let denied = try httpRequest(port: port, "POST", "/acme/publish/rooms?r=room&r=other", body: body, headers: [("Authorization", "Bearer " + token)])
        #expect(denied.status == 403 && denied.body.contains("\"other\""))
        for bad in [F.jwt(F.payload(client: nil), secret: "x"), F.jwt(F.payload(client: nil, exp: F.nowSeconds - 3)),
                    F.jwt(F.payload(client: nil, channel: "open-acme")), "garbage"] {
            let response = try httpRequest(port: port, "POST", "/acme/room/publish", body: body, headers: [("Authorization", "Bearer " + bad)])
            #expect(response.status == 401 && response.header("WWW-Authenticate") != nil, "\(response.body)")
        }
        // Open channels need nothing; a closed server refuses unlisted channels.
        #expect(try httpRequest(port: port, "POST", "/demo/room/publish", body: body).status == 200)
        #expect(try httpRequest(port: port, "POST", "/open-acme/room/publish", body: body).status == 200)
    }

    @Test func restOnAClosedChannel() throws {
        let server = try startAuthServer(openChannels: false)
        defer { server.shutdown() }
        let response = try httpRequest(port: server.httpPort, "GET", "/demo/stats")
        #expect(response.status == 404 && response.body == "channel \"demo\" is not open on this server\n")
    }
}
