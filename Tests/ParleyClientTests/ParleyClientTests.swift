import Foundation
import ParleyClient
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

private func client(_ port: Int, name: String, channel: String = "demo",
                    policy: ReconnectPolicy = ReconnectPolicy(initialDelay: .milliseconds(50), maxDelay: .milliseconds(400))) -> ParleyClient {
    ParleyClient(url: nativeURL(port: port), channel: channel,
                 clientData: ["name": .string(name), "color": "#112233"], reconnectPolicy: policy)
}

@Suite(.serialized) struct ParleyClientTests {
    @Test func publishIsAcknowledgedAndFansOut() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = client(server.httpPort, name: "alice")
        let bob = client(server.httpPort, name: "bob")
        try await alice.connect()
        try await bob.connect()
        #expect(await alice.state == .connected)
        let aliceRoom = try await alice.subscribe("chat")
        let bobRoom = try await bob.subscribe("chat")
        let aliceLog = EventLog(aliceRoom), bobLog = EventLog(bobRoom)
        let first = try await aliceRoom.publish(text: "hello")
        let second = try await aliceRoom.publish(["kind": "json", "n": 2])
        #expect(first.offset == 1 && second.offset == 2)
        #expect(!first.id.isEmpty && first.messageID != second.messageID)
        for log in [aliceLog, bobLog] {
            let event = try await log.waitFor("hello") { if case .message(let m) = $0 { m.text == "hello" } else { false } }
            guard case .message(let message) = event else { return }
            #expect(message.id == first.id)
            #expect(message.offset == 1)
            #expect(message.isMine == (log === aliceLog))
            try await log.waitFor("json") { if case .message(let m) = $0 { m.body == ["kind": "json", "n": 2] } else { false } }
        }
        await alice.disconnect()
        await bob.disconnect()
        #expect(await alice.state == .disconnected(.closedByClient))
        await #expect(throws: ParleyClientError.self) { try await aliceRoom.publish(text: "after") }
    }

    @Test func moderationReachesTheClient() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = client(server.httpPort, name: "alice")
        try await alice.connect()
        let room = try await alice.subscribe("moderated")
        let log = EventLog(room)
        let kept = try await room.publish(text: "kept")
        let removed = try await room.publish(text: "removed")
        try await log.waitFor("second message") { if case .message(let m) = $0 { m.text == "removed" } else { false } }
        let key = RoomKey(channel: "demo", room: "moderated")
        #expect(try await server.hub.deleteMessage(at: Int64(removed.offset), in: key))
        try await log.waitFor("deletion") { $0 == .messageDeleted(offset: removed.offset) }
        // History shows the tombstone as deleted, the other message as it was.
        let page = try await room.history(limit: 10)
        #expect(page.messages.map(\.isDeleted) == [false, true])
        #expect(page.messages.first?.offset == kept.offset)
        var state = ChatRoomState()
        for event in await log.events { state.apply(event) }
        #expect(state.lines.map(\.text) == ["kept", ChatRoomState.deletedText])
        server.hub.closeRoom(key, reason: "spam")
        try await log.waitFor("room closed") { $0 == .roomClosed(reason: "spam") }
        try await log.waitForEnd()
        state.apply(.roomClosed(reason: "spam"))
        #expect(state.lines.last?.text == "the room was closed: spam")
        #expect(await alice.lastOffset(of: "moderated") == 0)
        await alice.disconnect()
    }

    @Test func membersJoinLeaveAndTyping() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = client(server.httpPort, name: "alice")
        try await alice.connect()
        let aliceRoom = try await alice.subscribe("observable-x")
        let log = EventLog(aliceRoom)
        try await log.waitFor("own snapshot") {
            if case .members(let list) = $0 { list.map(\.name) == ["alice"] && list[0].isMe } else { false }
        }
        let bob = client(server.httpPort, name: "bob")
        try await bob.connect()
        let bobRoom = try await bob.subscribe("observable-x")
        try await log.waitFor("bob joined") { if case .memberJoined(let m) = $0 { m.name == "bob" && !m.isMe } else { false } }
        #expect(await aliceRoom.members.map(\.name) == ["alice", "bob"])
        #expect(await aliceRoom.members.last?.color == "#112233")

        await bobRoom.setTyping(true)
        await bobRoom.setTyping(true)   // debounced: no second flag, no second event
        try await log.waitFor("bob typing") { if case .typingChanged(let list) = $0 { list.map(\.name) == ["bob"] } else { false } }
        try await bobRoom.publish(text: "done typing")
        try await log.waitFor("bob stopped") { if case .typingChanged(let list) = $0 { list.isEmpty } else { false } }
        let typingEvents = await log.events.filter { if case .typingChanged(let l) = $0 { !l.isEmpty } else { false } }
        #expect(typingEvents.count == 1)

        await bobRoom.setTyping(true)
        try await log.waitFor("bob typing again") {
            if case .typingChanged(let list) = $0 { list.map(\.name) == ["bob"] } else { false }
        }
        await log.clear()
        await bobRoom.setTyping(false)
        try await log.waitFor("explicit stop") { if case .typingChanged(let list) = $0 { list.isEmpty } else { false } }

        await bob.disconnect()
        try await log.waitFor("bob left") { if case .memberLeft(let m) = $0 { m.name == "bob" } else { false } }
        #expect(await aliceRoom.members.map(\.name) == ["alice"])
        await alice.disconnect()
    }

    @Test func historyCountOnSubscribe() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = client(server.httpPort, name: "alice")
        try await alice.connect()
        for text in ["one", "two", "three"] { try await alice.publish(.string(text), to: "observable-h") }
        let bob = client(server.httpPort, name: "bob")
        try await bob.connect()
        let room = try await bob.subscribe("observable-h", historyCount: 2)
        let log = EventLog(room)
        try await eventually("two history messages") { await log.historyTexts.count == 2 }
        #expect(await log.historyTexts == ["two", "three"])
        #expect(await log.messageTexts.isEmpty)
        // The sender's name resolves when the sender is still in the room.
        try await room.publish(text: "four")
        try await eventually("live message") { await log.messageTexts == ["four"] }
        #expect(await bob.lastOffset(of: "observable-h") == 4)
        await alice.disconnect()
        await bob.disconnect()
    }

    /// Pages back through a room with the server's `history` command.
    @Test func historyPaging() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = client(server.httpPort, name: "alice")
        try await alice.connect()
        let room = try await alice.subscribe("paged")
        for n in 1...25 { try await room.publish(text: "m\(n)") }
        let newest = try await room.history(limit: 10)
        #expect(newest.messages.compactMap(\.text) == (16...25).map { "m\($0)" })
        #expect(newest.hasMore)
        let older = try await room.history(before: newest.messages.first?.offset, limit: 10)
        #expect(older.messages.compactMap(\.text) == (6...15).map { "m\($0)" })
        let oldest = try await room.history(before: older.messages.first?.offset, limit: 10)
        #expect(oldest.messages.compactMap(\.text) == (1...5).map { "m\($0)" })
        #expect(!oldest.hasMore)
        await alice.disconnect()
    }

    /// The server is stopped mid-conversation and started again on the same port and data
    /// directory: alice's client reconnects by itself and resumes from its last offset, seeing
    /// what was published while the server was back but she was not, with no gap and no
    /// duplicate, then live messages.
    @Test func resumesAfterTheServerIsStoppedAndStartedAgain() async throws {
        let data = NSTemporaryDirectory() + "parley-client-restart-\(UUID().uuidString)"
        let first = try startClientTestServer { $0.dataDirectory = data }
        let port = first.httpPort
        let alice = client(port, name: "alice")
        try await alice.connect()
        let aliceRoom = try await alice.subscribe("observable-restart", historyCount: 10)
        let log = EventLog(aliceRoom)
        let bob = client(port, name: "bob")
        try await bob.connect()
        let bobRoom = try await bob.subscribe("observable-restart")
        try await bobRoom.publish(text: "m1")
        try await bobRoom.publish(text: "m2")
        try await eventually("m1 m2") { await log.messageTexts == ["m1", "m2"] }
        await bob.disconnect()

        first.shutdown(timeout: .seconds(1))
        try await eventually("alice notices") {
            if case .reconnecting = await alice.state { true } else { false }
        }
        let second = try startClientTestServer { $0.dataDirectory = data; $0.httpPort = port }
        defer { second.shutdown(timeout: .seconds(1)) }
        // Published on the new server before alice is back (carol may beat her to it).
        let carol = client(port, name: "carol")
        try await carol.connect()
        let carolRoom = try await carol.subscribe("observable-restart")
        try await carolRoom.publish(text: "m3")
        try await carolRoom.publish(text: "m4")
        try await eventually("alice connected again", timeout: 15) { await alice.state == .connected }
        try await carolRoom.publish(text: "m5")
        try await eventually("m1...m5", timeout: 10) { await log.messageTexts.count >= 5 }
        // Nothing duplicated behind them: a message published now is the next one she gets.
        try await carolRoom.publish(text: "marker")
        try await eventually("the marker", timeout: 10) { await log.messageTexts.last == "marker" }
        #expect(await log.messageTexts == ["m1", "m2", "m3", "m4", "m5", "marker"])
        let offsets = await log.events.compactMap { if case .message(let m) = $0 { m.offset } else { nil } }
        #expect(offsets == [1, 2, 3, 4, 5, 6])
        await alice.disconnect()
        await carol.disconnect()
    }

    /// The server cuts alice's connection; while she is away bob keeps talking and she
    /// publishes too. She comes back by herself and sees every message exactly once, in order.
    @Test func reconnectsAndResumesWithoutGapOrDuplicate() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let proxy = try TCPProxy(upstreamPort: server.httpPort)
        defer { proxy.stop() }
        let alice = client(proxy.port, name: "alice")
        let bob = client(server.httpPort, name: "bob")
        try await alice.connect()
        try await bob.connect()
        let aliceRoom = try await alice.subscribe("observable-resume", historyCount: 10)
        let bobRoom = try await bob.subscribe("observable-resume")
        let log = EventLog(aliceRoom)
        let bobLog = EventLog(bobRoom)
        let states = await alice.stateUpdates()
        let seenStates = StateLog(states)

        try await bobRoom.publish(text: "m1")
        try await bobRoom.publish(text: "m2")
        try await eventually("m1 m2") { await log.messageTexts == ["m1", "m2"] }

        proxy.counters.blocked.store(true, ordering: .relaxed)
        proxy.dropAll()
        let acceptedBeforeTheDrop = proxy.counters.accepted.load(ordering: .relaxed)
        try await eventually("alice reconnecting") {
            if case .reconnecting = await alice.state { true } else { false }
        }
        try await bobRoom.publish(text: "m3")
        try await bobRoom.publish(text: "m4")
        // Published while down: queued, sent after the reconnect, acknowledged once.
        let offline = Task { try await aliceRoom.publish(text: "from alice while away") }
        // Down for real: the proxy turns away at least one of her attempts before it lets her in.
        try await eventually("a reconnect attempt turned away") {
            proxy.counters.accepted.load(ordering: .relaxed) > acceptedBeforeTheDrop
        }
        proxy.counters.blocked.store(false, ordering: .relaxed)

        let ack = try await within(10, "offline publish ack") { try await offline.value }
        #expect(ack.offset == 5)
        try await eventually("alice connected again", timeout: 10) { await alice.state == .connected }
        try await bobRoom.publish(text: "m5")
        try await eventually("all five", timeout: 10) { await log.messageTexts.count == 6 }
        #expect(await log.messageTexts == ["m1", "m2", "m3", "m4", "from alice while away", "m5"])
        let offsets = await log.events.compactMap { if case .message(let m) = $0 { m.offset } else { nil } }
        #expect(offsets == [1, 2, 3, 4, 5, 6])
        try await eventually("bob saw alice's message once") {
            await bobLog.messageTexts.filter { $0 == "from alice while away" }.count == 1
        }
        let attempts = await seenStates.states.compactMap { if case .reconnecting(let n) = $0 { n } else { nil } }
        #expect(attempts.first == 1)
        #expect(await seenStates.states.last == .connected)
        await alice.disconnect()
        await bob.disconnect()
    }

    /// A handshake error reply is a rejection: connect() throws, and nothing retries.
    /// A publish made while the server is gone does not wait forever: it gives up after its
    /// timeout, or at once when its task is cancelled, and is not re-sent afterwards.
    @Test func aPublishWhileDisconnectedTimesOutOrIsCancelled() async throws {
        let server = try startClientTestServer()
        let port = server.httpPort
        let alice = client(port, name: "alice")
        try await alice.connect()
        server.shutdown(timeout: .seconds(1))
        try await eventually("alice notices the server is gone") {
            if case .reconnecting = await alice.state { true } else { false }
        }
        let started = ContinuousClock.now
        do {
            _ = try await within(10, "timed-out publish") { try await alice.publish("lost", to: "r", timeout: .milliseconds(300)) }
            Issue.record("the publish succeeded with no server")
        } catch let error as ParleyClientError {
            #expect(error.code == .timeout)
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        let waiting = Task { try await alice.publish("cancelled", to: "r", timeout: .seconds(60)) }
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        do {
            _ = try await within(5, "cancelled publish") { try await waiting.value }
            Issue.record("the cancelled publish succeeded")
        } catch let error as ParleyClientError {
            #expect(error.code == .cancelled)
        }
        await alice.disconnect()
    }

    @Test func noReconnectLoopAfterRejection() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let proxy = try TCPProxy(upstreamPort: server.httpPort)
        defer { proxy.stop() }
        // The server refuses channel names containing '/'.
        let mallory = client(proxy.port, name: "mallory", channel: "no/such/channel")
        do {
            try await mallory.connect()
            Issue.record("connected to a refused channel")
        } catch {
            #expect(error.code == .rejected)
        }
        guard case .disconnected(.rejected) = await mallory.state else {
            Issue.record("state \(await mallory.state)")
            return
        }
        // A client with the same policy that is sent away with 1001 comes back three times
        // meanwhile; this one never does.
        try await waitForControlClientReconnects(3, policy: mallory.reconnectPolicy)
        #expect(proxy.counters.accepted.load(ordering: .relaxed) == 1)
        await #expect(throws: ParleyClientError.self) { _ = try await mallory.subscribe("x") }
    }

    @Test func backoffPolicy() {
        let policy = ReconnectPolicy(initialDelay: .milliseconds(100), maxDelay: .seconds(1))
        #expect(policy.delay(forAttempt: 1, random: 0) == .milliseconds(50))
        #expect(policy.delay(forAttempt: 1, random: 1) == .milliseconds(100))
        #expect(policy.delay(forAttempt: 3, random: 1) == .milliseconds(400))
        #expect(policy.delay(forAttempt: 30, random: 1) == .seconds(1))
        #expect(policy.delay(forAttempt: 30, random: 0) == .milliseconds(500))
        #expect(ReconnectPolicy.isFatal(closeCode: 1008))
        #expect(ReconnectPolicy.isFatal(closeCode: 4001))
        #expect(!ReconnectPolicy.isFatal(closeCode: 1006))
        #expect(!ReconnectPolicy.isFatal(closeCode: 1001))
        #expect(!ReconnectPolicy.isFatal(closeCode: 1011))
    }
}

actor StateLog {
    private(set) var states: [ConnectionState] = []
    init(_ stream: AsyncStream<ConnectionState>) {
        Task { await self.run(stream) }
    }
    private func run(_ stream: AsyncStream<ConnectionState>) async {
        for await state in stream { states.append(state) }
    }
}
