import Foundation
import ParleyClient
import ParleyCore
import Testing

private let alice = ChatMember(id: "id-alice", clientData: ["name": "alice"])
private let bob = ChatMember(id: "id-bob", clientData: ["name": "bob"])
private let me = ChatMember(id: "id-me", clientData: ["name": "me"], isMe: true)

private func message(_ text: String, from sender: ChatMember, offset: Int, replyTo: String? = nil,
                     reactions: [ChatReaction] = []) -> ChatMessage {
    ChatMessage(id: "m\(offset)", room: "r", body: .string(text), clientID: sender.id, sender: sender, offset: offset,
                timestamp: Date(timeIntervalSince1970: Double(offset)), isMine: sender.isMe, replyTo: replyTo, reactions: reactions)
}

private func action(_ kind: ChatAction.Kind, on target: String, by actor: ChatMember, offset: Int,
                    body: JSONValue? = nil, emoji: String? = nil) -> ChatAction {
    ChatAction(id: "a\(offset)", kind: kind, target: target, body: body, emoji: emoji, clientID: actor.id, sender: actor,
               offset: offset, timestamp: Date(timeIntervalSince1970: Double(offset)), isMine: actor.isMe)
}

/// The client's mirror of the server's action rule (`ChatMessage.applying`) and how
/// ``ChatRoomState`` shows actions: latest body, edited, tombstones, reactions, quotes.
@Suite struct MessageActionStateTests {
    @Test func anEditReplacesTheBodyAndMarksItEdited() {
        let edited = message("helo", from: alice, offset: 1).applying(action(.edit, on: "m1", by: alice, offset: 2, body: "hello"))
        #expect(edited.text == "hello" && edited.isEdited && edited.editedAt == Date(timeIntervalSince1970: 2))
        // An edit of a message deleted since (a replay says so with no body) changes nothing.
        let untouched = message("helo", from: alice, offset: 1).applying(action(.edit, on: "m1", by: alice, offset: 2))
        #expect(untouched.text == "helo" && !untouched.isEdited)
        // An action on another message changes nothing.
        #expect(message("x", from: alice, offset: 1).applying(action(.edit, on: "m9", by: alice, offset: 2, body: "y")).text == "x")
    }

    @Test func aDeleteMakesATombstoneThatStays() {
        let deleted = message("hi", from: alice, offset: 1).applying(action(.delete, on: "m1", by: alice, offset: 2))
        #expect(deleted.isDeleted && deleted.body == .null)
        let after = deleted.applying(action(.edit, on: "m1", by: alice, offset: 3, body: "back"))
            .applying(action(.react, on: "m1", by: bob, offset: 4, emoji: "👍"))
        #expect(after == deleted)
    }

    @Test func reactionsCountOncePerMemberAndComeBackOff() {
        var m = message("hi", from: alice, offset: 1)
        m = m.applying(action(.react, on: "m1", by: bob, offset: 2, emoji: "👍"))
        m = m.applying(action(.react, on: "m1", by: me, offset: 3, emoji: "👍"))
        m = m.applying(action(.react, on: "m1", by: bob, offset: 4, emoji: "👍"))   // again: still once
        m = m.applying(action(.react, on: "m1", by: bob, offset: 5, emoji: "🎉"))
        #expect(m.reactions.map(\.emoji) == ["👍", "🎉"])
        #expect(m.reactions[0].count == 2 && m.reactions[0].names == ["bob", "me"] && m.reactions[0].isMine)
        m = m.applying(action(.unreact, on: "m1", by: me, offset: 6, emoji: "👍"))
        m = m.applying(action(.unreact, on: "m1", by: alice, offset: 7, emoji: "👍"))   // never reacted: nothing
        #expect(m.reactions[0].count == 1 && m.reactions[0].names == ["bob"] && !m.reactions[0].isMine)
        m = m.applying(action(.unreact, on: "m1", by: bob, offset: 8, emoji: "🎉"))
        #expect(m.reactions.map(\.emoji) == ["👍"])
    }

    /// History gives names, not ids: a resume that replays a reaction the snapshot already
    /// showed does not count it twice, and its unreact still takes it off.
    @Test func aReplayedReactionThatHistoryAlreadyShowedCountsOnce() {
        var m = message("hi", from: alice, offset: 1, reactions: [ChatReaction(emoji: "👍", count: 1, names: ["bob"])])
        m = m.applying(action(.react, on: "m1", by: bob, offset: 2, emoji: "👍"))
        #expect(m.reactions.first?.count == 1 && m.reactions.first?.reactorIDs == ["id-bob"])
        m = m.applying(action(.react, on: "m1", by: me, offset: 3, emoji: "👍"))
        #expect(m.reactions.first?.count == 2)
        m = m.applying(action(.unreact, on: "m1", by: bob, offset: 4, emoji: "👍"))
        #expect(m.reactions.first?.count == 1 && m.reactions.first?.names == ["me"])
    }

    @Test func theTranscriptShowsEditsDeletesReactionsAndQuotes() {
        var state = ChatRoomState()
        state.apply(.members([me, alice, bob]))
        state.apply(.history(message("helo", from: alice, offset: 1)))
        state.apply(.message(message("hi alice", from: bob, offset: 2, replyTo: "m1")))
        state.apply(.message(message("about what?", from: me, offset: 3, replyTo: "gone")))
        #expect(state.lines[1].quote == ChatLine.Quote(id: "m1", name: "alice", text: "helo", isDeleted: false))
        #expect(state.lines[2].quote?.name == nil)   // not in the transcript
        state.apply(.action(action(.edit, on: "m1", by: alice, offset: 4, body: "hello")))
        #expect(state.lines[0].text == "hello" && state.lines[0].isEdited && state.lines[0].kind == .history(isMine: false))
        #expect(state.lines[1].quote?.text == "hello")   // the quote follows the edit
        state.apply(.action(action(.react, on: "m2", by: me, offset: 5, emoji: "👍")))
        #expect(state.lines[1].reactions == [ChatReaction(emoji: "👍", count: 1, names: ["me"], reactorIDs: ["id-me"], isMine: true)])
        state.apply(.action(action(.delete, on: "m1", by: alice, offset: 6)))
        #expect(state.lines[0].isDeleted && state.lines[0].text == ChatRoomState.deletedText && !state.lines[0].isEdited)
        #expect(state.lines[1].quote?.isDeleted == true && state.lines[1].quote?.text == "")
        #expect(state.lastOwnMessage?.id == "m3" && state.lastOthersMessage?.id == "m2")
        // An action on a message no longer shown changes nothing.
        let before = state.lines
        state.apply(.action(action(.edit, on: "m0", by: alice, offset: 7, body: "x")))
        #expect(state.lines == before)
    }

    @Test func anOperatorsDeleteIsTheSameTombstone() {
        var state = ChatRoomState()
        state.apply(.message(message("hi", from: alice, offset: 1)))
        state.apply(.action(action(.react, on: "m1", by: bob, offset: 2, emoji: "👍")))
        state.apply(.messageDeleted(offset: 1))
        #expect(state.lines[0].isDeleted && state.lines[0].reactions.isEmpty)
        #expect(state.message("m1")?.isDeleted == true)
    }

    @Test func droppedLinesForgetTheirMessages() {
        var state = ChatRoomState(maxLines: 2)
        for offset in 1...3 { state.apply(.message(message("m\(offset)", from: alice, offset: offset))) }
        #expect(state.message("m1") == nil && state.message("m3") != nil)
    }
}

@Suite struct ChatLineTextTests {
    @Test func headingsShowRepliesEditsAndReactions() {
        var state = ChatRoomState()
        state.apply(.members([me, alice, bob]))
        state.apply(.message(message("hello everyone, this is a rather long first message", from: alice, offset: 1)))
        state.apply(.message(message("hi", from: bob, offset: 2, replyTo: "m1")))
        state.apply(.message(message("?", from: bob, offset: 3, replyTo: "older")))
        #expect(state.lines[0].heading == "alice")
        #expect(state.lines[1].heading == "bob (reply to alice: \"hello everyone, this is a rather long fi…\")")
        #expect(state.lines[2].heading == "bob (reply to a message)")
        state.apply(.action(action(.edit, on: "m2", by: bob, offset: 4, body: "hi!")))
        state.apply(.action(action(.react, on: "m2", by: alice, offset: 5, emoji: "👍")))
        state.apply(.action(action(.react, on: "m2", by: me, offset: 6, emoji: "👍")))
        state.apply(.action(action(.react, on: "m2", by: me, offset: 7, emoji: "🎉")))
        #expect(state.lines[1].heading.hasSuffix("…\", edited)"))
        #expect(state.lines[1].reactionsText == "👍 2  🎉 1")
        state.apply(.action(action(.delete, on: "m1", by: alice, offset: 8)))
        #expect(state.lines[1].replyLabel == "reply to alice: (deleted)")
    }
}
