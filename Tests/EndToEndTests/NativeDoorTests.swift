import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

@Suite(.serialized) struct NativeDoorTests {
    @Test func handshakeSubscribeAndObservableMembers() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice", "color": "#FF0000"])
        #expect(!alice.clientID.isEmpty)
        let reply = try await alice.subscribe("observable-room")
        #expect(reply.objectValue?.count == 1)
        let members = try await alice.next()
        #expect(members["type"] == "observable_members")
        #expect(members["room"] == "observable-room")
        #expect(members["data"] == .array([["id": .string(alice.clientID), "clientData": ["name": "alice", "color": "#FF0000"]]]))
    }

    @Test func fanOutReachesEverySubscriberIncludingSender() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice"])
        let bob = try await NativeClient.connect(server)
        try await alice.subscribe("chat")
        try await bob.subscribe("chat")
        try alice.publish(["text": "hi", "n": 1.5], to: "chat")
        for client in [alice, bob] {
            let message = try await client.next { $0["type"] == "publish" }
            #expect(message["room"] == "chat")
            #expect(message["message"] == ["text": "hi", "n": 1.5])
            #expect(message["id"]?.stringValue?.isEmpty == false)
            let timestamp = try #require(message["timestamp"]?.intValue)
            #expect(abs(timestamp - Int(Date().timeIntervalSince1970)) < 5)
            #expect(message["client_id"] == .string(alice.clientID))
            #expect(message["offset"] == 1)
            #expect(message["callback"] == nil)
        }
        // A publish with a callback gets a receipt; a room need not be subscribed to.
        try bob.send(["type": "publish", "room": "elsewhere", "message": "x", "callback": 7])
        let receipt = try await bob.next { $0["callback"] == 7 }
        #expect(receipt["offset"] == 1)
        #expect(receipt["id"]?.stringValue != nil)
        #expect(receipt["error"] == nil)
        // Typing is delivered without an offset.
        try alice.publish(["typing": true], to: "chat")
        let typing = try await bob.next { $0["type"] == "publish" }
        #expect(typing["message"] == ["typing": true])
        #expect(typing["offset"] == nil)
    }

    @Test func observableJoinAndLeaveIncludingAbruptDisconnect() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice", "color": "#00FF00"])
        try await alice.subscribe("observable-x")
        _ = try await alice.next()
        let bob = try await NativeClient.connect(server, clientData: ["name": "bob", "extra": [1, 2, ["k": nil]]])
        try await bob.subscribe("observable-x")
        let members = try await bob.next()
        #expect(members["data"]?.arrayValue?.map { $0["id"] } == [.string(alice.clientID), .string(bob.clientID)])
        let join = try await alice.next()
        #expect(join == ["type": "observable_member_join", "room": "observable-x",
                         "data": ["id": .string(bob.clientID), "clientData": ["name": "bob", "extra": [1, 2, ["k": nil]]]]])
        bob.ws.abort()
        let leave = try await alice.next()
        #expect(leave["type"] == "observable_member_leave")
        #expect(leave["data"]?["clientData"] == ["name": "bob", "extra": [1, 2, ["k": nil]]])
        // Unsubscribe also announces the leave; a plain room announces nothing.
        let carol = try await NativeClient.connect(server)
        try await carol.subscribe("observable-x")
        _ = try await alice.next { $0["type"] == "observable_member_join" }
        try carol.send(["type": "unsubscribe", "room": "observable-x", "callback": 9])
        #expect(try await carol.next { $0["callback"] != nil } == ["callback": 9])
        let left = try await alice.next()
        #expect(left == ["type": "observable_member_leave", "room": "observable-x", "data": ["id": .string(carol.clientID)]])
        try await alice.subscribe("plain")
        let dave = try await NativeClient.connect(server)
        try await dave.subscribe("plain")
        // No join for dave: his first message is the next thing alice gets.
        try dave.publish("marker", to: "plain")
        let next = try await alice.next()
        #expect(next["type"] == "publish" && next["message"] == "marker", "\(next)")
    }

    @Test func historyAfterReconnect() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let first = try await NativeClient.connect(server)
        for text in ["one", "two", "three"] { try first.publish(.string(text), to: "observable-h") }
        try await first.subscribe("observable-h")
        first.ws.abort()
        let again = try await NativeClient.connect(server)
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
        try again.publish("marker", to: "observable-h")
        let next = try await again.next()
        #expect(next["type"] == "publish" && next["message"] == "marker" && next["offset"] == 4, "\(next)")
    }

    @Test func binaryFrameHandshake() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let client = try NativeClient(port: server.httpPort)
        try client.ws.sendBinary(Array(#"{"type":"handshake","channel":"demo","callback":1}"#.utf8))
        let reply = try await client.next()
        #expect(reply["callback"] == 1)
        #expect(reply["client_id"]?.stringValue != nil)
        try client.ws.sendBinary(Array(#"{"type":"subscribe","room":"r","callback":2,"history_count":0,"history":0}"#.utf8))
        #expect(try await client.next() == ["callback": 2])
    }

    @Test func badInputGetsErrorRepliesAndTheConnectionLives() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let client = try NativeClient(port: server.httpPort)
        try client.ws.sendText(#"{"type":"subscribe","room":"r","callback":0}"#)
        let early = try await client.next()
        #expect(early["callback"] == 0)
        #expect(early["error"]?.stringValue != nil)
        try client.ws.sendText("{nope")
        let invalid = try await client.next()
        #expect(invalid["error"]?.stringValue != nil)
        #expect(invalid["callback"] == nil)
        try client.ws.sendText("[1,2]")
        #expect(try await client.next()["error"]?.stringValue != nil)
        try client.ws.sendText(#"{"type":"handshake","channel":"demo","callback":1}"#)
        let handshake = try await client.next()
        let id = try #require(handshake["client_id"]?.stringValue)
        try client.ws.sendText(#"{"type":"handshake","channel":"demo","callback":2}"#)
        let twice = try await client.next()
        #expect(twice["callback"] == 2)
        #expect(twice["client_id"] == .string(id))
        #expect(twice["error"]?.stringValue != nil)
        try client.ws.sendText(#"{"type":"dance","callback":3}"#)
        let unknown = try await client.next()
        #expect(unknown["callback"] == 3)
        #expect(unknown["error"]?.stringValue?.contains("dance") == true)
        try client.ws.sendText(#"{"type":"subscribe","callback":4}"#)
        #expect(try await client.next() == ["callback": 4, "error": "missing room"])
        try client.ws.sendText(#"{"type":"subscribe","room":5,"callback":5}"#)
        #expect(try await client.next()["error"] == "room must be a string")
        try client.ws.sendText(#"{"type":"handshake","channel":7,"callback":6}"#)
        let badHandshake = try await client.next()
        #expect(badHandshake["client_id"]?.stringValue != nil)
        #expect(badHandshake["error"] != nil)
        // Still works.
        try client.ws.sendText(#"{"type":"subscribe","room":"r","callback":8}"#)
        #expect(try await client.next() == ["callback": 8])
    }

    @Test func oversizeMessageClosesWith1009() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let client = try await NativeClient.connect(server)
        let big = "\"" + String(repeating: "a", count: (1 << 20) + 10) + "\""
        try? client.ws.sendText(#"{"type":"publish","room":"r","message":"# + big + "}")
        #expect(try await client.ws.closeCode() == 1009)
    }

    @Test func lineAndNativeUsersChatInTheLobby() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice", "color": "#123456"])
        try await alice.subscribe("observable-room")
        _ = try await alice.next()
        let carol = try TestSocket(port: server.linePort)
        try carol.send("iam:carol\n")
        #expect(try await carol.nextLine() == "carol has joined")
        let join = try await alice.next()
        #expect(join["type"] == "observable_member_join")
        #expect(join["data"]?["clientData"]?["name"] == "carol")
        try carol.send("msg:hi\n")
        let fromLine = try await alice.next { $0["type"] == "publish" }
        #expect(fromLine["message"] == "hi")
        #expect(fromLine["client_id"] == join["data"]?["id"])
        #expect(try await carol.nextLine() == "carol:hi")
        try alice.publish("hello carol", to: "observable-room")
        #expect(try await carol.nextLine() == "alice:hello carol")
        // Typing reaches native subscribers only.
        try alice.publish(["typing": true], to: "observable-room")
        try alice.publish("done", to: "observable-room")
        #expect(try await carol.nextLine() == "alice:done")
        carol.abort()
        let leave = try await alice.next { $0["type"] == "observable_member_leave" }
        #expect(leave["data"]?["clientData"]?["name"] == "carol")
    }

    @Test func restPublishReachesNativeAndLineUsers() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice"])
        try await alice.subscribe("observable-room")
        try await alice.subscribe("other")
        let carol = try TestSocket(port: server.linePort)
        try carol.send("iam:carol\n")
        _ = try await carol.nextLine()
        let published = try await httpRequest(port: server.httpPort, "POST", "/demo/observable-room/publish", json: #""from rest""#)
        #expect(published.status == 200)
        let receipt = try json(published.body)
        #expect(receipt["id"]?.stringValue != nil)
        #expect(receipt["offset"] == 1)
        let message = try await alice.next { $0["type"] == "publish" }
        #expect(message["message"] == "from rest")
        #expect(message["client_id"] == nil)
        #expect(try await carol.nextLine() == "parley:from rest")

        // Body × rooms is bounded: each room stores the body once.
        let big = "\"" + String(repeating: "x", count: 600_000) + "\""
        let amplified = try await httpRequest(port: server.httpPort, "POST", "/demo/publish/rooms?" + (1...8).map { "r=a\($0)" }.joined(separator: "&"), json: big)
        #expect(amplified.status == 413 && amplified.body.contains("--max-multi-publish-bytes"), "\(amplified.body)")
        let many = try await httpRequest(port: server.httpPort, "POST", "/demo/publish/rooms?r=other&r=observable-room", json: #"{"a":1}"#)
        #expect(many.status == 200)
        let firstRoom = try await alice.next { $0["type"] == "publish" }["room"]?.stringValue
        let secondRoom = try await alice.next { $0["type"] == "publish" }["room"]?.stringValue
        let rooms = Set([firstRoom, secondRoom].compactMap { $0 })
        #expect(rooms == ["other", "observable-room"])

        let bad = try await httpRequest(port: server.httpPort, "POST", "/demo/r/publish", json: "{oops")
        #expect(bad.status == 400)
        #expect(!bad.body.isEmpty)

        #expect(try await json(httpRequest(port: server.httpPort, "GET", "/demo/stats").body) == ["users_count": 2])
        let members = try await json(httpRequest(port: server.httpPort, "GET", "/demo/members").body)
        let ids = members.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(ids.contains(alice.clientID))
        #expect(ids.contains { $0.hasPrefix("line-") })
        #expect(members.arrayValue?.count == 2)
        #expect(try await json(httpRequest(port: server.httpPort, "GET", "/demo/rooms").body) == ["observable-room", "other"])
        #expect(try await json(httpRequest(port: server.httpPort, "GET", "/demo/other/members").body) == [.string(alice.clientID)])
        let map = try await json(httpRequest(port: server.httpPort, "GET", "/demo/room-members").body)
        #expect(map["other"] == [.string(alice.clientID)])
        #expect(map["observable-room"]?.arrayValue?.count == 2)
        #expect(try await json(httpRequest(port: server.httpPort, "GET", "/empty/stats").body) == ["users_count": 0])
    }

    @Test func httpErrorsAreText() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let notFound = try await httpRequest(port: server.httpPort, "GET", "/nowhere/at/all/really")
        #expect(notFound.status == 404)
        #expect(notFound.body == "not found\n")
        let garbage = try await httpRequest(port: server.httpPort, "", "", raw: "GARBAGE\r\n\r\n")
        #expect(garbage.status == 400)
        #expect(!garbage.body.isEmpty)
        let wrongUpgrade = try await httpRequest(port: server.httpPort, "", "", raw:
            "GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        #expect(wrongUpgrade.status == 404)
    }

    @Test func keepAliveAndPipelining() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let socket = try TestSocket(port: server.httpPort)
        try socket.send("GET /demo/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /demo/rooms HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        #expect(await socket.closed(within: 5))
        let text = String(decoding: socket.buffered, as: UTF8.self)
        #expect(text.components(separatedBy: "HTTP/1.1 200").count == 3)
        #expect(text.contains(#"{"users_count":0}"#))
        #expect(text.hasSuffix("[]"))
    }

    @Test func shutdownSendsGoingAway() async throws {
        let server = try startTestServer()
        let client = try await NativeClient.connect(server)
        server.shutdown()
        #expect(try await client.ws.closeCode() == 1001)
        #expect(client.ws.closeReason == "server shutting down")
    }
}
