import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// Serialized: fewer servers at once on a loaded machine (timing-sensitive suites run beside it).
@Suite(.serialized) struct NativeAuthTests {
    typealias F = AuthFixtures

    @Test func requireAuthThenAValidTokenUnlocksTheChannel() async throws {
        let server = try startAuthServer()
        defer { server.shutdown() }
        let (client, reply) = try await NativeClient.handshake(server, channel: "acme")
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
        let (_, open) = try await NativeClient.handshake(server, channel: "demo")
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
        let server = try startAuthServer()
        defer { server.shutdown() }
        for (kind, expected) in Self.badTokens {
            try await checkBadToken(server, kind, expected)
        }
    }

    func checkBadToken(_ server: ParleyServer, _ kind: String, _ expected: String) async throws {
        let (client, _) = try await NativeClient.handshake(server, channel: "acme")
        let id = client.clientID
        let token: String
        switch kind {
        case "expired (seconds)": token = F.jwt(F.payload(client: id, exp: F.nowSeconds - 10))
        case "expired (milliseconds)": token = F.jwt(F.payload(client: id, exp: (F.nowSeconds - 10) * 1000))
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
        let server = try startAuthServer()
        defer { server.shutdown() }
        let permissions: JSONValue = [
            "^chat-[0-9]+$": ["publish": true, "subscribe": true, "history": 2],
            "readonly": ["publish": false, "subscribe": true, "history": 0],
        ]
        let (writer, _) = try await NativeClient.handshake(server, channel: "acme")
        #expect(try await writer.authenticate(F.jwt(F.payload(client: writer.clientID)))["error"] == nil)
        for n in 1...4 { #expect(try await writer.publishAcknowledged(.number(JSONNumber(n)), to: "chat-1")["error"] == nil) }
        for n in 1...2 { #expect(try await writer.publishAcknowledged(.number(JSONNumber(n)), to: "readonly")["error"] == nil) }

        let (client, _) = try await NativeClient.handshake(server, channel: "acme")
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
        let (other, _) = try await NativeClient.handshake(server, channel: "acme")
        let noSubscribe: JSONValue = [".*": ["publish": true, "subscribe": false, "history": 0]]
        #expect(try await other.authenticate(F.jwt(F.payload(client: other.clientID, permissions: noSubscribe)))["error"] == nil)
        #expect(try await other.subscribe("chat-1")["error"]?.stringValue?.contains("does not allow subscribing") == true)
        #expect(try await other.publishAcknowledged("ok", to: "chat-1")["error"] == nil)
    }

    @Test func authDataIsShownToOthersInObservableRooms() async throws {
        let server = try startAuthServer()
        defer { server.shutdown() }
        let (alice, _) = try await NativeClient.handshake(server, channel: "acme", clientData: ["name": "alice"])
        #expect(try await alice.authenticate(F.jwt(F.payload(client: alice.clientID, data: ["role": "admin"])))["error"] == nil)
        #expect(try await alice.subscribe("observable-team")["error"] == nil)
        _ = try await alice.next { $0["type"] == "observable_members" }

        let (bob, _) = try await NativeClient.handshake(server, channel: "acme", clientData: ["name": "bob"])
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
        let server = try startAuthServer()
        defer { server.shutdown() }
        let (client, reply) = try await NativeClient.handshake(server, channel: "open-acme")
        #expect(reply["require_auth"] == nil)
        #expect(try await client.subscribe("anything")["error"] == nil)
        let onlyLobby: JSONValue = ["lobby": ["publish": true, "subscribe": true, "history": 0]]
        let token = F.jwt(F.payload(client: client.clientID, channel: "open-acme", permissions: onlyLobby))
        #expect(try await client.authenticate(token)["error"] == nil)
        #expect(try await client.subscribe("lobby")["error"] == nil)
        #expect(try await client.subscribe("other")["error"]?.stringValue?.contains("grants nothing") == true)
        // A channel with no secret cannot authenticate at all.
        let (plain, _) = try await NativeClient.handshake(server, channel: "demo")
        #expect(try await plain.authenticate(token)["error"]?.stringValue?.contains("does not use authentication") == true)
    }

    @Test func anUnlistedChannelIsRefusedWhenChannelsAreClosed() async throws {
        let server = try startAuthServer(openChannels: false)
        defer { server.shutdown() }
        let (client, reply) = try await NativeClient.handshake(server, channel: "demo")
        #expect(reply["error"] == "channel \"demo\" is not open on this server")
        #expect(reply["client_id"]?.stringValue?.isEmpty == false)
        #expect(try await client.subscribe("room")["error"] == "handshake first")
        let (_, listed) = try await NativeClient.handshake(server, channel: "open-acme")
        #expect(listed["error"] == nil)
    }

    @Test func theConnectionClosesWhenTheTokenExpires() async throws {
        let server = try startAuthServer()
        defer { server.shutdown() }
        let (client, _) = try await NativeClient.handshake(server, channel: "acme")
        let expMillis = Int64(Date().timeIntervalSince1970 * 1000) + 700
        #expect(try await client.authenticate(F.jwt(F.payload(client: client.clientID, exp: expMillis)))["error"] == nil)
        #expect(try await client.subscribe("room")["error"] == nil)
        let notice = try await client.next { $0["error"] != nil }
        #expect(notice["error"]?.stringValue?.contains("token expired") == true)
        #expect(try await client.ws.closeCode(timeout: 5) == 1008)
    }
}
