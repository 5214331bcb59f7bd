import Foundation
import Synchronization
import Testing
import ParleyTestSupport
@testable import ParleyCore

/// Records every delivery, in order.
final class RecordingInbox: Inbox {
    let log = Mutex<[Delivery]>([])
    func post(_ delivery: Delivery) { log.withLock { $0.append(delivery) } }
    var deliveries: [Delivery] { log.withLock { $0 } }
    var events: [RoomEvent] {
        deliveries.compactMap { if case .event(_, let event) = $0 { return event } else { return nil } }
    }
    var snapshots: [SubscribeSnapshot] {
        deliveries.compactMap { if case .subscribed(_, let snapshot) = $0 { return snapshot } else { return nil } }
    }
    func clear() { log.withLock { $0.removeAll() } }
}

private let lobby = RoomKey(channel: "demo", room: "observable-room")

extension Hub {
    /// Publishes and returns the stored message: an in-memory hub answers before `publish`
    /// returns.
    @discardableResult
    func publishNow(_ body: JSONValue, to key: RoomKey, from sender: Member?, messageID: String? = nil) throws -> Message {
        let result = Mutex<Result<Message, ParleyError>?>(nil)
        try publish(body, to: key, from: sender, messageID: messageID) { outcome in result.withLock { $0 = outcome } }
        return try #require(result.withLock { $0 }).get()
    }

    /// A page of stored history, from an in-memory store (answers at once).
    func historyNow(of key: RoomKey, before offset: Int64? = nil, limit: Int) throws -> MessagePage {
        let result = Mutex<Result<MessagePage, ParleyError>?>(nil)
        storedHistory(of: key, before: offset, limit: limit) { outcome in result.withLock { $0 = outcome } }
        return try #require(result.withLock { $0 }).get()
    }
}
private let alice = Member(id: "a1", clientData: ["name": "alice", "color": "#FF0000"])
private let bob = Member(id: "b2", clientData: ["name": "bob"])
private let carol = Member(id: "c3")

@Suite struct HubHistoryBudgetTests {
    @Test func historyReadsPastTheServerWideBoundAreRefusedUntilOthersAreAnswered() throws {
        var configuration = HubConfiguration()
        configuration.historyPageBytes = 1 << 20
        configuration.maxHistoryBytesInFlight = 3 << 20
        let store = GatedStore(gatesPages: true)
        let hub = Hub(configuration: configuration, store: store)
        let key = RoomKey(channel: "c", room: "r")
        let answers = Mutex<[Result<MessagePage, ParleyError>]>([])
        func read() { hub.storedHistory(of: key, limit: 10) { result in answers.withLock { $0.append(result) } } }
        // Three pages' worth may be read at once; a fourth is refused at once, saying why.
        for _ in 0..<4 { read() }
        #expect(store.heldPageReads == 3)
        let refused = answers.withLock { $0 }
        #expect(refused.count == 1)
        guard case .failure(let error) = refused.first else { Issue.record("\(refused)"); return }
        #expect(error.code == .unavailable && error.message.contains("retry"))
        #expect(hub.historyReadBytesInFlight == 3 << 20)
        // Once they are answered, reads go again.
        store.releasePages()
        #expect(hub.historyReadBytesInFlight == 0)
        read()
        #expect(store.heldPageReads == 1)
        store.releasePages()
        #expect(answers.withLock { $0 }.filter { if case .success = $0 { true } else { false } }.count == 4)
        // One read always goes, however small the bound.
        var tiny = configuration
        tiny.maxHistoryBytesInFlight = 1
        let lone = Hub(configuration: tiny, store: GatedStore())
        let page = Mutex<Result<MessagePage, ParleyError>?>(nil)
        lone.storedHistory(of: key, limit: 10) { result in page.withLock { $0 = result } }
        #expect(try #require(page.withLock { $0 }).get().messages.isEmpty)
    }
}

@Suite struct HubSubscriptionReadBoundTests {
    /// A subscribe's `history_count` read and a resume's pages count in the same server-wide
    /// bound as `history` requests, but wait their turn instead of being refused.
    @Test func subscriptionsReadHistoryInTurnUnderTheServerWideBound() throws {
        var configuration = HubConfiguration()
        configuration.historyPageBytes = 1 << 20
        configuration.maxHistoryBytesInFlight = 1 << 20
        let store = GatedStore(gatesPages: true)
        let key = RoomKey(channel: "c", room: "r")
        for offset in Int64(1)...20 {
            store.inner.append(Message(id: "m\(offset)", offset: offset, timestampMillis: offset, room: key, sender: nil,
                                       body: .string("old \(offset)")), clientMessageID: nil) { _ in }
        }
        // A hub that starts on a store with history: its memory holds none of it.
        let hub = Hub(configuration: configuration, store: store)
        let first = RecordingInbox(), second = RecordingInbox(), third = RecordingInbox()
        try hub.subscribe(1, as: alice, to: key, inbox: first, historyCount: 5)
        try hub.subscribe(2, as: bob, to: key, inbox: second, historyCount: 5)
        try hub.subscribe(3, as: carol, to: key, inbox: third, since: 10)
        // One page may be read at once: the first read is at the store, the others wait (none
        // refused), and an explicit read is refused while they wait.
        #expect(store.heldPageReads == 1)
        #expect(hub.historyReadsWaiting == 2)
        #expect(hub.historyReadBytesInFlight == 1 << 20)
        let refused = Mutex<Result<MessagePage, ParleyError>?>(nil)
        hub.storedHistory(of: key, limit: 10) { result in refused.withLock { $0 = result } }
        guard case .failure(let error)? = refused.withLock({ $0 }) else { Issue.record("an explicit read went past the bound"); return }
        #expect(error.code == .unavailable)
        // Each answer lets the next read start.
        store.releasePages()
        #expect(first.snapshots.last?.history.map(\.offset) == Array(16...20))
        #expect(store.heldPageReads == 1 && hub.historyReadsWaiting == 1)
        #expect(third.snapshots.isEmpty)
        store.releasePages()
        #expect(second.snapshots.last?.history.map(\.offset) == Array(16...20))
        // The resume's replay (`after` reads, not gated by this store) went in its turn.
        #expect(third.snapshots.last?.replay.map(\.offset) == Array(11...20))
        #expect(hub.historyReadBytesInFlight == 0 && hub.historyReadsWaiting == 0)
    }

    @Test func pastItsBoundOnWaitingReadsASubscribeFailsClearly() {
        let gate = HistoryReadGate(maxBytes: 10, maxWaiting: 1)
        let started = Mutex<[Int]>([])
        #expect(gate.reserveOrWait(10) { started.withLock { $0.append(1) } })
        #expect(gate.reserveOrWait(10) { started.withLock { $0.append(2) } })
        #expect(!gate.reserveOrWait(10) { started.withLock { $0.append(3) } })
        #expect(!gate.tryReserve(1))
        #expect(started.withLock { $0 } == [1])
        gate.release(10)
        #expect(started.withLock { $0 } == [1, 2] && gate.bytesInFlight == 10)
        gate.release(10)
        #expect(gate.bytesInFlight == 0 && gate.tryReserve(1))
    }
}

@Suite struct HubTests {
    @Test func joinerGetsSnapshotOthersGetJoin() throws {
        let hub = Hub()
        let one = RecordingInbox(), two = RecordingInbox()
        try hub.subscribe(1, as: alice, to: lobby, inbox: one)
        #expect(one.snapshots.last?.members == [alice])
        try hub.subscribe(2, as: bob, to: lobby, inbox: two)
        #expect(two.snapshots.last?.members == [alice, bob])
        #expect(one.events == [.memberJoined(bob)])
        #expect(two.events.isEmpty)
    }

    @Test func leaveReachesOthersWithClientData() throws {
        let hub = Hub()
        let inbox = RecordingInbox()
        try hub.subscribe(1, as: alice, to: lobby, inbox: inbox)
        try hub.subscribe(2, as: bob, to: lobby, inbox: inbox)
        inbox.clear()
        #expect(hub.unsubscribe(2, from: lobby))
        #expect(!hub.unsubscribe(2, from: lobby))
        let deliveries = inbox.deliveries
        guard case .unsubscribed(2, lobby) = deliveries.first else { Issue.record("expected unsubscribed first"); return }
        #expect(inbox.events == [.memberLeft(bob)])
        #expect(hub.members(of: lobby) == [alice])
    }

    @Test func subscribingTwiceDoesNotAnnounceTwice() throws {
        let hub = Hub()
        let inbox = RecordingInbox()
        try hub.subscribe(1, as: alice, to: lobby, inbox: inbox)
        try hub.subscribe(2, as: bob, to: lobby, inbox: inbox)
        inbox.clear()
        try hub.subscribe(2, as: bob, to: lobby, inbox: inbox)
        #expect(inbox.events.isEmpty)
        #expect(hub.members(of: lobby) == [alice, bob])
    }

    @Test func offsetsIncreaseByOneAndTypingIsNotStored() throws {
        let hub = Hub()
        let first = try hub.publishNow("hi", to: lobby, from: alice)
        let typing = try hub.publishNow(["typing": true], to: lobby, from: alice)
        let second = try hub.publishNow(["text": "yo"], to: lobby, from: bob)
        #expect(first.offset == 1)
        #expect(typing.offset == 0)
        #expect(second.offset == 2)
        #expect(try hub.historyNow(of: lobby, limit: 1).messages.last?.offset == 2)
        #expect(try hub.historyNow(of: lobby, limit: 10).messages.map(\.offset) == [1, 2])
        #expect(first.id != second.id)
    }

    @Test func everySubscriberGetsMessagesInOrderIncludingSender() throws {
        let hub = Hub()
        let one = RecordingInbox(), two = RecordingInbox()
        try hub.subscribe(1, as: alice, to: lobby, inbox: one)
        try hub.subscribe(2, as: bob, to: lobby, inbox: two)
        one.clear(); two.clear()
        for i in 0..<50 { try hub.publish(.number(JSONNumber(i)), to: lobby, from: alice) }
        let expected = (1...50).map { Int64($0) }
        for inbox in [one, two] {
            let offsets = inbox.events.compactMap { if case .message(let m) = $0 { return m.offset } else { return nil } }
            #expect(offsets == expected)
        }
    }

    @Test func oneInboxGetsOneDeliveryPerEventWhateverItsSubscriberCount() throws {
        let hub = Hub()
        let shared = RecordingInbox()
        for i in 1...100 { try hub.subscribe(SessionID(i), as: Member(id: "m\(i)"), to: lobby, inbox: shared) }
        shared.clear()
        try hub.publish("hello", to: lobby, from: nil)
        #expect(shared.deliveries.count == 1)
    }

    @Test func concurrentPublishersKeepOneOrderAcrossInboxes() async throws {
        let hub = Hub()
        let inboxes = (0..<4).map { _ in RecordingInbox() }
        for (i, inbox) in inboxes.enumerated() { try hub.subscribe(SessionID(i + 1), as: Member(id: "m\(i)"), to: lobby, inbox: inbox) }
        for inbox in inboxes { inbox.clear() }
        await withTaskGroup(of: Void.self) { group in
            for p in 0..<4 {
                group.addTask { for i in 0..<250 { _ = try? hub.publish(["p": .number(JSONNumber(p)), "i": .number(JSONNumber(i))], to: lobby, from: nil) } }
            }
        }
        let orders = inboxes.map { $0.events.compactMap { if case .message(let m) = $0 { return m.offset } else { return nil } } }
        #expect(orders[0] == (1...1000).map { Int64($0) })
        for order in orders.dropFirst() { #expect(order == orders[0]) }
    }

    @Test func snapshotHistoryMeetsLiveWithoutGapOrDuplicate() throws {
        let hub = Hub()
        for i in 1...5 { try hub.publish(.number(JSONNumber(i)), to: lobby, from: alice) }
        let inbox = RecordingInbox()
        try hub.subscribe(9, as: carol, to: lobby, inbox: inbox, historyCount: 3)
        try hub.publish(6, to: lobby, from: alice)
        let snapshot = try #require(inbox.snapshots.first)
        #expect(snapshot.history.map(\.offset) == [3, 4, 5])
        #expect(snapshot.lastOffset == 5)
        let live = inbox.events.compactMap { if case .message(let m) = $0 { return m.offset } else { return nil } }
        #expect(live == [6])
    }

    /// Every page of history has a byte budget: `history` pages, and a subscribe's history
    /// whether the room's memory holds it (capacity 1000) or the store does (capacity 1).
    @Test(arguments: [1_000, 1])
    func historyPagesAndSnapshotsAreBoundedInBytes(capacity: Int) throws {
        var configuration = HubConfiguration()
        configuration.historyPageBytes = 25_000
        configuration.historyCapacity = capacity
        let hub = Hub(configuration: configuration, store: InMemoryMessageStore())
        let big = JSONValue.string(String(repeating: "x", count: 10_000))
        for _ in 1...10 { try hub.publish(big, to: lobby, from: alice) }
        let page = try hub.historyNow(of: lobby, limit: 100)
        #expect(page.messages.map(\.offset) == [9, 10] && page.hasMore)
        let inbox = RecordingInbox()
        try hub.subscribe(9, as: carol, to: lobby, inbox: inbox, historyCount: 10)
        let snapshot = try #require(inbox.snapshots.first)
        #expect(snapshot.history.map(\.offset) == [9, 10])
        // Subscribing again (already in) answers from memory, bounded the same way.
        try hub.subscribe(9, as: carol, to: lobby, inbox: inbox, historyCount: 10)
        #expect(inbox.snapshots.last?.history.count ?? 0 <= 2)
    }

    /// A resume (`since`) from the store goes page by page, each page also bounded in bytes.
    @Test func replayPagesAreBoundedInBytes() throws {
        var configuration = HubConfiguration()
        configuration.historyPageBytes = 25_000
        configuration.historyCapacity = 1
        let hub = Hub(configuration: configuration, store: InMemoryMessageStore())
        let big = JSONValue.string(String(repeating: "x", count: 10_000))
        for _ in 1...6 { try hub.publish(big, to: lobby, from: alice) }
        let inbox = RecordingInbox()
        try hub.subscribe(9, as: carol, to: lobby, inbox: inbox, since: 0)
        let snapshot = try #require(inbox.snapshots.first)
        // Two fit in 25,000 bytes; a page may pass its budget by the one message that ends it.
        #expect(snapshot.replay.map(\.offset) == [1, 2, 3])
        #expect(!snapshot.replayComplete)
        var offsets = snapshot.replay.map(\.offset)
        for _ in 0..<5 {
            hub.continueReplay(9, in: lobby)
            guard case .replay(_, _, let page, let complete) = inbox.deliveries.last else { break }
            #expect(page.count <= 3)
            offsets += page.map(\.offset)
            if complete { break }
        }
        #expect(offsets == Array(1...6))
    }

    @Test func typingExpiresAndIsAnnounced() throws {
        let clock = ManualClock()
        var configuration = HubConfiguration()
        configuration.typingTimeoutMillis = 1000
        let hub = Hub(configuration: configuration, clock: clock)
        let inbox = RecordingInbox()
        try hub.subscribe(1, as: alice, to: lobby, inbox: inbox)
        try hub.publish(["typing": true], to: lobby, from: bob)
        #expect(hub.typingMembers(of: lobby) == [bob])
        inbox.clear()
        clock.advance(millis: 500)
        hub.expireTyping()
        #expect(inbox.events.isEmpty)
        clock.advance(millis: 600)
        hub.expireTyping()
        #expect(hub.typingMembers(of: lobby).isEmpty)
        guard case .message(let stop) = inbox.events.first else { Issue.record("no typing stop"); return }
        #expect(stop.sender == bob)
        #expect(Message.typingState(of: stop.body) == false)
        #expect(stop.offset == 0)
    }

    @Test func sendingAMessageClearsTyping() throws {
        let hub = Hub()
        try hub.publish(["typing": true], to: lobby, from: bob)
        try hub.publish("done", to: lobby, from: bob)
        #expect(hub.typingMembers(of: lobby).isEmpty)
    }

    @Test func historyIsBoundedAndPagesBackwards() throws {
        var configuration = HubConfiguration()
        configuration.historyCapacity = 10
        let hub = Hub(configuration: configuration)
        for i in 1...25 { try hub.publish(.number(JSONNumber(i)), to: lobby, from: nil) }
        let newest = try hub.historyNow(of: lobby, limit: 4)
        #expect(newest.messages.map(\.offset) == [22, 23, 24, 25])
        #expect(newest.hasMore)
        let older = try hub.historyNow(of: lobby, before: 22, limit: 100)
        #expect(older.messages.map(\.offset) == Array(16...21))
        #expect(!older.hasMore)
    }

    /// Rooms someone is in count against the bound; idle ones leave memory to make room
    /// (SingleNodeBrokerRoomTableTests).
    @Test func roomLimitIsEnforced() throws {
        var configuration = HubConfiguration()
        configuration.maxRooms = 2
        let hub = Hub(configuration: configuration)
        let inbox = RecordingInbox()
        try hub.subscribe(1, as: alice, to: RoomKey(channel: "c", room: "1"), inbox: inbox)
        try hub.subscribe(1, as: alice, to: RoomKey(channel: "c", room: "2"), inbox: inbox)
        #expect(throws: ParleyError.self) { try hub.publish("c", to: RoomKey(channel: "c", room: "3"), from: nil) }
    }

    @Test func occupiedRoomsListsRoomsWithMembers() async throws {
        let hub = Hub()
        let inbox = RecordingInbox()
        try hub.subscribe(1, as: alice, to: RoomKey(channel: "demo", room: "b"), inbox: inbox)
        try hub.subscribe(1, as: alice, to: RoomKey(channel: "demo", room: "a"), inbox: inbox)
        try hub.publishNow("x", to: RoomKey(channel: "demo", room: "empty"), from: nil)
        try hub.subscribe(2, as: bob, to: RoomKey(channel: "other", room: "z"), inbox: inbox)
        #expect(try await hub.occupiedRooms(in: "demo", limit: 10) == ["a", "b"])
    }
}

/// A door's ``RoomMirror`` and the hub's own view of a room follow one set of rules
/// (``RoomPresence``): fed what the hub delivers, the mirror ends where the hub is.
@Suite struct RoomMirrorAgreesWithTheHubTests {
    @Test func mirrorFedTheHubsDeliveriesShowsTheHubsMembersAndTypists() throws {
        let hub = Hub()
        let inbox = RecordingInbox()
        try hub.subscribe(1, as: alice, to: lobby, inbox: inbox)
        let snapshot = try #require(inbox.snapshots.last)
        var mirror = RoomMirror(members: snapshot.members, typing: hub.typingMembers(of: lobby))
        inbox.clear()
        try hub.subscribe(2, as: bob, to: lobby, inbox: RecordingInbox())
        try hub.subscribe(3, as: carol, to: lobby, inbox: RecordingInbox())
        try hub.publish(["typing": true], to: lobby, from: bob)
        try hub.publish(["typing": true], to: lobby, from: carol)
        try hub.publish(["typing": true], to: lobby, from: alice)
        try hub.publishNow("hi", to: lobby, from: bob)
        try hub.publish(["typing": false], to: lobby, from: alice)
        #expect(hub.unsubscribe(3, from: lobby))
        try hub.publishNow("from the server", to: lobby, from: nil)
        for event in inbox.events { mirror.apply(event) }
        #expect(mirror.members == hub.members(of: lobby))
        #expect(mirror.typing == hub.typingMembers(of: lobby))
        #expect(mirror == RoomMirror(members: [alice, bob], typing: []))
    }
}

@Suite struct RoomPartsTests {
    @Test func historyRingKeepsTheNewest() {
        var history = MessageHistory(capacity: 3)
        let key = RoomKey(channel: "c", room: "r")
        for i in 1...7 { history.append(Message(id: "\(i)", offset: Int64(i), timestampMillis: 0, room: key, sender: nil, body: "x")) }
        #expect(history.all.map(\.offset) == [5, 6, 7])
        #expect(history.latest(2).map(\.offset) == [6, 7])
        #expect(history.latest(0).isEmpty)
        #expect(history.after(5).map(\.offset) == [6, 7])
    }

    /// The cache keeps what the stores keep: an edit that comes after its target's delete
    /// (it passed its checks just before) is a tombstone, so a replay from memory shows no
    /// text of the deleted message.
    @Test func anEditAfterItsTargetsDeleteKeepsNoText() {
        var history = MessageHistory(capacity: 10)
        let key = RoomKey(channel: "c", room: "r")
        let first = Message(id: "1", offset: 1, timestampMillis: 0, room: key, sender: nil, body: "secret")
        let target = MessageReference(id: "1", offset: 1)
        history.append(first)
        history.append(Message(id: "2", offset: 2, timestampMillis: 0, room: key, sender: nil, body: .null,
                               action: MessageAction(.delete, target: target)))
        history.append(Message(id: "3", offset: 3, timestampMillis: 0, room: key, sender: nil, body: "secret, edited",
                               action: MessageAction(.edit, target: target)))
        #expect(history.after(0).map(\.isDeleted) == [true, false, true])
        #expect(history.after(2).first?.body == .null)
    }

    @Test func typingTrackerRefreshAndStop() {
        var typing = TypingTracker(timeoutMillis: 100)
        let started = typing.set(alice, typing: true, nowMillis: 0)
        let refreshed = typing.set(alice, typing: true, nowMillis: 50)
        let early = typing.expire(nowMillis: 120)
        let late = typing.expire(nowMillis: 150)
        let stopAfterExpiry = typing.set(alice, typing: false, nowMillis: 160)
        #expect(started)
        #expect(!refreshed)
        #expect(early.isEmpty)
        #expect(late == [alice])
        #expect(!stopAfterExpiry)
    }

    @Test func typingStateRecognisesOnlyTheExactShape() {
        #expect(Message.typingState(of: ["typing": true]) == true)
        #expect(Message.typingState(of: ["typing": false]) == false)
        #expect(Message.typingState(of: ["typing": "yes"]) == nil)
        #expect(Message.typingState(of: ["typing": true, "text": "x"]) == nil)
        #expect(Message.typingState(of: "typing") == nil)
    }

    @Test func roomKeyParsingAndObservability() {
        #expect(RoomKey(parsing: "demo/observable-room") == RoomKey(channel: "demo", room: "observable-room"))
        #expect(RoomKey(parsing: "demo")  == nil)
        #expect(RoomKey(parsing: "/room") == nil)
        #expect(RoomKey(channel: "d", room: "observable-x").isObservable)
        #expect(!RoomKey(channel: "d", room: "plain").isObservable)
    }

    @Test func nameColorsAreStableHex() {
        let color = NameColor.color(for: "alice")
        #expect(color == NameColor.color(for: "alice"))
        #expect(color.count == 7 && color.hasPrefix("#"))
        #expect(color.dropFirst().allSatisfy { $0.isHexDigit })
        #expect(NameColor.color(for: "bob") != color)
    }

    @Test func tokenBucketRefills() {
        var bucket = TokenBucket(ratePerSecond: 10, burst: 2)
        let results = [0, 0, 0, 100, 100].map { bucket.take(nowMillis: Int64($0)) }
        #expect(results == [true, true, false, true, false])
    }

    @Test func displayNameFallsBackToID() {
        #expect(alice.displayName == "alice")
        #expect(carol.displayName == "c3")
    }
}

@Suite struct LoopHubTests {
    final class Session: RoomSubscriber {
        let sessionID: SessionID
        let wireFormat: WireFormat
        var frames: [String] = []
        var snapshots: [SubscribeSnapshot] = []
        init(_ id: SessionID, _ format: Int) { sessionID = id; wireFormat = WireFormat(format) }
        func receive(_ event: RoomEvent, in room: RoomKey, frame: String?) { if let frame { frames.append(frame) } }
        func didSubscribe(_ snapshot: SubscribeSnapshot) { snapshots.append(snapshot) }
        func didUnsubscribe(from room: RoomKey) {}
    }

    @Test func encodesOncePerFormatAndSharesTheFrame() throws {
        let local = LoopHub<String> { format, _, event in
            guard case .message(let m) = event else { return nil }
            return "f\(format.rawValue):\(m.body.stringValue ?? "")"
        }
        let sessions = (1...30).map { Session(SessionID($0), $0 % 3) }
        let hub = Hub()
        final class Forward: Inbox {
            let log = Mutex<[Delivery]>([])
            func post(_ delivery: Delivery) { log.withLock { $0.append(delivery) } }
        }
        let inbox = Forward()
        for session in sessions {
            local.register(session)
            try hub.subscribe(session.sessionID, as: Member(id: "\(session.sessionID)"), to: lobby, inbox: inbox)
        }
        for delivery in inbox.log.withLock({ $0 }) { local.handle(delivery) }
        inbox.log.withLock { $0.removeAll() }
        let before = local.encodeCount
        try hub.publish("hey", to: lobby, from: nil)
        for delivery in inbox.log.withLock({ $0 }) { local.handle(delivery) }
        #expect(local.encodeCount - before == 3)
        for session in sessions {
            #expect(session.frames.last == "f\(session.wireFormat.rawValue):hey")
            #expect(session.snapshots.count == 1)
        }
    }

    /// A session that takes runs of messages in one frame (or refuses them).
    final class RunSession: RoomSubscriber {
        let sessionID: SessionID
        let wireFormat: WireFormat
        let takesRuns: Bool
        var frames: [String] = []
        /// Every session's receipts in the order they came, when shared.
        let log: Log?
        final class Log { var entries: [String] = [] }
        init(_ id: SessionID, takesRuns: Bool, format: Int = 1, log: Log? = nil) {
            sessionID = id
            self.takesRuns = takesRuns
            wireFormat = WireFormat(format)
            self.log = log
        }
        func receive(_ event: RoomEvent, in room: RoomKey, frame: String?) {
            guard let frame else { return }
            frames.append(frame)
            log?.entries.append("\(sessionID):\(frame)")
        }
        func receive(run events: ArraySlice<RoomEvent>, in room: RoomKey, frames: String) {
            #expect(takesRuns, "given a run it does not take")
            self.frames.append(frames)
        }
        func didSubscribe(_ snapshot: SubscribeSnapshot) {}
        func didUnsubscribe(from room: RoomKey) {}
    }

    @Test func consecutiveMessagesOfARoomReachRunTakersAsOneJoinedFrame() throws {
        let other = RoomKey(channel: "demo", room: "other")
        let local = LoopHub<String>(encode: { _, room, event in
            guard case .message(let m) = event else { return nil }
            return "\(room.room):\(m.body.stringValue ?? "")|"
        }, join: { $0.joined() })
        let takes = RunSession(1, takesRuns: true), refuses = RunSession(2, takesRuns: false)
        for session in [takes, refuses] {
            local.register(session)
            for room in [lobby, other] {
                local.handle(.subscribed(session.sessionID, SubscribeSnapshot(room: room, members: [], history: [], lastOffset: 0)))
            }
        }
        func message(_ text: String, _ room: RoomKey, _ offset: Int64) -> Delivery {
            .event(room, .message(Message(id: "m\(text)", offset: offset, timestampMillis: 1, room: room, sender: nil, body: .string(text))))
        }
        // Three in the lobby, one elsewhere (it ends the run), two more in the lobby.
        local.handle([message("a", lobby, 1), message("b", lobby, 2), message("c", lobby, 3),
                      message("x", other, 1), message("d", lobby, 4), message("e", lobby, 5)])
        #expect(takes.frames == ["observable-room:a|observable-room:b|observable-room:c|", "other:x|",
                                 "observable-room:d|observable-room:e|"])
        #expect(refuses.frames == ["observable-room:a|", "observable-room:b|", "observable-room:c|", "other:x|",
                                   "observable-room:d|", "observable-room:e|"])
        // Each message encoded once per format, whoever takes it how.
        #expect(local.encodeCount == 6)
    }

    /// An encoder that keeps state across formats (Socket.IO's) must see each event for every
    /// format before the next, and a subscriber taking messages one by one must get each
    /// event after every other's previous one, as without runs; the run-taker beside them
    /// still gets its run in one frame.
    @Test func aRunIsEncodedEventByEventForEveryFormat() throws {
        var calls: [String] = []
        let local = LoopHub<String>(encode: { format, _, event in
            guard case .message(let m) = event else { return nil }
            calls.append("\(format.rawValue):\(m.body.stringValue ?? "")")
            return "\(m.body.stringValue ?? "")|"
        }, join: { $0.joined() })
        let log = RunSession.Log()
        let native = RunSession(1, takesRuns: true), socket = RunSession(2, takesRuns: false, format: 30, log: log)
        let other = RunSession(3, takesRuns: false, format: 30, log: log)
        for session in [native, socket, other] {
            local.register(session)
            local.handle(.subscribed(session.sessionID, SubscribeSnapshot(room: lobby, members: [], history: [], lastOffset: 0)))
        }
        local.handle(["a", "b"].enumerated().map { index, text in
            .event(lobby, .message(Message(id: text, offset: Int64(index + 1), timestampMillis: 1, room: lobby, sender: nil, body: .string(text))))
        })
        #expect(calls == ["1:a", "30:a", "1:b", "30:b"])
        #expect(native.frames == ["a|b|"])
        #expect(socket.frames == ["a|", "b|"])
        #expect(other.frames == ["a|", "b|"])
        #expect(log.entries == ["2:a|", "3:a|", "2:b|", "3:b|"])
    }

    @Test func unregisteredSessionsGetNothing() throws {
        let local = LoopHub<String> { _, _, _ in "x" }
        let session = Session(1, 0)
        local.register(session)
        let snapshot = SubscribeSnapshot(room: lobby, members: [], history: [], lastOffset: 0)
        local.handle(.subscribed(1, snapshot))
        #expect(local.subscribers(of: lobby).count == 1)
        local.unregister(1)
        #expect(local.subscribers(of: lobby).isEmpty)
        local.handle(.subscribed(1, snapshot))
        #expect(local.subscribers(of: lobby).isEmpty)
    }
}

@Suite struct HubChannelQueryTests {
    @Test func roomMembersAndClientIDsSpanTheChannel() async throws {
        let hub = Hub()
        let inbox = RecordingInbox()
        let other = RoomKey(channel: "demo", room: "b-room")
        try hub.subscribe(1, as: alice, to: lobby, inbox: inbox)
        try hub.subscribe(2, as: bob, to: lobby, inbox: inbox)
        try hub.subscribe(1, as: alice, to: other, inbox: inbox)
        try hub.subscribe(3, as: carol, to: RoomKey(channel: "elsewhere", room: "x"), inbox: inbox)
        let listing = try await hub.roomMembers(in: "demo", limit: 100)
        #expect(listing.map(\.room) == ["b-room", "observable-room"])
        #expect(listing.map { $0.members.map(\.id) } == [["a1"], ["a1", "b2"]])
        #expect(try await hub.clientIDs(in: "demo") == ["a1", "b2"])
        hub.unsubscribe(1, from: other)
        #expect(try await hub.roomMembers(in: "demo", limit: 100).map(\.room) == ["observable-room"])
        #expect(try await hub.clientIDs(in: "nobody").isEmpty)
    }
}

@Suite struct HubMemoryTests {
    /// Rooms used once and left leave memory (hub and broker); their history stays stored.
    @Test func aHundredThousandRoomsUsedOnceAndLeftLeaveMemory() throws {
        let clock = ManualClock()
        var configuration = HubConfiguration()
        configuration.roomIdleMillis = 1_000
        let hub = Hub(configuration: configuration, clock: clock)
        let inbox = RecordingInbox()
        for n in 0..<100_000 {
            let key = RoomKey(channel: "many", room: "r\(n)")
            try hub.subscribe(SessionID(n + 1), as: Member(id: "m\(n)"), to: key, inbox: inbox)
            try hub.publishNow(.string("hello \(n)"), to: key, from: nil)
            #expect(hub.unsubscribe(SessionID(n + 1), from: key))
            if n % 10_000 == 0 { inbox.clear() }
        }
        let broker = try #require(hub.broker as? SingleNodeBroker)
        #expect(hub.roomsInMemory == 100_000)
        #expect(hub.historyBudget?.bytes ?? 0 > 0)
        // Not idle long enough yet: nothing goes.
        #expect(hub.evictIdleRooms() == 0)
        clock.advance(millis: 1_500)
        #expect(hub.evictIdleRooms() == 100_000)
        #expect(hub.roomsInMemory == 0)
        #expect(broker.roomsInMemory == 0)
        #expect(hub.historyBudget?.bytes == 0)
        // History is still there, and the offsets go on.
        let key = RoomKey(channel: "many", room: "r42")
        #expect(try hub.historyNow(of: key, limit: 10).messages.map(\.body) == ["hello 42"])
        #expect(try hub.publishNow("again", to: key, from: nil).offset == 2)
    }

    /// The history cache is bounded in bytes per room, and by a budget shared by every room.
    @Test func historyCacheIsBoundedInBytes() throws {
        let key = RoomKey(channel: "c", room: "big")
        var history = MessageHistory(capacity: 1_000, maxBytes: 10_000)
        for n in 1...100 {
            history.append(Message(id: "\(n)", offset: Int64(n), timestampMillis: 0, room: key, sender: nil,
                                   body: .string(String(repeating: "x", count: 500))))
        }
        #expect(history.bytes <= 10_000)
        #expect(history.count < 100)
        #expect(history.all.last?.offset == 100)
        #expect(history.all.map(\.offset) == Array((101 - Int64(history.count))...100))
        let budget = HistoryBudget(limit: 5_000)
        var one = MessageHistory(capacity: 1_000, budget: budget), two = MessageHistory(capacity: 1_000, budget: budget)
        for n in 1...20 {
            let message = Message(id: "\(n)", offset: Int64(n), timestampMillis: 0, room: key, sender: nil, body: .string(String(repeating: "y", count: 400)))
            one.append(message)
            two.append(message)
            #expect(budget.bytes <= 5_000)
        }
        #expect(one.all.last?.offset == 20)
        #expect(two.all.last?.offset == 20)
        two.removeAll()
        one.removeAll()
        #expect(budget.bytes == 0)
    }
}

/// An inbox that holds room events without finishing them (a loop that has fallen behind).
final class HoldingInbox: Inbox {
    let held = Mutex<[RoomBacklog]>([])
    func post(_ delivery: Delivery) {}
    func post(_ delivery: Delivery, completing backlog: RoomBacklog) { held.withLock { $0.append(backlog) } }
    /// Finishes the oldest `count` held events.
    func finish(_ count: Int) {
        let batch = held.withLock { held in
            let batch = Array(held.prefix(count))
            held.removeFirst(batch.count)
            return batch
        }
        for backlog in batch { backlog.done() }
    }
}

@Suite struct BackPressureTests {
    @Test func aRoomBehindItsDeliveriesSlowsItsPublishersOnlyUntilItCatchesUp() throws {
        var configuration = HubConfiguration()
        configuration.backlogHighMark = 10
        let hub = Hub(configuration: configuration)
        let slow = HoldingInbox(), fast = RecordingInbox()
        let roomA = RoomKey(channel: "c", room: "a"), roomB = RoomKey(channel: "c", room: "b")
        try hub.subscribe(1, as: alice, to: roomA, inbox: slow)
        try hub.subscribe(2, as: bob, to: roomB, inbox: fast)
        var overAt: Int?
        for n in 1...20 {
            let backlog = try #require(try hub.publish(.number(JSONNumber(n)), to: roomA, from: nil))
            if backlog.isOverHigh && overAt == nil { overAt = n }
        }
        #expect(overAt == 11)
        // Another room is not slowed.
        for n in 1...20 {
            let backlog = try #require(try hub.publish(.number(JSONNumber(n)), to: roomB, from: nil))
            #expect(!backlog.isOverHigh)
        }
        let resumed = Mutex(false)
        let backlog = try #require(try hub.publish("one more", to: roomA, from: nil))
        backlog.whenBelowLowMark { resumed.withLock { $0 = true } }
        #expect(!resumed.withLock { $0 })
        slow.finish(10)
        #expect(!resumed.withLock { $0 })
        slow.finish(6)
        #expect(resumed.withLock { $0 })
        #expect(backlog.count == 5)
    }
}

/// The hub's history cache keeps actions by the stores' rule: a subscriber's snapshot (from
/// memory) shows what a history page from the store shows, and its replay is the log.
@Suite struct HubMessageActionTests {
    func act(_ hub: Hub, _ kind: MessageAction.Kind, on target: Message, by sender: Member, body: JSONValue = .null,
             emoji: String? = nil) throws -> Message {
        let result = Mutex<Result<Message, ParleyError>?>(nil)
        try hub.publish(body, to: target.room, from: sender,
                        action: MessageAction(kind, target: MessageReference(id: target.id, offset: target.offset), emoji: emoji)) { outcome in
            result.withLock { $0 = outcome }
        }
        return try #require(result.withLock { $0 }).get()
    }

    @Test(arguments: [1_000, 4])
    func snapshotsShowTheCurrentStateAndReplayTheLog(historyCapacity: Int) throws {
        var configuration = HubConfiguration()
        configuration.historyCapacity = historyCapacity
        let hub = Hub(configuration: configuration, store: InMemoryMessageStore())
        let room = RoomKey(channel: "demo", room: "r")
        try hub.subscribe(1, as: alice, to: room, inbox: RecordingInbox())
        let first = try hub.publishNow("helo", to: room, from: alice)
        let second = try hub.publishNow("secret", to: room, from: bob)
        _ = try act(hub, .edit, on: first, by: alice, body: "hello")
        _ = try act(hub, .react, on: first, by: bob, emoji: "👍")
        _ = try act(hub, .edit, on: second, by: bob, body: "more secret")
        _ = try act(hub, .delete, on: second, by: bob)
        _ = try act(hub, .react, on: first, by: carol, emoji: "👍")

        let inbox = RecordingInbox()
        try hub.subscribe(2, as: carol, to: room, inbox: inbox, historyCount: 2, since: 0)
        let snapshot = try #require(inbox.snapshots.last)
        let stored = try hub.historyNow(of: room, limit: 2).messages
        #expect(snapshot.history == stored, "memory and the store agree (capacity \(historyCapacity))")
        #expect(snapshot.history.map(\.offset) == [1, 2])
        #expect(snapshot.history[0].body == "hello" && snapshot.history[0].reactions.first?.count == 2)
        #expect(snapshot.history[1].isDeleted)
        #expect(snapshot.replay.map(\.offset) == Array(1...7), "the log, actions included")
        #expect(snapshot.replay[0].body == "helo", "a replayed message is as it was sent")
        #expect(snapshot.replay[4].isDeleted, "the edit of a deleted message lost its text")
    }
}

/// The hub's stored-message observer (push notifications) is called once per message, for the
/// life of the server: a call must cost the same on the thousandth message as on the first.
@Suite struct HubObserverTests {
    /// Stack depth inside each call. Stored as a bare closure in a `Mutex` and read out per
    /// message, the observer gained a reabstraction thunk per read: the depth grew with every
    /// message (so did the time).
    @Test func theObserverIsCalledThroughTheSameFramesEveryTime() throws {
        let hub = Hub()
        let depths = Mutex<[Int]>([])
        hub.observeStored { _ in depths.withLock { $0.append(Thread.callStackSymbols.count) } }
        for index in 0..<40 { try hub.publish(.string("m\(index)"), to: lobby, from: nil) }
        let seen = depths.withLock { $0 }
        #expect(seen.count == 40)
        // The first may come another way (a room loading); every later one the same.
        #expect(Set(seen.dropFirst()).count == 1, "stack depths \(seen)")
    }

    /// A retried publish (the same `message_id`) answers with the original message and is
    /// not observed again: in a cluster the retry may land on another node, whose push
    /// planner never saw the first, and would push it twice.
    @Test func aRetriedPublishIsObservedOnce() throws {
        let hub = Hub()
        let seen = Mutex<[String]>([])
        hub.observeStored { message in seen.withLock { $0.append(message.id) } }
        let first = try hub.publishNow("hi", to: lobby, from: alice, messageID: "m-1")
        let retry = try hub.publishNow("hi", to: lobby, from: alice, messageID: "m-1")
        #expect(retry.id == first.id && retry.offset == first.offset)
        _ = try hub.publishNow("next", to: lobby, from: alice, messageID: "m-2")
        #expect(seen.withLock { $0 }.count == 2)
        #expect(seen.withLock { $0 }.first == first.id)
    }
}
