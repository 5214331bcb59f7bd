import Testing
import ParleyCore

/// The single-node broker's table of rooms in memory is bounded, and filling it with
/// made-up rooms must not lock everyone else out: events for a room with nobody in it make
/// no entry, and a full table forgets the rooms idle now instead of refusing.
@Suite struct SingleNodeBrokerRoomTableTests {
    private func room(_ n: Int) -> RoomKey { RoomKey(channel: "demo", room: "r\(n)") }

    @Test func anEventForARoomNotInMemoryMakesNoEntry() async throws {
        let broker = SingleNodeBroker(store: InMemoryMessageStore())
        for n in 0..<100 { broker.broadcast(.message(draft("typing", in: room(n))), in: room(n)) }
        #expect(broker.roomsInMemory == 0)
        // A room someone is in still hears them.
        let deliveries = DeliveryRecorder()
        broker.setDelivery(deliveries)
        _ = try await broker.subscribe(room(1))
        broker.broadcast(.memberJoined(Member(id: "m")), in: room(1))
        #expect(await deliveries.wait(in: room(1)) { $0.count == 1 })
        #expect(broker.roomsInMemory == 1)
    }

    /// Publishes to ever new rooms, past the bound: the rooms unused for a second leave
    /// memory (and come back from the store, their offsets where they were).
    @Test func aFullTableForgetsIdleRoomsInsteadOfRefusing() async throws {
        let clock = ManualClock()
        let broker = SingleNodeBroker(store: InMemoryMessageStore(), clock: clock, maxRooms: 3)
        for n in 0..<10 {
            #expect(try await broker.publish(draft("hello", in: room(n))).offset == 1)
            #expect(broker.roomsInMemory <= 3)
            clock.advance(millis: 1_001)
        }
        #expect(try await broker.publish(draft("again", in: room(0))).offset == 2)
        // A room used within the last second stays: the bound refuses instead.
        _ = try await broker.publish(draft("x", in: room(1)))
        _ = try await broker.publish(draft("x", in: room(2)))
        await #expect(throws: ParleyError.self) { try await broker.publish(draft("x", in: room(3))) }
    }

    /// Rooms with a subscriber stay; when none is idle the bound refuses, and the next walk
    /// of the table waits a second.
    @Test func aFullTableOfBusyRoomsRefuses() async throws {
        let clock = ManualClock()
        let broker = SingleNodeBroker(store: InMemoryMessageStore(), clock: clock, maxRooms: 2)
        let deliveries = DeliveryRecorder()
        broker.setDelivery(deliveries)
        _ = try await broker.subscribe(room(1))
        _ = try await broker.subscribe(room(2))
        clock.advance(millis: 5_000)
        await #expect(throws: ParleyError.self) { try await broker.publish(draft("x", in: room(3))) }
        broker.unsubscribe(room(1))
        // Within the second after a walk that found nothing idle: refused without a walk.
        await #expect(throws: ParleyError.self) { try await broker.publish(draft("x", in: room(3))) }
        clock.advance(millis: 1_000)
        #expect(try await broker.publish(draft("x", in: room(3))).offset == 1)
        #expect(broker.roomsInMemory == 2)
        // The subscribed room stayed in memory, subscribed: its messages are delivered.
        _ = try await broker.publish(draft("y", in: room(2)))
        #expect(await deliveries.wait(in: room(2)) { $0.count == 1 })
    }
}
