import Testing
@testable import ParleyCore

@Suite struct UsersTests {
    @Test func userIDsAreShortPlainASCII() {
        #expect(UserID.problem(with: "alice") == nil)
        #expect(UserID.problem(with: "a.b_c-d@example.org") == nil)
        #expect(UserID.problem(with: "") != nil)
        #expect(UserID.problem(with: String(repeating: "a", count: 65)) != nil)
        for bad in ["a+b", "a b", "a/b", "ålice", "a\u{1B}", "a,b"] { #expect(UserID.problem(with: bad) != nil, "\(bad)") }
    }

    @Test func aDirectRoomHasOneNameWhoeverStartsIt() throws {
        #expect(try DirectRoom.name(of: ["bob", "alice"]).get() == "dm+alice+bob")
        #expect(try DirectRoom.name(of: ["alice", "bob", "alice"]).get() == "dm+alice+bob")
        #expect(DirectRoom.users(of: "dm+alice+bob") == ["alice", "bob"])
        #expect(DirectRoom.users(of: "dm+bob+alice") == nil, "only the sorted spelling is a direct room")
        #expect(DirectRoom.users(of: "dm+alice+alice") == nil)
        #expect(DirectRoom.users(of: "dm+alice") == nil)
        #expect(DirectRoom.users(of: "general") == nil)
        #expect(DirectRoom.isDirect("dm+bob+alice"), "malformed, but still reserved")
        if case .success = DirectRoom.name(of: ["alice"]) { Issue.record("one user is no direct room") }
        if case .success = DirectRoom.name(of: (0..<9).map { "u\($0)" }) { Issue.record("at most \(DirectRoom.maxUsers) users") }
        if case .success = DirectRoom.name(of: ["alice", "b b"]) { Issue.record("bad ids are refused") }
        if case .success = DirectRoom.name(of: [String(repeating: "a", count: 64), String(repeating: "b", count: 64)]) {
            Issue.record("longer than a room name")
        }
    }

    @Test func mentionsAreWholeWordsOrListedIDs() {
        #expect(Mentions.mention(in: .string("hi @Alice!"), of: "u1", name: "alice"))
        #expect(Mentions.mention(in: .string("@u1 look"), of: "u1", name: "alice"))
        #expect(!Mentions.mention(in: .string("hi @alicex"), of: "u1", name: "alice"))
        #expect(!Mentions.mention(in: .string("mail alice@example.org"), of: "u1", name: "example"), "an address is no mention")
        #expect(!Mentions.mention(in: .string("hi alice"), of: "u1", name: "alice"))
        #expect(Mentions.mention(in: ["text": "cc @alice"], of: "u1", name: "alice"))
        #expect(Mentions.mention(in: ["text": "see", "mentions": ["u2", "u1"]], of: "u1", name: "alice"))
        #expect(!Mentions.mention(in: ["mentions": ["u2"]], of: "u1", name: "alice"))
    }

    @Test func unreadCountsOthersMessagesAfterTheMark() {
        let room = RoomKey(channel: "c", room: "r")
        let alice = Member(id: "conn1", userID: "alice"), bob = Member(id: "conn2", userID: "bob")
        let aliceOtherDevice = Member(id: "conn3", userID: "alice")
        func message(_ offset: Int64, _ sender: Member?, _ body: JSONValue, action: MessageAction? = nil, deleted: Bool = false) -> Message {
            Message(id: "m\(offset)", offset: offset, timestampMillis: offset, room: room, sender: sender, body: body,
                    isDeleted: deleted, action: action)
        }
        let entries = [
            message(4, bob, "hello"),
            message(5, aliceOtherDevice, "from my phone"),
            message(6, bob, "@alice there?"),
            message(7, bob, .null, action: MessageAction(.react, target: MessageReference(id: "m5", offset: 5), emoji: "👍")),
            message(8, bob, "gone", deleted: true),
            message(9, nil, "server notice"),
        ]
        let count = UnreadCounter.count(entries, for: "alice", name: "alice", lastOffset: 9)
        #expect(count.unread == 3 && count.mentions == 1 && !count.capped)
        #expect(count.through == 9, "the newest entry counted: a live message after it is not in the count yet")
        #expect(UnreadCounter.count(entries, for: "alice", name: "alice", lastOffset: 12).capped, "more after the page")
        #expect(alice.user == "alice" && Member(id: "x").user == "x")
    }
}

extension UsersTests {
    @Test func membersFoldIntoUsersInTheOrderEachFirstJoined() {
        let members = [Member(id: "c1", clientData: ["name": "Alice"], userID: "alice"), Member(id: "c2", clientData: ["name": "Bob"]),
                       Member(id: "c3", clientData: ["name": "Alice (phone)"], userID: "alice"), Member(id: "c4", userID: "bob")]
        #expect(RoomUser.fold(members) == [RoomUser(user: "alice", name: "Alice", devices: 2), RoomUser(user: "c2", name: "Bob", devices: 1),
                                           RoomUser(user: "bob", name: "c4", devices: 1)])
        #expect(RoomUser.fold([]).isEmpty)
    }
}
