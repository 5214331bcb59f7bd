import Foundation
import ParleyClient
import ParleyCore
import ParleyTestSupport
import Testing

private func member(_ name: String, me: Bool = false, color: String = "#AABBCC") -> ChatMember {
    ChatMember(id: "id-\(name)", clientData: ["name": .string(name), "color": .string(color)], isMe: me)
}

private func message(_ text: String, from sender: ChatMember?, offset: Int, mine: Bool = false) -> ChatMessage {
    ChatMessage(id: "msg-\(offset)", room: "observable-room", body: .string(text), clientID: sender?.id,
                sender: nil, offset: offset, timestamp: Date(timeIntervalSince1970: Double(offset)), isMine: mine)
}

@Suite struct ChatRoomStateTests {
    let me = member("me", me: true)
    let alice = member("alice", color: "#FF0000")
    let bob = member("bob")
    let carol = member("carol")

    @Test func typingTextForZeroOneTwoThreeOthersExcludingSelf() {
        var state = ChatRoomState()
        state.apply(.members([me, alice, bob, carol]))
        #expect(state.typingText == "")
        state.apply(.typingChanged([me]))
        #expect(state.typingText == "")
        state.apply(.typingChanged([me, alice]))
        #expect(state.typingText == "alice is typing")
        state.apply(.typingChanged([alice, me, bob]))
        #expect(state.typingText == "alice, bob are typing")
        state.apply(.typingChanged([alice, bob, carol, me]))
        #expect(state.typingText == "alice, bob, carol are typing")
        state.apply(.typingChanged([]))
        #expect(state.typingText == "")
    }

    @Test func aMessageOrALeaveEndsThatPersonsTyping() {
        var state = ChatRoomState()
        state.apply(.members([me, alice, bob]))
        state.apply(.typingChanged([alice, bob]))
        state.apply(.message(message("hi", from: alice, offset: 1)))
        #expect(state.typingText == "bob is typing")
        state.apply(.memberLeft(bob))
        #expect(state.typingText == "")
    }

    @Test func joinAndLeaveNoticesAndMembers() {
        var state = ChatRoomState()
        state.apply(.members([me]))
        state.apply(.memberJoined(alice))
        state.apply(.memberJoined(bob))
        #expect(state.members.map(\.displayName) == ["me", "alice", "bob"])
        state.apply(.memberLeft(alice))
        #expect(state.members.map(\.displayName) == ["me", "bob"])
        #expect(state.lines.map(\.text) == ["alice joined", "bob joined", "alice left"])
        #expect(state.lines.allSatisfy { $0.kind == .notice })
        // Our own join (another connection of ours) is not announced.
        state.apply(.memberJoined(member("me2", me: true)))
        #expect(state.lines.count == 3)
    }

    @Test func orderingMineTheirsColorsAndDuplicates() {
        var state = ChatRoomState()
        state.apply(.members([me, alice]))
        state.apply(.history(message("old", from: alice, offset: 1)))
        state.apply(.history(message("older reply", from: me, offset: 2, mine: true)))
        state.apply(.message(message("new", from: alice, offset: 3)))
        state.apply(.message(message("mine", from: me, offset: 4, mine: true)))
        state.apply(.message(message("new", from: alice, offset: 3)))   // a duplicate delivery
        #expect(state.lines.map(\.text) == ["old", "older reply", "new", "mine"])
        #expect(state.lines.map(\.isMine) == [false, true, false, true])
        #expect(state.lines[0].kind == .history(isMine: false))
        #expect(state.lines[2].name == "alice" && state.lines[2].color == "#FF0000")
        // A sender who left keeps their name and color.
        state.apply(.memberLeft(alice))
        state.apply(.message(message("late", from: alice, offset: 5)))
        #expect(state.lines.last?.name == "alice")
        #expect(state.lines.last?.color == "#FF0000")
    }

    @Test func unknownSenderAndJSONBodies() {
        var state = ChatRoomState()
        let json = ChatMessage(id: "x", room: "r", body: ["a": 1], clientID: "stranger-123456", sender: nil,
                               offset: 1, timestamp: Date(), isMine: false)
        state.apply(.message(json))
        #expect(state.lines[0].text == #"{"a":1}"#)
        #expect(state.lines[0].name == "someone")
        #expect(RandomIdentity.isHexColor(state.lines[0].color))
    }

    @Test func randomIdentityLooksLikeTheTutorials() {
        for _ in 0..<200 {
            let name = RandomIdentity.name()
            #expect(RandomIdentity.adjectives.contains { adjective in
                name.hasPrefix(adjective) && RandomIdentity.nouns.contains(String(name.dropFirst(adjective.count)))
            })
            let color = RandomIdentity.color()
            #expect(RandomIdentity.isHexColor(color))
        }
        #expect(RandomIdentity.rgb("#0A10FF")! == (10, 16, 255))
        #expect(!RandomIdentity.isHexColor("#12345"))
    }
}

/// The model itself, against a real server, on the main actor.
@Suite(.serialized) struct ChatRoomModelTests {
    @MainActor @Test func twoModelsChat() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let url = nativeURL(port: server.httpPort)
        let alice = ChatRoomModel(url: url, room: "observable-model", name: "alice", color: "#FF0000")
        let bob = ChatRoomModel(url: url, room: "observable-model", name: "bob")
        try await alice.start()
        try await bob.start()
        try await eventually("alice sees bob") { await MainActor.run { alice.members.count == 2 } }
        #expect(alice.lines.map(\.text) == ["bob joined"])
        bob.inputChanged("hel")
        try await eventually("typing shows") { await MainActor.run { alice.typingText == "bob is typing" } }
        #expect(bob.typingText == "")
        try await bob.send("hello alice")
        try await eventually("message arrives") { await MainActor.run { alice.lines.last?.text == "hello alice" } }
        #expect(alice.lines.last?.isMine == false)
        #expect(alice.lines.last?.name == "bob")
        #expect(alice.typingText == "")
        try await eventually("echo is mine") { await MainActor.run { bob.lines.last?.isMine == true } }
        #expect(alice.connection == .connected)
        await bob.stop()
        try await eventually("bob left") { await MainActor.run { alice.members.count == 1 } }
        #expect(alice.lines.last?.text == "bob left")
        await alice.stop()
    }
}
