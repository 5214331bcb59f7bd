import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// Users through the native door on a real server over SQLite (docs/protocols.md, "Users"):
/// read marks, receipts and unread counts across devices, direct rooms only their users can
/// use, and the inbox, live.
@Suite(.serialized) struct UsersTests {
    typealias Peer = MessageActionTests.Peer

    /// A device of `user` (a handshake `user_id`, which in an open channel proves nothing).
    static func device(_ server: ParleyServer, user: String?, name: String, shares: Bool = true) async throws -> Peer {
        let client = try NativeClient(port: server.httpPort)
        var handshake: JSONObject = ["type": "handshake", "channel": "demo", "callback": 0, "client_data": ["name": .string(name)]]
        if let user { handshake["user_id"] = .string(user) }
        if !shares { handshake["share_receipts"] = false }
        try client.send(.object(handshake))
        let reply = try await client.next()
        try client.accept(handshakeReply: reply)
        if let user { #expect(reply["user_id"]?.stringValue == user, "the handshake reply names the user") }
        return Peer(client)
    }

    static func subscribe(_ peer: Peer, _ room: String, receipts: Bool = true, unread: Bool = true) async throws -> JSONValue {
        try await peer.call(["type": "subscribe", "room": .string(room), "receipts": .bool(receipts), "unread": .bool(unread)])
    }

    static func publish(_ peer: Peer, _ text: String, to room: String) async throws -> Int {
        let reply = try await peer.call(["type": "publish", "room": .string(room), "message": .string(text)])
        guard let offset = reply["offset"]?.intValue else { throw TestSocket.Failure("publish refused: \(reply)") }
        return offset
    }

    static func isUnread(_ room: String) -> (JSONValue) -> Bool {
        { $0["type"]?.stringValue == "unread" && $0["room"]?.stringValue == room }
    }

    /// The frames of `peer` that match `predicate`, in order, up to the first one that is
    /// `last` (each wait bounded by the peer's timeout).
    static func frames(of peer: Peer, where predicate: (JSONValue) -> Bool,
                       through last: (JSONValue) -> Bool) async throws -> [JSONValue] {
        var frames: [JSONValue] = []
        repeat { frames.append(try await peer.next(where: predicate)) } while !last(frames[frames.count - 1])
        return frames
    }

    /// An operator's delete takes a message out of the unread count (and its mention) at once.
    @Test func anOperatorsDeleteTakesAMessageOutOfTheCount() async throws {
        let server = try startTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = try await Self.device(server, user: "alice", name: "Alice")
        let bob = try await Self.device(server, user: "bob", name: "Bob")
        for peer in [alice, bob] {
            _ = try await Self.subscribe(peer, "desk", receipts: false)
            _ = try await peer.next(where: Self.isUnread("desk"))
        }
        let mention = try await Self.publish(bob, "@alice look", to: "desk")
        _ = try await Self.publish(bob, "plain", to: "desk")
        let two = try await alice.next(where: { Self.isUnread("desk")($0) && $0["unread"]?.intValue == 2 })
        #expect(two["mentions"]?.intValue == 1)
        #expect(try await server.hub.deleteMessage(at: Int64(mention), in: RoomKey(channel: "demo", room: "desk")))
        let afterDelete = try await alice.next(where: { Self.isUnread("desk")($0) && $0["unread"]?.intValue == 1 })
        #expect(afterDelete["mentions"]?.intValue == 0, "\(afterDelete)")
    }

    @Test func readMarksDriveUnreadCountsOnEveryDeviceAndReceiptsForTheRoom() async throws {
        let server = try startTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let phone = try await Self.device(server, user: "alice", name: "Alice")
        let laptop = try await Self.device(server, user: "alice", name: "Alice")
        let bob = try await Self.device(server, user: "bob", name: "Bob")
        for peer in [phone, laptop, bob] {
            let reply = try await Self.subscribe(peer, "general")
            #expect(reply["error"] == nil)
            let unread = try await peer.next(where: Self.isUnread("general"))
            #expect(unread["unread"]?.intValue == 0 && unread["read_offset"]?.intValue == 0)
        }
        _ = try await Self.publish(bob, "hello", to: "general")
        let second = try await Self.publish(bob, "@alice are you there?", to: "general")
        _ = try await Self.publish(bob, "anyone?", to: "general")
        // Each of Alice's devices counts live: 1, 2 (a mention), 3.
        for device in [phone, laptop] {
            var last = JSONValue.null
            for _ in 0..<3 { last = try await device.next(where: Self.isUnread("general")) }
            #expect(last["unread"]?.intValue == 3 && last["mentions"]?.intValue == 1, "\(last)")
        }
        // Bob's own messages are not unread for him.
        #expect(bob.skipped.filter(Self.isUnread("general")).allSatisfy { $0["unread"]?.intValue == 0 })

        // The phone reads up to the mention; the laptop's count follows, Bob sees the receipt.
        let read = try await phone.call(["type": "read", "room": "general", "offset": .number(JSONNumber(second))])
        #expect(read["offset"]?.intValue == second && read["error"] == nil)
        let laptopCount = try await laptop.next(where: { Self.isUnread("general")($0) && $0["read_offset"]?.intValue == second })
        #expect(laptopCount["unread"]?.intValue == 1 && laptopCount["mentions"]?.intValue == 0)
        let receipt = try await bob.next(where: { $0["type"]?.stringValue == "read" })
        #expect(receipt["user"]?.stringValue == "alice" && receipt["name"]?.stringValue == "Alice"
                && receipt["offset"]?.intValue == second && receipt["room"]?.stringValue == "general")
        // A mark never moves back, and never past the room's newest message.
        let back = try await phone.call(["type": "read", "room": "general", "offset": 1])
        #expect(back["offset"]?.intValue == second)
        let ahead = try await phone.call(["type": "read", "room": "general", "offset": 1_000_000])
        #expect(ahead["offset"]?.intValue == second + 1, "capped at the newest offset")

        // A device that comes back later gets the count and the receipts on subscribe.
        let tablet = try await Self.device(server, user: "alice", name: "Alice")
        _ = try await Self.subscribe(tablet, "general")
        let receipts = try await tablet.next(where: { $0["type"]?.stringValue == "receipts" })
        #expect(receipts["readers"]?.arrayValue?.first?["user"]?.stringValue == "alice")
        #expect(receipts["readers"]?.arrayValue?.first?["offset"]?.intValue == second + 1)
        let fresh = try await tablet.next(where: Self.isUnread("general"))
        #expect(fresh["unread"]?.intValue == 0 && fresh["read_offset"]?.intValue == second + 1)
        // Messages carry their sender's user.
        let pushed = try await tablet.call(["type": "history", "room": "general"])
        #expect(pushed["messages"]?.arrayValue?.first?["user"]?.stringValue == "bob")
    }

    /// Each own receipt makes a user's other devices read their unread count again: a flood
    /// of them (a device marking message after message) is read at most once per 250 ms per
    /// device and room, and the last count follows the last mark.
    @Test func aFloodOfOwnReceiptsRecountsAtAPace() async throws {
        let server = try startTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let phone = try await Self.device(server, user: "alice", name: "Alice")
        let laptop = try await Self.device(server, user: "alice", name: "Alice")
        let bob = try await Self.device(server, user: "bob", name: "Bob")
        for peer in [phone, laptop] {
            _ = try await Self.subscribe(peer, "flood")
            _ = try await peer.next(where: Self.isUnread("flood"))
        }
        var last = 0
        for n in 1...30 { last = try await Self.publish(bob, "m\(n)", to: "flood") }
        _ = try await laptop.next(where: { Self.isUnread("flood")($0) && $0["unread"]?.intValue == 30 })
        for offset in 1...last {
            let read = try await phone.call(["type": "read", "room": "flood", "offset": .number(JSONNumber(offset))])
            #expect(read["offset"]?.intValue == offset)
        }
        let counts = try await Self.frames(of: laptop, where: Self.isUnread("flood"), through: { $0["read_offset"]?.intValue == last })
        #expect(counts.last?["unread"]?.intValue == 0)
        #expect(counts.count <= 6, "\(counts.count) counts read for \(last) receipts")
    }

    /// Each action on a conversation's newest message makes a live inbox read the
    /// conversation again: a flood of reactions on it is read at most once per 250 ms per
    /// inbox and room, and the last update shows the last state.
    @Test func aFloodOfReactionsOnTheNewestMessageUpdatesALiveInboxAtAPace() async throws {
        let server = try startTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = try await Self.device(server, user: "alice", name: "Alice")
        let bob = try await Self.device(server, user: "bob", name: "Bob")
        _ = try await Self.subscribe(alice, "rx")
        _ = try await Self.subscribe(bob, "rx")
        let hello = try await bob.call(["type": "publish", "room": "rx", "message": "hello"])
        let id = try #require(hello["id"]?.stringValue)
        let page = try await alice.call(["type": "inbox", "watch": true])
        #expect(page["conversations"]?.arrayValue?.first?["last"]?["message"]?.stringValue == "hello")
        for n in 0..<20 {
            let reply = try await bob.call(["type": n % 2 == 0 ? "react" : "unreact", "room": "rx", "target": .string(id), "emoji": "👍"])
            #expect(reply["error"] == nil, "\(reply)")
        }
        _ = try await bob.call(["type": "react", "room": "rx", "target": .string(id), "emoji": "🎉"])
        func emoji(_ update: JSONValue?) -> [String] {
            update?["conversation"]?["last"]?["reactions"]?.arrayValue?.compactMap { $0["emoji"]?.stringValue } ?? []
        }
        let updates = try await Self.frames(of: alice, where: { $0["type"]?.stringValue == "conversation" },
                                            through: { emoji($0).contains("🎉") })
        #expect(emoji(updates.last) == ["🎉"], "\(updates.last ?? .null)")
        #expect(updates.count <= 6, "\(updates.count) updates for 21 reactions")
    }

    @Test func aRoomsUserViewFoldsDevicesIntoUsers() async throws {
        let server = try startTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let phone = try await Self.device(server, user: "alice", name: "Alice")
        let laptop = try await Self.device(server, user: "alice", name: "Alice")
        let bob = try await Self.device(server, user: "bob", name: "Bob")
        let guest = try await Self.device(server, user: nil, name: "Guest")
        for peer in [phone, laptop, bob, guest] { _ = try await Self.subscribe(peer, "lounge", receipts: false, unread: false) }
        let reply = try await bob.call(["type": "room_users", "room": "lounge"])
        let users = reply["users"]?.arrayValue ?? []
        #expect(users.map { $0["user"]?.stringValue } == ["alice", "bob", guest.clientID], "\(reply)")
        #expect(users.map { $0["devices"]?.intValue } == [2, 1, 1] && reply["count"]?.intValue == 4)
        let rest = try await httpRequest(port: server.httpPort, "GET", "/demo/lounge/users")
        #expect(rest.status == 200)
        let listed = try JSONParser.parse(rest.body)
        #expect(listed["users"]?.arrayValue?.first?["devices"]?.intValue == 2 && listed["members"]?.intValue == 4, "\(rest.body)")
        // A direct room's users view is its users' alone, like the room.
        let mallory = try await Self.device(server, user: "mallory", name: "Mallory")
        #expect(try await mallory.call(["type": "room_users", "room": "dm+alice+bob"])["error"] != nil)
    }

    /// REST's users view looks at no more members than the native `room_users`
    /// (`--max-members-listed`): users carry names, and the answer's size is not the room's to set.
    @Test func restsUserViewIsBoundedLikeTheDoors() async throws {
        let server = try startTestServer { $0.maxMembersListed = 2 }
        defer { server.shutdown(timeout: .seconds(1)) }
        var peers: [Peer] = []
        for user in ["ann", "ben", "cid", "dee"] {
            let peer = try await Self.device(server, user: user, name: user.capitalized)
            _ = try await Self.subscribe(peer, "hall", receipts: false, unread: false)
            peers.append(peer)
        }
        let native = try await peers[0].call(["type": "room_users", "room": "hall"])
        let rest = try JSONParser.parse(try await httpRequest(port: server.httpPort, "GET", "/demo/hall/users").body)
        #expect(rest["users"]?.arrayValue?.count == 2, "\(rest)")
        #expect(rest["users"] == native["users"], "\(rest) against \(native)")
    }

    @Test func aPrivateUsersMarksCountForThemButReachNobodyElse() async throws {
        let server = try startTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let carol = try await Self.device(server, user: "carol", name: "Carol", shares: false)
        let bob = try await Self.device(server, user: "bob", name: "Bob")
        _ = try await Self.subscribe(carol, "quiet")
        _ = try await Self.subscribe(bob, "quiet")
        let offset = try await Self.publish(bob, "psst", to: "quiet")
        _ = try await carol.call(["type": "read", "room": "quiet", "offset": .number(JSONNumber(offset))])
        let own = try await carol.next(where: { Self.isUnread("quiet")($0) && $0["read_offset"]?.intValue == offset })
        #expect(own["unread"]?.intValue == 0)
        // Bob publishes again: had Carol's receipt reached him, it would have come first.
        _ = try await Self.publish(bob, "again", to: "quiet")
        #expect(!bob.skipped.contains { $0["type"]?.stringValue == "read" })
        let late = try await Self.device(server, user: "bob", name: "Bob")
        _ = try await Self.subscribe(late, "quiet")
        let receipts = try await late.next(where: { $0["type"]?.stringValue == "receipts" })
        #expect(receipts["readers"]?.arrayValue?.isEmpty == true)
    }

    @Test func aDirectRoomIsOnlyItsUsersAndJoinsBothInboxesLive() async throws {
        let server = try startTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = try await Self.device(server, user: "alice", name: "Alice")
        let bob = try await Self.device(server, user: "bob", name: "Bob")
        let mallory = try await Self.device(server, user: "mallory", name: "Mallory")
        // Bob watches his inbox before anything exists.
        let empty = try await bob.call(["type": "inbox", "watch": true])
        #expect(empty["conversations"]?.arrayValue?.isEmpty == true && empty["has_more"]?.boolValue == false)

        let opened = try await alice.call(["type": "dm", "users": ["bob"]])
        #expect(opened["room"]?.stringValue == "dm+alice+bob", "\(opened)")
        let room = "dm+alice+bob"
        // Bob's live inbox hears of it at once.
        let added = try await bob.next(where: { $0["type"]?.stringValue == "conversation" })
        #expect(added["conversation"]?["room"]?.stringValue == room)
        #expect(added["conversation"]?["users"]?.arrayValue?.compactMap(\.stringValue) == ["alice", "bob"])

        // Mallory can neither read nor write it, by any command.
        for command: JSONObject in [["type": "subscribe", "room": .string(room)], ["type": "history", "room": .string(room)],
                                     ["type": "publish", "room": .string(room), "message": "hi"],
                                     ["type": "read", "room": .string(room), "offset": 1]] {
            let refused = try await mallory.call(command)
            #expect(refused["error"]?.stringValue?.contains("direct room") == true, "\(command): \(refused)")
        }
        #expect(try await mallory.call(["type": "subscribe", "room": "dm+bob+alice"])["error"] != nil, "only one spelling")
        #expect(try await mallory.call(["type": "subscribe", "room": "~inbox+bob"])["error"] != nil, "notice rooms are the server's")
        #expect(try await mallory.call(["type": "dm", "users": ["mallory"]])["code"]?.stringValue == "bad_direct_room")

        _ = try await Self.subscribe(alice, room)
        _ = try await Self.publish(alice, "hi Bob, @bob", to: room)
        let update = try await bob.next(where: { $0["type"]?.stringValue == "conversation" && $0["conversation"]?["last"] != .null })
        #expect(update["conversation"]?["unread"]?.intValue == 1 && update["conversation"]?["mentions"]?.intValue == 1)
        #expect(update["conversation"]?["last"]?["message"]?.stringValue == "hi Bob, @bob")
        #expect(update["conversation"]?["last"]?["name"]?.stringValue == "Alice")

        // A general room Bob joins later comes first in his inbox once it is the newest.
        _ = try await Self.subscribe(bob, "general")
        _ = try await Self.publish(bob, "morning", to: "general")
        let inbox = try await bob.call(["type": "inbox"])
        let rooms = inbox["conversations"]?.arrayValue?.compactMap { $0["room"]?.stringValue }
        #expect(rooms == ["general", room], "\(inbox)")
        #expect(inbox["conversations"]?.arrayValue?.last?["unread"]?.intValue == 1)
        // Bob reads the direct room: his inbox says so.
        _ = try await bob.call(["type": "read", "room": .string(room), "offset": 1])
        let read = try await bob.next(where: {
            $0["type"]?.stringValue == "conversation" && $0["conversation"]?["room"]?.stringValue == room
                && $0["conversation"]?["unread"]?.intValue == 0
        })
        #expect(read["conversation"]?["read_offset"]?.intValue == 1)
    }
}

/// Users where a token decides, users of the classic doors, and REST.
@Suite(.serialized) struct UsersAuthAndRESTTests {
    static func payload(client: String, user: String?) -> JSONValue {
        guard case .object(var object) = AuthFixtures.payload(client: client) else { return .null }
        if let user { object["user"] = .string(user) }
        return .object(object)
    }

    @Test func aTokensUserClaimIsTheUserAndAHandshakeIDCountsForNothingWhereAuthIsRequired() async throws {
        let server = try startAuthServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        // A claimed id without a token's claim: the connection is its own user.
        let client = try NativeClient(port: server.httpPort)
        try client.send(["type": "handshake", "channel": "acme", "callback": 0, "user_id": "bob"])
        let reply = try await client.next()
        client.clientID = reply["client_id"]?.stringValue ?? ""
        #expect(reply["user_id"] == nil, "nobody is bob on a channel that needs a token")
        _ = try await client.authenticate(AuthFixtures.jwt(Self.payload(client: client.clientID, user: "alice")))
        let peer = MessageActionTests.Peer(client)
        // The token made it alice: her direct room with bob is hers; carol's is not.
        #expect(try await peer.call(["type": "dm", "users": ["bob"]])["room"]?.stringValue == "dm+alice+bob")
        #expect(try await peer.call(["type": "subscribe", "room": "dm+bob+carol"])["error"] != nil)
        #expect(try await peer.call(["type": "subscribe", "room": "dm+alice+bob"])["error"] == nil)
        // A bad claim is a bad token.
        let other = try NativeClient(port: server.httpPort)
        try other.send(["type": "handshake", "channel": "acme", "callback": 0])
        other.clientID = try await other.next()["client_id"]?.stringValue ?? ""
        let refused = try await other.authenticate(AuthFixtures.jwt(Self.payload(client: other.clientID, user: "a b")))
        #expect(refused["error"]?.stringValue?.contains("user") == true)
    }

    @Test func restReadsAUsersInboxAndMarksForThemWithTheRightCredentials() async throws {
        let server = try startAuthServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let client = try NativeClient(port: server.httpPort)
        try client.send(["type": "handshake", "channel": "acme", "callback": 0])
        client.clientID = try await client.next()["client_id"]?.stringValue ?? ""
        _ = try await client.authenticate(AuthFixtures.jwt(Self.payload(client: client.clientID, user: "alice")))
        let alice = MessageActionTests.Peer(client)
        _ = try await alice.call(["type": "subscribe", "room": "news"])
        let basic = "Basic " + Data("acme:\(AuthFixtures.secret)".utf8).base64EncodedString()
        for text in ["a", "b", "c"] {
            let published = try await httpRequest(port: server.httpPort, "POST", "/acme/news/publish", json: "\"\(text)\"",
                                            headers: [("Authorization", basic)])
            #expect(published.status == 200)
        }
        let bearer = { (user: String) in "Bearer " + AuthFixtures.jwt(Self.payload(client: "*", user: user)) }
        let inbox = try await httpRequest(port: server.httpPort, "GET", "/acme/users/alice/inbox", headers: [("Authorization", bearer("alice"))])
        #expect(inbox.status == 200, "\(inbox.body)")
        let conversations = try JSONParser.parse(inbox.body)["conversations"]?.arrayValue ?? []
        #expect(conversations.first?["room"]?.stringValue == "news" && conversations.first?["unread"]?.intValue == 3)
        #expect(try await httpRequest(port: server.httpPort, "GET", "/acme/users/alice/inbox", headers: [("Authorization", bearer("bob"))]).status == 403,
                "another user's token")
        #expect(try await httpRequest(port: server.httpPort, "GET", "/acme/users/alice/inbox").status == 401, "no credentials")
        #expect(try await httpRequest(port: server.httpPort, "GET", "/acme/users/a%20b/inbox", headers: [("Authorization", basic)]).status == 400)
        // The server (Basic) marks for her: her connection hears its own receipt.
        let marked = try await httpRequest(port: server.httpPort, "POST", "/acme/users/alice/read", json: #"{"room":"news","offset":2}"#,
                                     headers: [("Authorization", basic)])
        #expect(marked.status == 200 && (try! JSONParser.parse(marked.body))["offset"]?.intValue == 2, "\(marked.body)")
        let after = try await httpRequest(port: server.httpPort, "GET", "/acme/users/alice/inbox?limit=5", headers: [("Authorization", basic)])
        #expect((try! JSONParser.parse(after.body))["conversations"]?.arrayValue?.first?["unread"]?.intValue == 1)
        #expect(try await httpRequest(port: server.httpPort, "POST", "/acme/users/alice/read", json: #"{"room":"dm+bob+carol","offset":1}"#,
                                headers: [("Authorization", basic)]).status == 403, "not one of hers")
        #expect(try await httpRequest(port: server.httpPort, "POST", "/acme/users/alice/read", json: #"{"room":"news"}"#,
                                headers: [("Authorization", basic)]).status == 400)
    }

    /// REST keeps the rooms rules of every door: a token marks read only where it may
    /// subscribe (a mark would put the room, its newest message and its pushes in the user's
    /// inbox), a direct room is its users' alone whatever the token's patterns allow, and the
    /// server's own rooms (`~`) are nobody's, not even with the channel's secret.
    @Test func restKeepsTheRoomRulesOfEveryDoor() async throws {
        let server = try startAuthServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let basic = "Basic " + Data("acme:\(AuthFixtures.secret)".utf8).base64EncodedString()
        let publicOnly: JSONValue = ["^public$": ["publish": true, "subscribe": true, "history": 10],
                                     "^dm\\+.*": ["publish": true, "subscribe": true, "history": 10]]
        func bearer(_ user: String, _ permissions: JSONValue? = nil) -> (String, String) {
            var payload = Self.payload(client: "*", user: user)
            if let permissions, case .object(var object) = payload {
                object["permissions"] = permissions
                payload = .object(object)
            }
            return ("Authorization", "Bearer " + AuthFixtures.jwt(payload))
        }
        for room in ["secret", "dm+alice+bob"] {
            #expect(try await httpRequest(port: server.httpPort, "POST", "/acme/\(room)/publish", json: #""hi""#,
                                          headers: [("Authorization", basic)]).status == 200)
        }
        // Mark-read needs subscribe in the room, as a connection's `read`.
        let refusedMark = try await httpRequest(port: server.httpPort, "POST", "/acme/users/mallory/read",
                                                json: #"{"room":"secret","offset":0}"#, headers: [bearer("mallory", publicOnly)])
        #expect(refusedMark.status == 403 && refusedMark.body.contains("subscrib"), "\(refusedMark.status) \(refusedMark.body)")
        let inbox = try await httpRequest(port: server.httpPort, "GET", "/acme/users/mallory/inbox", headers: [bearer("mallory", publicOnly)])
        #expect(inbox.status == 200 && !inbox.body.contains("secret"), "\(inbox.body)")
        #expect(try await httpRequest(port: server.httpPort, "POST", "/acme/users/mallory/read", json: #"{"room":"public","offset":0}"#,
                                      headers: [bearer("mallory", publicOnly)]).status == 200)
        // A direct room of others: no publish, action, multi-room publish or query for her.
        let dmRequests: [(String, String, String?)] = [
            ("POST", "/acme/dm+alice+bob/publish", #""spam""#),
            ("POST", "/acme/publish/rooms?r=public&r=dm%2Balice%2Bbob", #""spam""#),
            ("POST", "/acme/dm+alice+bob/messages/x/react", #"{"emoji":"👍"}"#),
            ("GET", "/acme/dm+alice+bob/users", nil),
            ("GET", "/acme/dm+alice+bob/members", nil),
        ]
        for (method, path, json) in dmRequests {
            let answer = try await httpRequest(port: server.httpPort, method, path, json: json, headers: [bearer("mallory", publicOnly)])
            #expect(answer.status == 403 && answer.body.contains("direct room"), "\(method) \(path): \(answer.status) \(answer.body)")
        }
        let history = try await httpRequest(port: server.httpPort, "GET", "/acme/users/alice/inbox", headers: [("Authorization", basic)])
        #expect(!history.body.contains("spam"))
        // Its users may; the server may.
        let own = try await httpRequest(port: server.httpPort, "POST", "/acme/dm+alice+bob/publish", json: #""from alice""#,
                                        headers: [bearer("alice", publicOnly)])
        #expect(own.status == 200, "\(own.status) \(own.body)")
        #expect(try await httpRequest(port: server.httpPort, "GET", "/acme/dm+alice+bob/users", headers: [bearer("bob")]).status == 200)
        // The server's own rooms: nobody's.
        for headers in [[("Authorization", basic)], [bearer("alice")]] {
            let answer = try await httpRequest(port: server.httpPort, "POST", "/acme/~inbox+alice/publish", json: #""x""#, headers: headers)
            #expect(answer.status == 403, "\(answer.status) \(answer.body)")
        }
    }

    @Test func lineUsersAreUsersByNameAndHearNoneOfTheUsersEvents() async throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let lobby = server.server.configuration.lobby.room
        let alice = try await UsersTests.device(server.server, user: "alice", name: "Alice")
        _ = try await UsersTests.subscribe(alice, lobby)
        let dave = try server.lineClient(name: "dave")
        try dave.send("msg:hello @alice\n")
        // The push, then the count it makes.
        let pushed = try await alice.next(where: { $0["type"]?.stringValue == "publish" })
        #expect(pushed["user"]?.stringValue == "dave", "a valid name is the line user's user id")
        let count = try await alice.next(where: { UsersTests.isUnread(lobby)($0) && $0["unread"]?.intValue == 1 })
        #expect(count["mentions"]?.intValue == 1)
        _ = try await alice.call(["type": "read", "room": .string(lobby), "offset": 1])
        _ = try await UsersTests.publish(alice, "from alice", to: lobby)
        var lines: [String] = []
        _ = try dave.readLine(until: { lines.append($0); return $0.contains("from alice") })
        #expect(!lines.contains { $0.contains("read") || $0.contains("unread") }, "\(lines)")
    }
}
