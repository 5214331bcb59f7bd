import Foundation
import ParleyClient
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

private func client(_ port: Int, name: String) -> ParleyClient {
    ParleyClient(url: nativeURL(port: port), channel: "demo", clientData: ["name": .string(name)],
                 reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(50), maxDelay: .milliseconds(400)))
}

/// Replies, edits, deletes and reactions through the SDK against a real in-process server:
/// receipts, the server's refusal codes, live events, history in its current state, and a
/// resume that replays actions without counting them twice.
@Suite(.serialized) struct MessageActionClientTests {
    @Test func actionsAreAcknowledgedFanOutAndShowInTheModelsState() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = client(server.httpPort, name: "alice"), bob = client(server.httpPort, name: "bob")
        try await alice.connect()
        try await bob.connect()
        let aliceRoom = try await alice.subscribe("observable-actions"), bobRoom = try await bob.subscribe("observable-actions")
        let bobLog = EventLog(bobRoom)

        let first = try await aliceRoom.publish(text: "helo")
        let reply = try await bobRoom.reply(to: first.id, text: "hi alice")
        #expect(reply.offset == 2)
        let edit = try await aliceRoom.edit(first.id, text: "hello")
        #expect(edit.offset == 3 && !edit.id.isEmpty)
        try await bobRoom.react("👍", to: first.id)
        try await aliceRoom.react("🎉", to: reply.id)
        try await aliceRoom.unreact("🎉", from: reply.id)
        let own = try await aliceRoom.publish(text: "oops")
        try await aliceRoom.delete(own.id)

        // Refusals carry the server's stable code.
        do {
            try await bobRoom.edit(first.id, text: "pwned")
            Issue.record("bob edited alice's message")
        } catch {
            #expect(error.code == .server && error.serverCode == "not_author")
        }
        do {
            try await bobRoom.react("👍", to: first.id)
            Issue.record("reacted twice")
        } catch {
            #expect(error.serverCode == "already_reacted")
        }
        do {
            try await bobRoom.reply(to: "no-such-id", text: "?")
            Issue.record("a reply to nothing was stored")
        } catch {
            #expect(error.serverCode == "unknown_message")
        }

        try await bobLog.waitFor("the delete") { if case .action(let a) = $0 { a.kind == .delete } else { false } }
        var state = ChatRoomState()
        for event in await bobLog.events { state.apply(event) }
        #expect(state.lines.map(\.text) == ["hello", "hi alice", ChatRoomState.deletedText])
        #expect(state.lines[0].isEdited && state.lines[0].reactions.map(\.emoji) == ["👍"])
        #expect(state.lines[0].reactions.first?.names == ["bob"] && state.lines[0].reactions.first?.isMine == true)
        #expect(state.lines[1].quote?.name == "alice" && state.lines[1].quote?.text == "hello")
        #expect(state.lines[1].reactions.isEmpty)

        // History answers the current state, which the client reads.
        let page = try await bobRoom.history(limit: 10)
        #expect(page.messages.map(\.text) == ["hello", "hi alice", nil])
        #expect(page.messages[0].isEdited && page.messages[0].reactions == [ChatReaction(emoji: "👍", count: 1, names: ["bob"], isMine: true)])
        #expect(page.messages[1].replyTo == first.id && page.messages[2].isDeleted)
        await alice.disconnect()
        await bob.disconnect()
    }

    /// A snapshot shows the current state; a reconnect resumes after the last offset seen,
    /// actions included, so what the snapshot showed is not applied again.
    @Test func aModelJoiningLateAndResumingShowsEachActionOnce() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let proxy = try TCPProxy(upstreamPort: server.httpPort)
        defer { proxy.stop() }
        let alice = client(server.httpPort, name: "alice")
        try await alice.connect()
        let room = try await alice.subscribe("observable-actions")
        let first = try await room.publish(text: "one")
        try await room.react("👍", to: first.id)

        let model = await ChatRoomModel(url: nativeURL(port: proxy.port), channel: "demo", room: "observable-actions", name: "carol",
                                        reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(50), maxDelay: .milliseconds(200)))
        try await model.start()
        try await eventually("the snapshot") { await model.lines.first?.reactions.first?.count == 1 }

        // The snapshot showed alice's 👍 (offset 2) on the message (offset 1): the resume
        // after offset 1 replays it, and it still counts once.
        proxy.dropAll()
        try await eventually("carol reconnecting") { if case .reconnecting = await model.connection { true } else { false } }
        // A message while away too: the resume's snapshot shows it before the replay brings
        // the actions before and after it.
        try await room.react("🎉", to: first.id)
        let away = try await room.publish(text: "while away")
        try await room.edit(first.id, text: "one!")
        try await eventually("carol back", timeout: 10) { await model.connection == .connected }
        try await eventually("the missed actions", timeout: 10) { await model.lines.first?.text == "one!" }
        #expect(await model.lines.filter { $0.id == away.id }.count == 1)
        var line = try #require(await model.lines.first { $0.id == first.id })
        #expect(line.isEdited && line.reactions.map(\.emoji) == ["👍", "🎉"] && line.reactions.map(\.count) == [1, 1])
        try await room.unreact("👍", from: first.id)
        try await eventually("the live unreact") { await model.lines.first?.reactions.map(\.emoji) == ["🎉"] }
        line = try #require(await model.lines.first { $0.id == first.id })
        #expect(line.reactions.first?.count == 1)

        // The model's own actions: react on the message, reply to it, then edit its reply.
        try await model.toggleReaction("👍", on: first.id)
        try await eventually("carol's reaction") {
            await model.lines.first { $0.id == first.id }?.reactions.first { $0.emoji == "👍" }?.isMine == true
        }
        try await model.toggleReaction("👍", on: first.id)
        try await eventually("carol's reaction taken back") {
            await model.lines.first { $0.id == first.id }?.reactions.map(\.emoji) == ["🎉"]
        }
        let reply = try #require(try await model.reply(to: first.id, "two"))
        try await eventually("carol's reply") { await model.state.lastOwnMessage?.id == reply.id }
        try await model.edit(reply.id, to: "two!")
        try await eventually("carol's edit") { await model.lines.last?.text == "two!" }
        #expect(await model.lines.last?.quote?.text == "one!")
        await #expect(throws: ParleyClientError.self) { try await model.delete(first.id) }
        #expect(await model.lastError?.serverCode == "not_author")
        await model.stop()
        await alice.disconnect()
    }
}
