import Foundation
import Synchronization
import Testing
import ParleyCore
import ParleyRedis
import ParleySQLite

/// One node's broker of each kind, with its delivery recorder.
struct BrokerNode {
    let broker: any Broker
    let deliveries: DeliveryRecorder
    /// Makes the node's writes fail (true) or work again (false); nodes made `failable` only.
    var failWrites: @Sendable (Bool) -> Void = { _ in }
}

/// Every broker implementation, run through one contract.
enum BrokerKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case memory, sqlite, redis, redisCluster
    var description: String { rawValue }

    var isRedis: Bool { self == .redis || self == .redisCluster }

    /// A node over a fresh store. A `failable` node's writes fail on demand (``BrokerNode/failWrites``).
    /// Redis nodes made with the same `keyspace` are nodes of one cluster.
    func makeNode(failable: Bool = false, keyspace: RedisKeyspace? = nil) throws -> BrokerNode {
        let broker: any Broker
        var failWrites: @Sendable (Bool) -> Void = { _ in }
        switch self {
        case .memory, .sqlite:
            var store: any MessageStore
            if self == .memory {
                store = InMemoryMessageStore()
            } else {
                var options = SQLiteStoreOptions()
                options.synchronousFull = false
                store = try SQLiteMessageStore(path: temporaryDatabase(), options: options)
            }
            if failable {
                let failing = FailingStore(inner: InMemoryMessageStore())
                failWrites = { flag in failing.failing.withLock { $0 = flag } }
                store = failing
            }
            broker = SingleNodeBroker(store: store)
        case .redis, .redisCluster:
            let deployment = try RedisDeployment.shared(self == .redis ? .single : .cluster)
            var client = deployment.client
            if failable {
                let failing = FailingRedis(inner: client)
                failWrites = { flag in failing.failing.withLock { $0 = flag } }
                client = failing
            }
            var options = RedisStoreOptions()
            options.retentionIntervalMillis = 0
            let store = RedisMessageStore(redis: client, keyspace: keyspace ?? RedisDeployment.freshKeyspace(), options: options)
            broker = RedisBroker(store: store)
        }
        let deliveries = DeliveryRecorder()
        broker.setDelivery(deliveries)
        return BrokerNode(broker: broker, deliveries: deliveries, failWrites: failWrites)
    }
}

private let room = RoomKey(channel: "demo", room: "broker")
private let alice = Member(id: "a1", clientData: ["name": "alice"])

@Suite struct BrokerContractTests {
    @Test(arguments: BrokerKind.allCases)
    func concurrentPublishesGetDenseOffsetsDeliveredInOrder(kind: BrokerKind) async throws {
        let node = try kind.makeNode()
        _ = try await node.broker.subscribe(room)
        let offsets = await withTaskGroup(of: [Int64].self) { group in
            for publisher in 0..<4 {
                group.addTask {
                    var got: [Int64] = []
                    for n in 0..<50 { got.append((try? await node.broker.publish(draft("p\(publisher)-\(n)", in: room)))?.offset ?? -1) }
                    return got
                }
            }
            var all: [Int64] = []
            for await got in group { all += got }
            return all
        }
        #expect(offsets.sorted() == Array(1...200))
        #expect(await node.deliveries.wait(in: room) { $0.count == 200 })
        #expect(node.deliveries.offsets(in: room) == Array(1...200))
    }

    @Test(arguments: BrokerKind.allCases)
    func aRetryWithTheSameClientMessageIDGetsTheOriginal(kind: BrokerKind) async throws {
        let node = try kind.makeNode()
        _ = try await node.broker.subscribe(room)
        let first = try await node.broker.publish(draft("once", in: room), clientMessageID: "x")
        let retry = try await node.broker.publish(draft("once", in: room), clientMessageID: "x")
        let other = try await node.broker.publish(draft("twice", in: room), clientMessageID: "y")
        #expect(retry.id == first.id)
        #expect(retry.offset == first.offset)
        #expect(other.offset == first.offset + 1)
        #expect(await node.deliveries.wait(in: room) { $0.count == 2 })
        #expect(node.deliveries.offsets(in: room) == [1, 2])
    }

    @Test(arguments: BrokerKind.allCases)
    func broadcastsKeepTheirPlaceAmongMessages(kind: BrokerKind) async throws {
        let node = try kind.makeNode()
        _ = try await node.broker.subscribe(room)
        let typing = Message(id: "t", offset: 0, timestampMillis: 0, room: room, sender: alice, body: ["typing": true])
        try node.broker.publish(draft("one", in: room), clientMessageID: nil) { _ in }
        node.broker.broadcast(.memberJoined(alice), in: room)
        node.broker.broadcast(.message(typing), in: room)
        try node.broker.publish(draft("two", in: room), clientMessageID: nil) { _ in }
        #expect(await node.deliveries.wait(in: room) { $0.count == 4 })
        let events = node.deliveries.events(in: room)
        guard events.count == 4, case .message(let one) = events[0], case .message(let two) = events[3] else {
            Issue.record("unexpected events \(events)")
            return
        }
        #expect(one.offset == 1)
        #expect(events[1] == .memberJoined(alice))
        #expect(events[2] == .message(typing))
        #expect(two.offset == 2)
    }

    /// The moderation events (a message deleted, a room closed) travel like any broadcast:
    /// a cluster broker must carry them, with their fields, in order among the messages.
    @Test(arguments: BrokerKind.allCases)
    func moderationEventsAreCarriedInOrder(kind: BrokerKind) async throws {
        let node = try kind.makeNode()
        _ = try await node.broker.subscribe(room)
        try node.broker.publish(draft("one", in: room), clientMessageID: nil) { _ in }
        node.broker.broadcast(.messageDeleted(offset: 1), in: room)
        node.broker.broadcast(.roomClosed(reason: "closed: spam ✂"), in: room)
        try node.broker.publish(draft("two", in: room), clientMessageID: nil) { _ in }
        #expect(await node.deliveries.wait(in: room) { $0.count == 4 })
        let events = node.deliveries.events(in: room)
        #expect(events.count == 4)
        guard events.count == 4 else { return }
        #expect(events[1] == .messageDeleted(offset: 1))
        #expect(events[2] == .roomClosed(reason: "closed: spam ✂"))
        #expect(node.deliveries.offsets(in: room) == [1, 2])
    }

    @Test(arguments: BrokerKind.allCases)
    func aSubscriptionStartsAtItsPositionAndIsCounted(kind: BrokerKind) async throws {
        let node = try kind.makeNode()
        for n in 1...5 { _ = try await node.broker.publish(draft("m\(n)", in: room)) }
        let position = try await node.broker.subscribe(room)
        #expect(position == RoomPosition(stored: 5, published: 5))
        _ = try await node.broker.subscribe(room)
        _ = try await node.broker.publish(draft("m6", in: room))
        node.broker.unsubscribe(room)
        _ = try await node.broker.publish(draft("m7", in: room))
        node.broker.unsubscribe(room)
        _ = try await node.broker.publish(draft("m8", in: room))
        // A marker subscription on another room proves the broker has moved on.
        let marker = RoomKey(channel: "demo", room: "marker")
        _ = try await node.broker.subscribe(marker)
        _ = try await node.broker.publish(draft("mark", in: marker))
        #expect(await node.deliveries.wait(in: marker) { $0.count == 1 })
        #expect(node.deliveries.offsets(in: room) == [6, 7])
    }

    @Test(arguments: BrokerKind.allCases)
    func historyIsReadableThroughTheStore(kind: BrokerKind) async throws {
        let node = try kind.makeNode()
        for n in 1...10 { _ = try await node.broker.publish(draft("m\(n)", in: room, sender: n % 2 == 0 ? alice : nil)) }
        let page = try await node.broker.store.messages(in: room, before: nil, limit: 3)
        #expect(page.messages.map(\.offset) == [8, 9, 10])
        #expect(page.messages.last?.body == "m10")
        #expect(page.messages.last?.sender == alice)
        #expect(page.hasMore)
        #expect(try await node.broker.store.messages(in: room, after: 8, limit: 10).map(\.offset) == [9, 10])
    }

    @Test(arguments: BrokerKind.allCases)
    func aFailedWriteIsReportedNeverDeliveredAndOffsetsStayDense(kind: BrokerKind) async throws {
        let node = try kind.makeNode(failable: true)
        _ = try await node.broker.subscribe(room)
        _ = try await node.broker.publish(draft("one", in: room))
        node.failWrites(true)
        await #expect(throws: ParleyError.self) { try await node.broker.publish(draft("lost", in: room)) }
        node.failWrites(false)
        let three = try await node.broker.publish(draft("two", in: room))
        #expect(three.offset == 2)
        #expect(await node.deliveries.wait(in: room) { $0.count == 2 })
        let bodies: [JSONValue] = node.deliveries.events(in: room).compactMap { event in
            if case .message(let message) = event { return message.body }
            return nil
        }
        #expect(bodies == ["one", "two"])
    }

    @Test(arguments: BrokerKind.allCases)
    func aRoomOffsetsContinueAfterItLeftMemory(kind: BrokerKind) async throws {
        let node = try kind.makeNode()
        _ = try await node.broker.publish(draft("a", in: room), clientMessageID: "k")
        _ = try await node.broker.publish(draft("b", in: room))
        #expect(node.broker.evictIdle(nowMillis: .max, idleMillis: 0) >= 1)
        let retry = try await node.broker.publish(draft("a", in: room), clientMessageID: "k")
        #expect(retry.offset == 1)
        #expect(try await node.broker.publish(draft("c", in: room)).offset == 3)
    }
}

/// A memory store whose appends fail while `failing` is set (the broker contract's stand-in
/// for a full disk).
final class FailingStore: MessageStore {
    let inner: any MessageStore
    let failing = Mutex(false)
    init(inner: any MessageStore) { self.inner = inner }

    func append(_ message: Message, clientMessageID: String?, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        if failing.withLock({ $0 }) { completion(.failure(ParleyError(.unavailable, "injected store failure"))); return }
        inner.append(message, clientMessageID: clientMessageID, completion: completion)
    }
    func messages(in room: RoomKey, after offset: Int64, limit: Int, completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        inner.messages(in: room, after: offset, limit: limit, completion: completion)
    }
    func messages(in room: RoomKey, before: Int64?, limit: Int, completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        inner.messages(in: room, before: before, limit: limit, completion: completion)
    }
    func deleteMessage(in room: RoomKey, offset: Int64, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        inner.deleteMessage(in: room, offset: offset, completion: completion)
    }
    func message(withID id: String, in room: RoomKey, completion: @escaping @Sendable (Result<Message?, ParleyError>) -> Void) {
        inner.message(withID: id, in: room, completion: completion)
    }
    func enforceRetention(nowMillis: Int64, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        inner.enforceRetention(nowMillis: nowMillis, completion: completion)
    }
    func recover(clientMessageIDsSince: Int64) throws(ParleyError) -> StoreRecovery {
        try inner.recover(clientMessageIDsSince: clientMessageIDsSince)
    }
    func loadRoom(_ room: RoomKey, clientMessageIDsSince: Int64, completion: @escaping @Sendable (Result<RoomRecovery, ParleyError>) -> Void) {
        inner.loadRoom(room, clientMessageIDsSince: clientMessageIDsSince, completion: completion)
    }
}
