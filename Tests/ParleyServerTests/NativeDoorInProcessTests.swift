import Foundation
import ParleyCore
import ParleyIO
import ParleyServer
import ParleyTestSupport
import Testing

/// The native (Scaledrone v3) door and REST in-process: the WebSocket upgrade, handshake,
/// subscribe, publish, history and refusals over in-memory connections
/// (Tests/EndToEndTests/NativeDoorTests keeps a smoke test over real sockets).
@Suite struct NativeDoorInProcessTests {
    @Test func handshakeSubscribeAndObservableMembers() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await server.native(clientData: ["name": "alice", "color": "#FF0000"])
        #expect(!alice.clientID.isEmpty)
        let reply = try await alice.subscribe("observable-room")
        #expect(reply.objectValue?.count == 1)
        let members = try await alice.next()
        #expect(members["type"] == "observable_members")
        #expect(members["room"] == "observable-room")
        #expect(members["data"] == .array([["id": .string(alice.clientID), "clientData": ["name": "alice", "color": "#FF0000"]]]))
    }

    @Test func fanOutReachesEverySubscriberIncludingSender() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await server.native(clientData: ["name": "alice"])
        let bob = try await server.native()
        try await alice.subscribe("chat")
        try await bob.subscribe("chat")
        alice.publish(["text": "hi", "n": 1.5], to: "chat")
        for client in [alice, bob] {
            let message = try await client.next { $0["type"] == "publish" }
            #expect(message["room"] == "chat")
            #expect(message["message"] == ["text": "hi", "n": 1.5])
            #expect(message["id"]?.stringValue?.isEmpty == false)
            // The server's clock is the test's.
            #expect(message["timestamp"]?.intValue == Int(server.clock.nowMillis() / 1000))
            #expect(message["client_id"] == .string(alice.clientID))
            #expect(message["offset"] == 1)
            #expect(message["callback"] == nil)
        }
        // A publish with a callback gets a receipt; a room need not be subscribed to.
        bob.send(["type": "publish", "room": "elsewhere", "message": "x", "callback": 7])
        let receipt = try await bob.next { $0["callback"] == 7 }
        #expect(receipt["offset"] == 1)
        #expect(receipt["id"]?.stringValue != nil)
        #expect(receipt["error"] == nil)
        // Typing is delivered without an offset.
        alice.publish(["typing": true], to: "chat")
        let typing = try await bob.next { $0["type"] == "publish" }
        #expect(typing["message"] == ["typing": true])
        #expect(typing["offset"] == nil)
    }

    @Test func observableJoinAndLeaveIncludingAbruptDisconnect() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await server.native(clientData: ["name": "alice", "color": "#00FF00"])
        try await alice.subscribe("observable-x")
        _ = try await alice.next()
        let bob = try await server.native(clientData: ["name": "bob", "extra": [1, 2, ["k": nil]]])
        try await bob.subscribe("observable-x")
        let members = try await bob.next()
        #expect(members["data"]?.arrayValue?.map { $0["id"] } == [.string(alice.clientID), .string(bob.clientID)])
        let join = try await alice.next()
        #expect(join == ["type": "observable_member_join", "room": "observable-x",
                         "data": ["id": .string(bob.clientID), "clientData": ["name": "bob", "extra": [1, 2, ["k": nil]]]]])
        bob.peer.reset()
        let leave = try await alice.next()
        #expect(leave["type"] == "observable_member_leave")
        #expect(leave["data"]?["clientData"] == ["name": "bob", "extra": [1, 2, ["k": nil]]])
        // Unsubscribe also announces the leave; a plain room announces nothing.
        let carol = try await server.native()
        try await carol.subscribe("observable-x")
        _ = try await alice.next { $0["type"] == "observable_member_join" }
        carol.send(["type": "unsubscribe", "room": "observable-x", "callback": 9])
        #expect(try await carol.next { $0["callback"] != nil } == ["callback": 9])
        let left = try await alice.next()
        #expect(left == ["type": "observable_member_leave", "room": "observable-x", "data": ["id": .string(carol.clientID)]])
        try await alice.subscribe("plain")
        let dave = try await server.native()
        try await dave.subscribe("plain")
        // No join for dave: his first message is the next thing alice gets.
        dave.publish("marker", to: "plain")
        let next = try await alice.next()
        #expect(next["type"] == "publish" && next["message"] == "marker", "\(next)")
    }

    @Test func historyAfterReconnect() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let first = try await server.native()
        for text in ["one", "two", "three"] { first.publish(.string(text), to: "observable-h") }
        try await first.subscribe("observable-h")
        first.peer.reset()
        let again = try await server.native()
        try await again.subscribe("observable-h", historyCount: 2)
        #expect(try await again.next()["type"] == "observable_members")
        let h0 = try await again.next(), h1 = try await again.next()
        #expect(h0["type"] == "history_message")
        #expect(h0["message"] == "two")
        #expect(h0["index"] == 0)
        #expect(h0["offset"] == 2)
        #expect(h0["client_id"] == .string(first.clientID))
        #expect(h0["timestamp"]?.intValue != nil)
        #expect(h1["message"] == "three")
        #expect(h1["index"] == 1)
        // No more history: its own message, published after, is the next thing it gets.
        again.publish("marker", to: "observable-h")
        let next = try await again.next()
        #expect(next["type"] == "publish" && next["message"] == "marker" && next["offset"] == 4, "\(next)")
        // The history command pages back from the newest.
        let page = try await again.history("observable-h", limit: 2)
        #expect(page["messages"]?.arrayValue?.map { $0["message"] } == ["three", "marker"])
        #expect(page["has_more"] == true)
        let older = try await again.history("observable-h", before: 3, limit: 10)
        #expect(older["messages"]?.arrayValue?.map { $0["message"] } == ["one", "two"])
        #expect(older["has_more"] == false)
    }

    @Test func binaryFrameHandshake() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let client = try await InProcessNative.open(server)
        client.ws.sendBinary(Array(#"{"type":"handshake","channel":"demo","callback":1}"#.utf8))
        let reply = try await client.next()
        #expect(reply["callback"] == 1)
        #expect(reply["client_id"]?.stringValue != nil)
        client.ws.sendBinary(Array(#"{"type":"subscribe","room":"r","callback":2,"history_count":0,"history":0}"#.utf8))
        #expect(try await client.next() == ["callback": 2])
    }

    @Test func badInputGetsErrorRepliesAndTheConnectionLives() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let client = try await InProcessNative.open(server)
        client.ws.sendText(#"{"type":"subscribe","room":"r","callback":0}"#)
        let early = try await client.next()
        #expect(early["callback"] == 0)
        #expect(early["error"]?.stringValue != nil)
        client.ws.sendText("{nope")
        let invalid = try await client.next()
        #expect(invalid["error"]?.stringValue != nil)
        #expect(invalid["callback"] == nil)
        client.ws.sendText("[1,2]")
        #expect(try await client.next()["error"]?.stringValue != nil)
        client.ws.sendText(#"{"type":"handshake","channel":"demo","callback":1}"#)
        let handshake = try await client.next()
        let id = try #require(handshake["client_id"]?.stringValue)
        client.ws.sendText(#"{"type":"handshake","channel":"demo","callback":2}"#)
        let twice = try await client.next()
        #expect(twice["callback"] == 2)
        #expect(twice["client_id"] == .string(id))
        #expect(twice["error"]?.stringValue != nil)
        client.ws.sendText(#"{"type":"dance","callback":3}"#)
        let unknown = try await client.next()
        #expect(unknown["callback"] == 3)
        #expect(unknown["error"]?.stringValue?.contains("dance") == true)
        client.ws.sendText(#"{"type":"subscribe","callback":4}"#)
        #expect(try await client.next() == ["callback": 4, "error": "missing room"])
        client.ws.sendText(#"{"type":"subscribe","room":5,"callback":5}"#)
        #expect(try await client.next()["error"] == "room must be a string")
        client.ws.sendText(#"{"type":"handshake","channel":7,"callback":6}"#)
        let badHandshake = try await client.next()
        #expect(badHandshake["client_id"]?.stringValue != nil)
        #expect(badHandshake["error"] != nil)
        // Still works.
        client.ws.sendText(#"{"type":"subscribe","room":"r","callback":8}"#)
        #expect(try await client.next() == ["callback": 8])
    }

    @Test func oversizeMessageClosesWith1009() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let client = try await server.native()
        let big = "\"" + String(repeating: "a", count: (1 << 20) + 10) + "\""
        client.ws.sendText(#"{"type":"publish","room":"r","message":"# + big + "}")
        #expect(try await client.ws.closeCode() == 1009)
    }

    @Test func lineAndNativeUsersChatInTheLobby() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await server.native(clientData: ["name": "alice", "color": "#123456"])
        try await alice.subscribe("observable-room")
        _ = try await alice.next()
        let carol = try await server.line()
        carol.send("iam:carol\n")
        #expect(try await carol.readLine() == "carol has joined")
        let join = try await alice.next()
        #expect(join["type"] == "observable_member_join")
        #expect(join["data"]?["clientData"]?["name"] == "carol")
        carol.send("msg:hi\n")
        let fromLine = try await alice.next { $0["type"] == "publish" }
        #expect(fromLine["message"] == "hi")
        #expect(fromLine["client_id"] == join["data"]?["id"])
        #expect(try await carol.readLine() == "carol:hi")
        alice.publish("hello carol", to: "observable-room")
        #expect(try await carol.readLine() == "alice:hello carol")
        // Typing reaches native subscribers only; line breaks from other doors are spaces.
        alice.publish(["typing": true], to: "observable-room")
        alice.publish("two\nlines", to: "observable-room")
        #expect(try await carol.readLine() == "alice:two lines")
        carol.reset()
        let leave = try await alice.next { $0["type"] == "observable_member_leave" }
        #expect(leave["data"]?["clientData"]?["name"] == "carol")
    }

    @Test func restPublishReachesNativeAndLineUsers() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await server.native(clientData: ["name": "alice"])
        try await alice.subscribe("observable-room")
        try await alice.subscribe("other")
        let carol = try await server.line()
        carol.send("iam:carol\n")
        _ = try await carol.readLine()
        let published = try await server.request("POST", "/demo/observable-room/publish", json: #""from rest""#)
        #expect(published.status == 200)
        let receipt = try JSONParser.parse(published.body)
        #expect(receipt["id"]?.stringValue != nil)
        #expect(receipt["offset"] == 1)
        let message = try await alice.next { $0["type"] == "publish" }
        #expect(message["message"] == "from rest")
        #expect(message["client_id"] == nil)
        #expect(try await carol.readLine() == "parley:from rest")

        // Body × rooms is bounded: each room stores the body once.
        let big = "\"" + String(repeating: "x", count: 600_000) + "\""
        let amplified = try await server.request("POST", "/demo/publish/rooms?" + (1...8).map { "r=a\($0)" }.joined(separator: "&"), json: big)
        #expect(amplified.status == 413 && amplified.body.contains("--max-multi-publish-bytes"), "\(amplified.body)")
        let many = try await server.request("POST", "/demo/publish/rooms?r=other&r=observable-room", json: #"{"a":1}"#)
        #expect(many.status == 200)
        let firstRoom = try await alice.next { $0["type"] == "publish" }["room"]?.stringValue
        let secondRoom = try await alice.next { $0["type"] == "publish" }["room"]?.stringValue
        #expect(Set([firstRoom, secondRoom].compactMap { $0 }) == ["other", "observable-room"])

        let bad = try await server.request("POST", "/demo/r/publish", json: "{oops")
        #expect(bad.status == 400)
        #expect(!bad.body.isEmpty)

        func get(_ path: String) async throws -> JSONValue { try JSONParser.parse(await server.request("GET", path).body) }
        #expect(try await get("/demo/stats") == ["users_count": 2])
        let members = try await get("/demo/members")
        let ids = members.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(ids.contains(alice.clientID))
        #expect(ids.contains { $0.hasPrefix("line-") })
        #expect(members.arrayValue?.count == 2)
        #expect(try await get("/demo/rooms") == ["observable-room", "other"])
        #expect(try await get("/demo/other/members") == [.string(alice.clientID)])
        let map = try await get("/demo/room-members")
        #expect(map["other"] == [.string(alice.clientID)])
        #expect(map["observable-room"]?.arrayValue?.count == 2)
        #expect(try await get("/empty/stats") == ["users_count": 0])
    }

    @Test func httpErrorsAreText() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let notFound = try await server.request("GET", "/nowhere/at/all/really")
        #expect(notFound.status == 404)
        #expect(notFound.body == "not found\n")
        let garbage = try await server.http()
        garbage.send("GARBAGE\r\n\r\n")
        let refused = try await garbage.readResponse()
        #expect(refused.status == 400)
        #expect(!refused.body.isEmpty)
        garbage.closeWrite()  // done, as a socket client would be: the server need not linger
        let wrongUpgrade = try await server.http()
        wrongUpgrade.send("GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        #expect(try await wrongUpgrade.readResponse().status == 404)
        wrongUpgrade.closeWrite()
    }

    @Test func keepAliveAndPipelining() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let peer = try await server.http()
        peer.send("GET /demo/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /demo/rooms HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let first = try await peer.readResponse()
        #expect(first.status == 200 && first.body == #"{"users_count":0}"#)
        let second = try await peer.readResponse()
        #expect(second.status == 200 && second.body == "[]")
        try await peer.waitForClose()
    }

    @Test func shutdownSendsGoingAway() async throws {
        let server = try InProcessServer()
        let client = try await server.native()
        server.stop()
        #expect(try await client.ws.closeCode() == 1001)
        #expect(client.ws.closeReason == "server shutting down")
    }
}
