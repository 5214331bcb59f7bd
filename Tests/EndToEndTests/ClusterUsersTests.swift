import Foundation
import Testing
import ParleyCore
@testable import ParleyServer
import ParleyTestSupport

/// Users across two nodes on one Redis (and a Redis Cluster): a user's devices on different
/// nodes share one read mark, receipts and unread counts follow it, a direct room started on
/// one node reaches the other user's live inbox on the other, and nobody else can read it.
@Suite(.serialized) struct ClusterUsersTests {
    typealias Peer = MessageActionTests.Peer

    @Test(arguments: ClusterTests.RedisKind.allCases)
    func devicesOnTwoNodesShareReadStateAndDirectRooms(kind: ClusterTests.RedisKind) async throws {
        let (a, b) = try ClusterTests.twoNodes(on: kind)
        defer { a.shutdown(); b.shutdown() }
        let alicePhone = try await UsersTests.device(a, user: "alice", name: "Alice")
        let aliceLaptop = try await UsersTests.device(b, user: "alice", name: "Alice")
        let bob = try await UsersTests.device(b, user: "bob", name: "Bob")
        for peer in [alicePhone, aliceLaptop, bob] {
            #expect(try await UsersTests.subscribe(peer, "team")["error"] == nil)
            _ = try await peer.next(where: UsersTests.isUnread("team"))
        }
        // One user, two devices on two nodes: one user in the room's user view.
        let users = try await bob.call(["type": "room_users", "room": "team"])
        #expect(users["users"]?.arrayValue?.map { [$0["user"]?.stringValue ?? "", String($0["devices"]?.intValue ?? 0)] }
                == [["alice", "2"], ["bob", "1"]], "\(users)")
        let aliceInbox = try await alicePhone.call(["type": "inbox", "watch": true])
        #expect(aliceInbox["conversations"]?.arrayValue?.map { $0["room"]?.stringValue } == ["team"])

        let first = try await UsersTests.publish(bob, "one", to: "team")
        _ = try await UsersTests.publish(bob, "two @alice", to: "team")
        let counted = try await alicePhone.next(where: { UsersTests.isUnread("team")($0) && $0["unread"]?.intValue == 2 })
        #expect(counted["mentions"]?.intValue == 1)
        // The laptop (node b) reads the first: the phone (node a) follows, Bob sees the receipt.
        _ = try await aliceLaptop.call(["type": "read", "room": "team", "offset": .number(JSONNumber(first))])
        let followed = try await alicePhone.next(where: { UsersTests.isUnread("team")($0) && $0["read_offset"]?.intValue == first })
        #expect(followed["unread"]?.intValue == 1 && followed["mentions"]?.intValue == 1)
        let receipt = try await bob.next(where: { $0["type"]?.stringValue == "read" })
        #expect(receipt["user"]?.stringValue == "alice" && receipt["offset"]?.intValue == first)

        // Bob (node b) opens a direct room: Alice's live inbox on node a hears of it.
        let opened = try await bob.call(["type": "dm", "users": ["alice"]])
        let room = try #require(opened["room"]?.stringValue)
        #expect(room == "dm+alice+bob")
        let added = try await alicePhone.next(where: { $0["type"]?.stringValue == "conversation" && $0["conversation"]?["room"]?.stringValue == room })
        #expect(added["conversation"]?["users"]?.arrayValue?.count == 2)
        _ = try await UsersTests.subscribe(bob, room)
        _ = try await UsersTests.publish(bob, "just us", to: room)
        let live = try await alicePhone.next(where: {
            $0["type"]?.stringValue == "conversation" && $0["conversation"]?["room"]?.stringValue == room
                && $0["conversation"]?["unread"]?.intValue == 1
        })
        #expect(live["conversation"]?["last"]?["message"]?.stringValue == "just us")
        // Mallory, on either node, cannot read it.
        for node in [a, b] {
            let mallory = try await UsersTests.device(node, user: "mallory", name: "Mallory")
            #expect(try await mallory.call(["type": "history", "room": .string(room)])["error"] != nil)
        }
        // A new device of Alice's, after the fact, gets the counts from Redis.
        let tablet = try await UsersTests.device(a, user: "alice", name: "Alice")
        let inbox = try await tablet.call(["type": "inbox"])
        let rooms = inbox["conversations"]?.arrayValue ?? []
        #expect(rooms.map { $0["room"]?.stringValue } == [room, "team"], "newest activity first: \(inbox)")
        #expect(rooms.last?["unread"]?.intValue == 1 && rooms.last?["read_offset"]?.intValue == first)
        #expect(rooms.first?["unread"]?.intValue == 1)
    }
}
