import ParleyCore
import ParleyIO
import Synchronization
import Testing
@testable import ParleyServer

/// The rules of message actions, once for every door: ``ChatSession/act(_:in:completion:)``
/// in-process, over the in-memory store, with a clock moved by hand.
@Suite struct MessageActionRulesTests {
    typealias World = ChatSessionTests.World

    /// A session of `door` in channel "demo" named `name`.
    func member(_ world: World, _ door: DoorKind = .native, id: String, name: String, session: SessionID) throws -> ChatSession {
        let chat = world.session(door, id: session)
        _ = try chat.identify(as: id, name: name).get()
        if let refusal = chat.enter("demo", as: id, name: name, control: world.control) { throw refusal }
        return chat
    }

    func act(_ chat: ChatSession, _ request: MessageActionRequest, in room: String = "r") async -> Result<Message, ChatRefusal> {
        await withCheckedContinuation { continuation in
            if let refusal = chat.act(request, in: room, completion: { continuation.resume(returning: $0) }) {
                continuation.resume(returning: .failure(refusal))
            }
        }
    }

    func code(_ result: Result<Message, ChatRefusal>) -> ChatRefusal.Code? {
        if case .failure(let refusal) = result { return refusal.code }
        return nil
    }

    func post(_ text: JSONValue, by chat: ChatSession, world: World, in room: String = "r") async throws -> Message {
        try await world.hub.publish(text, to: RoomKey(channel: "demo", room: room), from: chat.member)
    }

    func current(_ id: String, _ world: World, in room: String = "r") async throws -> Message? {
        try await world.hub.store.message(withID: id, in: RoomKey(channel: "demo", room: room))
    }

    @Test(arguments: ChatSessionTests.chatDoors)
    func onlyTheAuthorEditsOrDeletes(_ door: DoorKind) async throws {
        let world = World()
        let alice = try member(world, door, id: "a1", name: "alice", session: 1)
        let bob = try member(world, door, id: "b1", name: "bob", session: 2)
        let original = try await post("helo", by: alice, world: world)

        #expect(code(await act(bob, .edit(original.id, body: "pwned"))) == .notAuthor)
        #expect(code(await act(bob, .delete(original.id))) == .notAuthor)
        let edit = try await act(alice, .edit(original.id, body: "hello")).get()
        #expect(edit.action == MessageAction(.edit, target: MessageReference(id: original.id, offset: original.offset)))
        #expect(edit.offset == original.offset + 1, "an action takes the room's next offset")
        #expect(try await current(original.id, world)?.body == "hello")

        // Anyone may reply to it and react to it.
        let reply = try await act(bob, .reply(to: original.id, body: "hi!", messageID: nil)).get()
        #expect(reply.replyTo?.id == original.id && reply.action == nil && reply.body == "hi!")
        _ = try await act(bob, .react(original.id, emoji: "👍")).get()

        _ = try await act(alice, .delete(original.id)).get()
        #expect(try await current(original.id, world)?.isDeleted == true)
        for request: MessageActionRequest in [.edit(original.id, body: "again"), .delete(original.id), .react(original.id, emoji: "👍"),
                                              .reply(to: original.id, body: "late", messageID: nil)] {
            #expect(code(await act(alice, request)) == .messageDeleted, "\(request.name) on a tombstone")
        }
    }

    @Test func aModeratorTokenEditsAndDeletesAnyMessage() async throws {
        let world = World { $0.channels = [ChannelSettings(id: "demo", secret: ChatSessionTests.secret)] }
        let alice = try member(world, id: "a1", name: "alice", session: 1)
        let moderator = try member(world, id: "m1", name: "mod", session: 2)
        let plain = try member(world, id: "p1", name: "pat", session: 3)
        let token = TokenVerifier(hmac: OpenSSLHMAC(), clock: world.clock)
        #expect(moderator.authenticate(token.mint(secret: ChatSessionTests.secret, channel: "demo", client: "*",
                                                  expiresAtSeconds: world.clock.nowMillis() / 1000 + 60,
                                                  permissions: [(".*", true, true, 10)], moderating: [".*"])) == nil)
        #expect(plain.authenticate(world.token()) == nil)
        let message = try await post("spam", by: alice, world: world)
        #expect(code(await act(plain, .delete(message.id))) == .notAuthor, "a token without moderate is not enough")
        _ = try await act(moderator, .edit(message.id, body: "[removed]")).get()
        _ = try await act(moderator, .delete(message.id)).get()
        #expect(try await current(message.id, world)?.isDeleted == true)
    }

    @Test func theEditWindowAndTheEditCountAreSettings() async throws {
        let world = World { $0.editWindowSeconds = 60; $0.maxEditsPerMessage = 2 }
        let alice = try member(world, id: "a1", name: "alice", session: 1)
        let message = try await post("v0", by: alice, world: world)
        _ = try await act(alice, .edit(message.id, body: "v1")).get()
        _ = try await act(alice, .edit(message.id, body: "v2")).get()
        #expect(code(await act(alice, .edit(message.id, body: "v3"))) == .tooManyEdits)
        #expect(try await current(message.id, world)?.body == "v2")

        let older = try await post("old", by: alice, world: world)
        world.clock.advance(millis: 60_000)
        _ = try await act(alice, .edit(older.id, body: "just in time")).get()
        world.clock.advance(millis: 1)
        #expect(code(await act(alice, .edit(older.id, body: "too late"))) == .editWindowClosed)
        _ = try await act(alice, .delete(older.id)).get()

        world.reload { $0.editWindowSeconds = 0 }
        let fresh = try await post("new", by: alice, world: world)
        #expect(code(await act(alice, .edit(fresh.id, body: "no"))) == .editWindowClosed, "0 turns edits off")
    }

    @Test func reactionsAreLimitedPerMemberAndPerMessage() async throws {
        let world = World { $0.maxReactionsPerMember = 2; $0.maxReactionsPerMessage = 3 }
        let alice = try member(world, id: "a1", name: "alice", session: 1)
        let bob = try member(world, id: "b1", name: "bob", session: 2)
        let carol = try member(world, id: "c1", name: "carol", session: 3)
        let message = try await post("vote", by: alice, world: world)
        let id = message.id
        _ = try await act(alice, .react(id, emoji: "👍")).get()
        _ = try await act(alice, .react(id, emoji: "🎉")).get()
        #expect(code(await act(alice, .react(id, emoji: "❤️"))) == .tooManyReactions, "per member")
        #expect(code(await act(alice, .react(id, emoji: "👍"))) == .alreadyReacted)
        #expect(code(await act(alice, .unreact(id, emoji: "❤️"))) == .notReacted)
        _ = try await act(bob, .react(id, emoji: "❤️")).get()
        #expect(code(await act(bob, .react(id, emoji: "😮"))) == .tooManyReactions, "per message: three different already")
        _ = try await act(carol, .react(id, emoji: "👍")).get()
        _ = try await act(alice, .unreact(id, emoji: "🎉")).get()
        _ = try await act(bob, .react(id, emoji: "😮")).get()

        let state = try #require(try await current(id, world))
        #expect(state.reactions.map(\.emoji) == ["👍", "❤️", "😮"])
        #expect(state.reactions.map(\.count) == [2, 1, 1])
        #expect(state.reactions[0].shownNames == ["alice", "carol"])
    }

    @Test func unknownForeignAndMalformedTargetsAreRefused() async throws {
        let world = World()
        let alice = try member(world, id: "a1", name: "alice", session: 1)
        let here = try await post("here", by: alice, world: world)
        let elsewhere = try await post("elsewhere", by: alice, world: world, in: "other")
        let reaction = try await act(alice, .react(here.id, emoji: "👍")).get()

        #expect(code(await act(alice, .edit("no-such-id", body: "x"))) == .unknownMessage)
        #expect(code(await act(alice, .react(elsewhere.id, emoji: "👍"))) == .unknownMessage, "a message of another room")
        #expect(code(await act(alice, .delete(reaction.id))) == .unknownMessage, "an action is no message")
        #expect(code(await act(alice, .delete(""))) == .badAction)
        #expect(code(await act(alice, .delete(String(repeating: "x", count: 129)))) == .badAction)
        for bad in ["", "a b", "\u{07}", "x\u{202E}", String(repeating: "🙂", count: 17)] {
            #expect(code(await act(alice, .react(here.id, emoji: bad))) == .badAction, "reaction \(bad.debugDescription)")
        }
        #expect(code(await act(alice, .edit(here.id, body: ["typing": true]))) == .badAction)
        #expect(code(await act(alice, .reply(to: here.id, body: ["attachments": ["u1"]], messageID: nil))) == .badAction)
        #expect(try await current(here.id, world)?.body == "here", "nothing refused changed anything")
    }

    @Test(arguments: ChatSessionTests.chatDoors)
    func actionsCountAgainstThePublishRate(_ door: DoorKind) async throws {
        let world = World {
            $0.lineRatePerSecond = 1; $0.lineBurst = 2
            $0.nativeRatePerSecond = 1; $0.nativeBurst = 2
        }
        let alice = try member(world, door, id: "a1", name: "alice", session: 1)
        let message = try await post("hi", by: alice, world: world)
        #expect(alice.admitPublish(to: "r") == nil)
        _ = try await act(alice, .react(message.id, emoji: "👍")).get()
        #expect(code(await act(alice, .react(message.id, emoji: "🎉"))) == .rateLimited)
    }

    @Test func nothingActsBeforeAnIdentity() async {
        let world = World()
        let chat = world.session(.line)
        #expect(code(await act(chat, .delete("m"))) == .notIdentified)
    }
}
