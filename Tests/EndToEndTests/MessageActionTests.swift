import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// Message actions through the native door and REST, on a real server over SQLite
/// (docs/protocols.md, "Message actions").
@Suite(.serialized) struct MessageActionTests {
    /// A native client that keeps what it skipped while waiting for a reply: a receipt and
    /// the room's push of the same message may come in either order.
    final class Peer {
        let client: NativeClient
        var skipped: [JSONValue] = []
        var clientID: String { client.clientID }
        init(_ client: NativeClient) { self.client = client }

        static func connect(_ server: ParleyServer, name: String? = nil) async throws -> Peer {
            Peer(try await NativeClient.connect(server, clientData: name.map { ["name": .string($0)] }))
        }

        /// Sends `command` with the next callback and returns the reply to it.
        func call(_ command: JSONObject) async throws -> JSONValue {
            let callback = client.takeCallback()
            var command = command
            command["callback"] = .number(JSONNumber(callback))
            try client.send(.object(command))
            while true {
                let value = try await client.next()
                if value["callback"]?.intValue == callback { return value }
                skipped.append(value)
            }
        }

        func next() async throws -> JSONValue {
            if !skipped.isEmpty { return skipped.removeFirst() }
            return try await client.next()
        }

        func next(where predicate: (JSONValue) -> Bool) async throws -> JSONValue {
            while true {
                let value = try await next()
                if predicate(value) { return value }
            }
        }

        func publish(_ message: JSONValue, to room: String) throws { try client.publish(message, to: room) }
    }

    @Test func repliesEditsDeletesAndReactionsFanOutShowInHistoryAndReplayInOrder() async throws {
        let server = try startTestServer { $0.adminToken = adminToken }
        defer { server.shutdown() }
        let alice = try await Peer.connect(server, name: "alice")
        let bob = try await Peer.connect(server, name: "bob")
        _ = try await alice.call(["type": "subscribe", "room": "chat"])
        _ = try await bob.call(["type": "subscribe", "room": "chat"])

        let sent = try await alice.call(["type": "publish", "room": "chat", "message": "helo"])
        let first = try #require(sent["id"]?.stringValue)
        for client in [alice, bob] { _ = try await client.next(where: { $0["type"] == "publish" }) }

        // A reply is an ordinary publish, with `reply_to`.
        let replied = try await bob.call(["type": "reply", "room": "chat", "message": "hi alice", "reply_to": .string(first)])
        #expect(replied["offset"] == 2 && replied["error"] == nil)
        let reply = try #require(replied["id"]?.stringValue)
        for client in [alice, bob] {
            let pushed = try await client.next(where: { $0["type"] == "publish" })
            #expect(pushed["message"] == "hi alice" && pushed["reply_to"] == .string(first) && pushed["offset"] == 2)
        }

        // Bob may not edit alice's message: a refusal with its stable code, and nothing sent.
        let refused = try await bob.call(["type": "edit", "room": "chat", "target": .string(first), "message": "pwned"])
        #expect(refused["code"] == "not_author")
        #expect(refused["error"]?.stringValue?.contains("only the author") == true)
        let unknown = try await bob.call(["type": "react", "room": "chat", "target": "nope", "emoji": "👍"])
        #expect(unknown["code"] == "unknown_message")

        #expect(try await alice.call(["type": "edit", "room": "chat", "target": .string(first), "message": "hello"])["offset"] == 3)
        #expect(try await bob.call(["type": "react", "room": "chat", "target": .string(first), "emoji": "👍"])["offset"] == 4)
        #expect(try await bob.call(["type": "delete", "room": "chat", "target": .string(reply)])["offset"] == 5)
        for client in [alice, bob] {
            let edit = try await client.next(where: { $0["type"] != "publish" })
            #expect(edit["type"] == "edit" && edit["target"] == .string(first) && edit["message"] == "hello" && edit["offset"] == 3)
            #expect(edit["client_id"] == .string(alice.clientID))
            let react = try await client.next()
            #expect(react["type"] == "react" && react["emoji"] == "👍" && react["target"] == .string(first) && react["offset"] == 4)
            #expect(react["client_id"] == .string(bob.clientID))
            let delete = try await client.next()
            #expect(delete["type"] == "delete" && delete["target"] == .string(reply) && delete["offset"] == 5)
        }

        // History: each message in its current state, no action entries.
        let carol = try await Peer.connect(server)
        _ = try await carol.call(["type": "subscribe", "room": "chat", "history_count": 10])
        let h0 = try await carol.next(), h1 = try await carol.next()
        #expect(h0["type"] == "history_message" && h0["message"] == "hello" && h0["offset"] == 1)
        #expect(h0["edited"]?.intValue != nil)
        #expect(h0["reactions"] == [["emoji": "👍", "count": 1, "names": ["bob"]]])
        #expect(h1["type"] == "history_message" && h1["deleted"] == true && h1["message"] == .null && h1["offset"] == 2)
        #expect(h1["reply_to"] == .string(first))
        let page = try await carol.call(["type": "history", "room": "chat", "limit": 10])
        #expect(page["messages"]?.arrayValue?.map { $0["offset"] } == [1, 2])
        #expect(page["messages"]?.arrayValue?.first?["reactions"]?.arrayValue?.first?["count"] == 1)
        #expect(page["has_more"] == false)

        // The admin listing is a history page too.
        let listed = try await admin(server, "GET", "/channels/demo/rooms/chat/messages")
        #expect(listed["messages"]?.arrayValue?.map { $0["offset"] } == [1, 2])
        #expect(listed["messages"]?.arrayValue?.first?["reactions"] == [["emoji": "👍", "count": 1, "names": ["bob"]]])
        #expect(listed["messages"]?.arrayValue?.last?["reply_to"] == .string(first))

        // Resume from offset 1: the log after it, actions in order, no gap, no duplicate.
        let dave = try await Peer.connect(server)
        _ = try await dave.call(["type": "subscribe", "room": "chat", "since": 1])
        var replayed: [JSONValue] = []
        for _ in 0..<4 { replayed.append(try await dave.next()) }
        #expect(replayed.map { $0["offset"] } == [2, 3, 4, 5])
        #expect(replayed.map { $0["type"] } == ["publish", "edit", "react", "delete"])
        #expect(replayed[0]["deleted"] == true, "a deleted message replays as its tombstone")
        try alice.publish("marker", to: "chat")
        let next = try await dave.next()
        #expect(next["type"] == "publish" && next["message"] == "marker" && next["offset"] == 6, "\(next)")
    }

    /// Actions sent back to back are checked one after the other: each sees what the one
    /// before did (a react, its unreact, a react again; two edits counted against the limit).
    @Test func backToBackActionsAreCheckedInOrder() async throws {
        let server = try startTestServer { $0.maxEditsPerMessage = 1 }
        defer { server.shutdown() }
        let alice = try await Peer.connect(server, name: "alice")
        let sent = try await alice.call(["type": "publish", "room": "r", "message": "hi"])
        let id = JSONValue.string(try #require(sent["id"]?.stringValue))
        let commands: [JSONObject] = [
            ["type": "react", "room": "r", "target": id, "emoji": "👍", "callback": 101],
            ["type": "unreact", "room": "r", "target": id, "emoji": "👍", "callback": 102],
            ["type": "react", "room": "r", "target": id, "emoji": "👍", "callback": 103],
            ["type": "edit", "room": "r", "target": id, "message": "hi!", "callback": 104],
            ["type": "edit", "room": "r", "target": id, "message": "hi!!", "callback": 105],
        ]
        for command in commands { try alice.client.send(.object(command)) }
        var replies: [Int: JSONValue] = [:]
        while replies.count < commands.count {
            let reply = try await alice.next(where: { $0["callback"] != nil })
            replies[reply["callback"]!.intValue!] = reply
        }
        #expect((101...104).map { replies[$0]?["error"] } == [nil, nil, nil, nil], "\(replies)")
        #expect((101...104).compactMap { replies[$0]?["offset"]?.intValue } == [2, 3, 4, 5])
        #expect(replies[105]?["code"] == "too_many_edits")
    }

    /// Two nodes on one Redis (and on a Redis Cluster): actions made on one node reach the
    /// other's subscribers in order, history shows one state whichever node is asked, and a
    /// resume on the other node replays the actions.
    @Test(arguments: ClusterTests.RedisKind.allCases)
    func actionsCrossNodesAndEveryNodeShowsOneState(kind: ClusterTests.RedisKind) async throws {
        let (a, b) = try ClusterTests.twoNodes(on: kind)
        defer { a.shutdown(); b.shutdown() }
        let alice = try await Peer.connect(a, name: "alice")
        let bob = try await Peer.connect(b, name: "bob")
        _ = try await alice.call(["type": "subscribe", "room": "x"])
        _ = try await bob.call(["type": "subscribe", "room": "x"])
        let sent = try await alice.call(["type": "publish", "room": "x", "message": "helo"])
        let id = JSONValue.string(try #require(sent["id"]?.stringValue))
        _ = try await bob.next(where: { $0["type"] == "publish" })

        #expect(try await bob.call(["type": "react", "room": "x", "target": id, "emoji": "🚀"])["offset"] == 2)
        #expect(try await bob.call(["type": "edit", "room": "x", "target": id, "message": "no"])["code"] == "not_author")
        #expect(try await alice.call(["type": "edit", "room": "x", "target": id, "message": "hello"])["offset"] == 3)
        #expect(try await bob.call(["type": "reply", "room": "x", "message": "hi", "reply_to": id])["offset"] == 4)
        for peer in [alice, bob] {
            let react = try await peer.next(where: { $0["type"] != "publish" || $0["offset"] != 1 })
            #expect(react["type"] == "react" && react["client_id"] == .string(bob.clientID))
            let edit = try await peer.next()
            #expect(edit["type"] == "edit" && edit["message"] == "hello")
            let reply = try await peer.next()
            #expect(reply["type"] == "publish" && reply["reply_to"] == id)
        }

        for node in [a, b] {
            let carol = try await Peer.connect(node)
            let page = try await carol.call(["type": "history", "room": "x", "limit": 10])
            let messages = page["messages"]?.arrayValue ?? []
            #expect(messages.map { $0["offset"] } == [1, 4], "\(page)")
            #expect(messages.first?["message"] == "hello" && messages.first?["edited"]?.intValue != nil)
            #expect(messages.first?["reactions"] == [["emoji": "🚀", "count": 1, "names": ["bob"]]])
        }
        let dave = try await Peer.connect(b)
        _ = try await dave.call(["type": "subscribe", "room": "x", "since": 1])
        var replayed: [JSONValue] = []
        for _ in 0..<3 { replayed.append(try await dave.next()) }
        #expect(replayed.map { $0["type"] } == ["react", "edit", "publish"])
    }

    @Test func restActsAsTheServerAndModeratesOnlyWithTheSecret() async throws {
        let secret = String(repeating: "s", count: 32)
        let server = try startTestServer { $0.channels = [ChannelSettings(id: "demo", secret: secret)] }
        defer { server.shutdown() }
        let alice = try await Peer.connect(server, name: "alice")
        _ = try await alice.call(["type": "subscribe", "room": "r"])
        let sent = try await alice.call(["type": "publish", "room": "r", "message": "from alice"])
        let id = try #require(sent["id"]?.stringValue)
        _ = try await alice.next(where: { $0["type"] == "publish" })
        let port = server.httpPort

        let anonymous = try await httpRequest(port: port, "POST", "/demo/r/messages/\(id)/edit", json: #""changed""#)
        #expect(anonymous.status == 403 && anonymous.body.contains("[not_author]"), "\(anonymous.status) \(anonymous.body)")
        let missing = try await httpRequest(port: port, "POST", "/demo/r/messages/nope/react", json: #"{"emoji":"👍"}"#)
        #expect(missing.status == 404 && missing.body.contains("[unknown_message]"))
        let badEmoji = try await httpRequest(port: port, "POST", "/demo/r/messages/\(id)/react", json: #"{"emoji":"a b"}"#)
        #expect(badEmoji.status == 400)
        let reply = try await httpRequest(port: port, "POST", "/demo/r/messages/\(id)/reply", json: #""noted""#)
        #expect(reply.status == 200 && reply.body.contains("\"offset\":2"), "\(reply.body)")
        let react = try await httpRequest(port: port, "POST", "/demo/r/messages/\(id)/react", json: #"{"emoji":"✅"}"#)
        #expect(react.status == 200)
        let again = try await httpRequest(port: port, "POST", "/demo/r/messages/\(id)/react", json: #"{"emoji":"✅"}"#)
        #expect(again.status == 409 && again.body.contains("[already_reacted]"))

        let basic = [("Authorization", "Basic " + Data("demo:\(secret)".utf8).base64EncodedString())]
        let edit = try await httpRequest(port: port, "POST", "/demo/r/messages/\(id)/edit", json: #""edited by ops""#, headers: basic)
        #expect(edit.status == 200, "\(edit.body)")
        let delete = try await httpRequest(port: port, "POST", "/demo/r/messages/\(id)/delete", headers: basic)
        #expect(delete.status == 200, "\(delete.body)")
        let gone = try await httpRequest(port: port, "POST", "/demo/r/messages/\(id)/react", json: #"{"emoji":"👀"}"#)
        #expect(gone.status == 410 && gone.body.contains("[message_deleted]"))

        let reply2 = try await alice.next(where: { $0["type"] == "publish" })
        #expect(reply2["reply_to"] == .string(id) && reply2["client_id"] == nil)
        #expect(try await alice.next()["type"] == "react")
        #expect(try await alice.next()["message"] == "edited by ops")
        #expect(try await alice.next()["type"] == "delete")
    }
}
