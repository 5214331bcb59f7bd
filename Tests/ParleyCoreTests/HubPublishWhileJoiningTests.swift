import Synchronization
import Testing
@testable import ParleyCore

/// A broker (over a SingleNodeBroker) that keeps joins back while told to, as a cluster
/// broker does while the join goes round Redis, and lets them through on `release()`.
final class SlowJoinBroker: Broker {
    let inner = SingleNodeBroker(store: InMemoryMessageStore())
    private let held = Mutex<(holding: Bool, joins: [(RoomEvent, RoomKey)])>((false, []))

    func hold() { held.withLock { $0.holding = true } }
    func release() {
        let joins = held.withLock { state in
            defer { state = (false, []) }
            return state.joins
        }
        for (event, room) in joins { inner.broadcast(event, in: room) }
    }

    func setDelivery(_ delivery: any BrokerDelivery) { inner.setDelivery(delivery) }
    func publish(_ message: Message, clientMessageID: String?,
                 completion: @escaping @Sendable (Result<Message, ParleyError>) -> Void) throws(ParleyError) {
        try inner.publish(message, clientMessageID: clientMessageID, completion: completion)
    }
    func broadcast(_ event: RoomEvent, in room: RoomKey) {
        if case .memberJoined = event {
            let kept = held.withLock { state -> Bool in
                guard state.holding else { return false }
                state.joins.append((event, room))
                return true
            }
            if kept { return }
        }
        inner.broadcast(event, in: room)
    }
    func subscribe(_ room: RoomKey, completion: @escaping @Sendable (Result<RoomPosition, ParleyError>) -> Void) {
        inner.subscribe(room, completion: completion)
    }
    func unsubscribe(_ room: RoomKey) { inner.unsubscribe(room) }
    var store: any MessageStore { inner.store }
    func evictIdle(nowMillis: Int64, idleMillis: Int64) -> Int { inner.evictIdle(nowMillis: nowMillis, idleMillis: idleMillis) }
}

/// An inbox like a loop's: it records deliveries and runs the hub's `.perform` work when
/// the test drains it (never inside `post`, where the hub may hold locks).
final class DrainedInbox: Inbox {
    private let log = Mutex<(deliveries: [Delivery], work: [@Sendable () -> Void])>(([], []))
    func post(_ delivery: Delivery) {
        log.withLock { log in
            if case .perform(let work) = delivery { log.work.append(work) } else { log.deliveries.append(delivery) }
        }
    }
    /// Runs the work posted so far; returns how much there was.
    @discardableResult
    func drain() -> Int {
        let work = log.withLock { log in
            defer { log.work = [] }
            return log.work
        }
        for item in work { item() }
        return work.count
    }
    var events: [RoomEvent] {
        log.withLock { $0.deliveries }.compactMap { if case .event(_, let event) = $0 { event } else { nil } }
    }
    var snapshots: Int {
        log.withLock { $0.deliveries }.filter { if case .subscribed = $0 { true } else { false } }.count
    }
}

private let room = RoomKey(channel: "demo", room: "observable-joining")
private let alice = Member(id: "a1", clientData: ["name": "alice"])
private let bob = Member(id: "b2", clientData: ["name": "bob"])

/// Results of publishes, by body.
private final class Outcomes: Sendable {
    let results = Mutex<[String: Result<Message, ParleyError>]>([:])
    func record(_ text: String) -> @Sendable (Result<Message, ParleyError>) -> Void {
        { result in self.results.withLock { $0[text] = result } }
    }
    subscript(_ text: String) -> Result<Message, ParleyError>? { results.withLock { $0[text] } }
}

@Suite struct HubPublishWhileJoiningTests {
    @Test func aPublishMadeWhileTheJoinIsOnItsWayGoesOutAfterTheJoin() throws {
        let broker = SlowJoinBroker()
        let hub = Hub(broker: broker, presence: MemoryPresenceStore())
        let bobs = DrainedInbox(), alices = DrainedInbox()
        try hub.subscribe(2, as: bob, to: room, inbox: bobs)
        broker.hold()
        try hub.subscribe(1, as: alice, to: room, inbox: alices)
        let outcomes = Outcomes()
        try hub.publish("first", to: room, from: alice, session: 1, whenStored: outcomes.record("first"))
        try hub.publish("second", to: room, from: alice, session: 1, whenStored: outcomes.record("second"))
        #expect(outcomes["first"] == nil, "nothing is stored before the join is back")
        #expect(bobs.events.isEmpty)

        broker.release()
        #expect(bobs.events.map(\.kind) == ["join"])
        // Sent between the join's arrival and the inbox's turn: it queues behind the others.
        try hub.publish("third", to: room, from: alice, session: 1, whenStored: outcomes.record("third"))
        #expect(outcomes["third"] == nil)
        #expect(alices.drain() == 1, "the held publishes go out from the session's inbox")
        #expect(bobs.events.map(\.kind) == ["join", "message", "message", "message"], "the join comes first: \(bobs.events)")
        #expect(bobs.events.compactMap(\.text) == ["first", "second", "third"])
        // Alice gets her own messages live, after her snapshot.
        #expect(alices.snapshots == 1)
        #expect(alices.events.compactMap(\.text) == ["first", "second", "third"])
        #expect((try outcomes["first"]?.get())?.offset == 1)
        #expect((try outcomes["third"]?.get())?.offset == 3)
        // Live now: the next one goes out at once.
        try hub.publish("fourth", to: room, from: alice, session: 1, whenStored: outcomes.record("fourth"))
        #expect((try outcomes["fourth"]?.get())?.offset == 4)
    }

    @Test func aLiveSessionOrOneNotInTheRoomPublishesAtOnce() throws {
        let broker = SlowJoinBroker()
        let hub = Hub(broker: broker, presence: MemoryPresenceStore())
        try hub.subscribe(2, as: bob, to: room, inbox: DrainedInbox())
        broker.hold()
        let outcomes = Outcomes()
        try hub.publish("live", to: room, from: bob, session: 2, whenStored: outcomes.record("live"))
        try hub.publish("outsider", to: room, from: alice, session: 9, whenStored: outcomes.record("outsider"))
        #expect((try outcomes["live"]?.get())?.offset == 1)
        #expect((try outcomes["outsider"]?.get())?.offset == 2)
    }

    @Test func whatWaitsForTheJoinIsBoundedAndFailsWhenTheSessionLeaves() throws {
        let broker = SlowJoinBroker()
        var configuration = HubConfiguration()
        configuration.maxPublishesAwaitingJoin = 2
        let hub = Hub(configuration: configuration, broker: broker, presence: MemoryPresenceStore())
        try hub.subscribe(2, as: bob, to: room, inbox: DrainedInbox())
        broker.hold()
        let alices = DrainedInbox()
        try hub.subscribe(1, as: alice, to: room, inbox: alices)
        let outcomes = Outcomes()
        try hub.publish("one", to: room, from: alice, session: 1, whenStored: outcomes.record("one"))
        try hub.publish("two", to: room, from: alice, session: 1, whenStored: outcomes.record("two"))
        #expect(throws: ParleyError.self) {
            try hub.publish("three", to: room, from: alice, session: 1, whenStored: outcomes.record("three"))
        }
        #expect(hub.unsubscribe(1, from: room))
        guard case .failure(let error) = outcomes["one"] else { Issue.record("expected a failure: \(String(describing: outcomes["one"]))"); return }
        #expect(error.code == .unavailable)
        if case .success = outcomes["two"] { Issue.record("a held publish of a session that left was sent") }
        broker.release()
        #expect(alices.drain() == 0)
        let page = try hub.historyNow(of: room, limit: 10)
        #expect(page.messages.isEmpty, "nothing of a session that left before its join is stored")
    }
}

private extension RoomEvent {
    var kind: String {
        switch self {
        case .memberJoined: "join"
        case .memberLeft: "leave"
        case .message: "message"
        default: "other"
        }
    }
    var text: String? {
        if case .message(let message) = self { message.body.stringValue } else { nil }
    }
}
