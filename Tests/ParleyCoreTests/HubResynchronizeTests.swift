import Synchronization
import Testing
@testable import ParleyCore

/// A broker (over a SingleNodeBroker) that loses joins while told to, and can ask its hub to
/// rebuild a room, as a cluster broker does after a lost connection.
final class LossyBroker: Broker {
    let inner = SingleNodeBroker(store: InMemoryMessageStore())
    let losingJoins = Mutex(false)
    private let delivery = Mutex<(any BrokerDelivery)?>(nil)

    func setDelivery(_ delivery: any BrokerDelivery) {
        self.delivery.withLock { $0 = delivery }
        inner.setDelivery(delivery)
    }
    func publish(_ message: Message, clientMessageID: String?,
                 completion: @escaping @Sendable (Result<Message, ParleyError>) -> Void) throws(ParleyError) {
        try inner.publish(message, clientMessageID: clientMessageID, completion: completion)
    }
    func broadcast(_ event: RoomEvent, in room: RoomKey) {
        if case .memberJoined = event, losingJoins.withLock({ $0 }) { return }
        inner.broadcast(event, in: room)
    }
    func subscribe(_ room: RoomKey, completion: @escaping @Sendable (Result<RoomPosition, ParleyError>) -> Void) {
        inner.subscribe(room, completion: completion)
    }
    func unsubscribe(_ room: RoomKey) { inner.unsubscribe(room) }
    var store: any MessageStore { inner.store }
    func evictIdle(nowMillis: Int64, idleMillis: Int64) -> Int { inner.evictIdle(nowMillis: nowMillis, idleMillis: idleMillis) }

    func resynchronize(_ room: RoomKey) { delivery.withLock { $0 }?.broker(resynchronize: room) }
}

@Suite struct HubResynchronizeTests {
    @Test func aSubscribeWhoseJoinWasLostCompletesWhenTheRoomIsRebuilt() throws {
        let broker = LossyBroker()
        let hub = Hub(broker: broker, presence: MemoryPresenceStore())
        let room = RoomKey(channel: "demo", room: "observable-lossy")
        let alice = Member(id: "a"), bob = Member(id: "b")
        let first = RecordingInbox(), second = RecordingInbox()
        try hub.subscribe(1, as: alice, to: room, inbox: first)
        #expect(first.snapshots.count == 1)
        broker.losingJoins.withLock { $0 = true }
        try hub.subscribe(2, as: bob, to: room, inbox: second)
        #expect(second.snapshots.isEmpty, "its join was lost: the subscribe waits")
        broker.losingJoins.withLock { $0 = false }
        broker.resynchronize(room)
        #expect(second.snapshots.last?.members == [alice, bob])
        #expect(first.events == [.memberJoined(bob)])
        #expect(hub.members(of: room) == [alice, bob])
    }

    /// An operator's delete reaches the other nodes as an event, not as an entry of the log: a
    /// node that lost it (its subscription connection dropped) would go on serving the text
    /// from its history in memory. Rebuilding the room starts that history over; the store has
    /// the tombstone.
    @Test func aRebuiltRoomServesNoDeletedTextFromMemory() throws {
        let broker = LossyBroker()
        let hub = Hub(broker: broker, presence: MemoryPresenceStore())
        let room = RoomKey(channel: "demo", room: "lossy")
        let watcher = RecordingInbox()
        try hub.subscribe(1, as: Member(id: "w"), to: room, inbox: watcher)
        try hub.publish("secret", to: room, from: Member(id: "a"))
        try hub.publish("later", to: room, from: Member(id: "a"))
        // The tombstone is stored; the event that tells this node is lost.
        let deleted = Mutex<Bool?>(nil)
        broker.store.deleteMessage(in: room, offset: 1) { result in deleted.withLock { $0 = try? result.get() } }
        #expect(deleted.withLock { $0 } == true)
        let before = RecordingInbox()
        try hub.subscribe(2, as: Member(id: "b"), to: room, inbox: before, historyCount: 10)
        #expect(before.snapshots.last?.history.first?.body == "secret", "served from memory: the case being fixed")
        broker.resynchronize(room)
        let after = RecordingInbox()
        try hub.subscribe(3, as: Member(id: "c"), to: room, inbox: after, historyCount: 10)
        let history = try #require(after.snapshots.last?.history)
        #expect(history.map(\.offset) == [1, 2])
        #expect(history.first?.isDeleted == true && history.first?.body == .null, "\(history)")
    }
}
