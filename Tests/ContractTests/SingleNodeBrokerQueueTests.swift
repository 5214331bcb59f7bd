import Foundation
import Synchronization
import Testing
import ParleyCore
import ParleyTestSupport

/// The single-node broker's room queue under thousands of publishes in flight: stored in
/// batches, delivered in call order, events after the messages published before them.
@Suite struct SingleNodeBrokerQueueTests {
    /// A broker over a store that holds every append until the test releases it, with a
    /// subscription to `room` and its deliveries recorded.
    private func gatedBroker(subscribedTo room: RoomKey) async throws -> (GatedStore, SingleNodeBroker, DeliveryRecorder) {
        let store = GatedStore()
        let broker = SingleNodeBroker(store: store)
        let deliveries = DeliveryRecorder()
        broker.setDelivery(deliveries)
        _ = try await broker.subscribe(room)
        return (store, broker, deliveries)
    }

    @Test func thousandsInFlightAreDeliveredInOrderAsBatchesAreStored() async throws {
        let room = RoomKey(channel: "demo", room: "queue")
        let (store, broker, deliveries) = try await gatedBroker(subscribedTo: room)
        let acknowledged = Mutex<[Int64]>([])
        let total = 3_000
        for n in 1...total {
            try broker.publish(draft("m\(n)", in: room), clientMessageID: nil) { result in
                if case .success(let message) = result { acknowledged.withLock { $0.append(message.offset) } }
            }
            // A join after every 1,000th message: delivered only once those are stored.
            if n % 1_000 == 0 { broker.broadcast(.memberJoined(Member(id: "after-\(n)")), in: room) }
        }
        #expect(deliveries.events(in: room).isEmpty, "nothing is delivered before it is stored")
        // Stored in uneven batches, so the queue's head moves by parts and is compacted.
        for batch in [1, 699, 700, 1, 900, 699] { store.release(batch) }
        let delivered = await deliveries.wait(in: room) { events in
            events.count == total + 3
        }
        #expect(delivered, "saw \(deliveries.events(in: room).count) of \(total + 3) events")
        let events = deliveries.events(in: room)
        #expect(deliveries.offsets(in: room) == Array(1...Int64(total)))
        for n in [1_000, 2_000, 3_000] {
            let index = events.firstIndex { if case .memberJoined(let m) = $0 { m.id == "after-\(n)" } else { false } }
            #expect(index == n + n / 1_000 - 1, "the join after message \(n) is delivered right after it")
        }
        #expect(acknowledged.withLock { $0 }.count == total)
    }

    /// Publishes of a client message id whose original is still on its way to the store wait
    /// for it and share its outcome, in call order. Stored: every one gets the original, which
    /// is stored and delivered once. Failed: every one gets the failure, and the id is free
    /// again (the next publish with it is a new message).
    @Test(arguments: [true, false])
    func retriesWhileTheOriginalIsInFlightShareItsOutcome(stored: Bool) async throws {
        let room = RoomKey(channel: "demo", room: "retry")
        let (store, broker, deliveries) = try await gatedBroker(subscribedTo: room)
        let answers = Mutex<[(Int, Result<Message, ParleyError>)]>([])
        for n in 0..<3 {
            try broker.publish(draft("once", in: room), clientMessageID: "k") { result in answers.withLock { $0.append((n, result)) } }
        }
        #expect(answers.withLock { $0.isEmpty }, "nobody is answered before the store")
        if stored { store.release() } else { store.fail(with: ParleyError(.unavailable, "disk gone")) }
        let got = answers.withLock { $0 }
        #expect(got.map(\.0) == [0, 1, 2])
        if stored {
            let messages = got.compactMap { try? $0.1.get() }
            #expect(messages.count == 3)
            #expect(Set(messages.map(\.id)).count == 1 && messages.allSatisfy { $0.offset == 1 })
            #expect(deliveries.offsets(in: room) == [1])
        } else {
            #expect(got.allSatisfy { if case .failure(let error) = $0.1 { error.message == "disk gone" } else { false } })
            #expect(deliveries.offsets(in: room).isEmpty)
            let again = Mutex<Result<Message, ParleyError>?>(nil)
            try broker.publish(draft("once", in: room), clientMessageID: "k") { result in again.withLock { $0 = result } }
            store.release()
            #expect(try again.withLock { $0 }?.get().offset == 1)
        }
    }
}
