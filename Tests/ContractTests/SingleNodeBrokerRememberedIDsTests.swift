import Testing
import ParleyCore
import ParleyRedis
import ParleySQLite
import ParleyTestSupport

/// The client message ids a single node remembers (a retry within the window gets the
/// original) are bounded per room and in all: a client sending a fresh id with every
/// publish must not grow the server's memory for a day. Past a bound a room forgets its
/// own oldest id first.
@Suite struct SingleNodeBrokerRememberedIDsTests {
    private let room = RoomKey(channel: "demo", room: "ids")

    private func publish(_ broker: SingleNodeBroker, _ id: String, in key: RoomKey? = nil) async throws -> Int64 {
        try await broker.publish(draft("text", in: key ?? room), clientMessageID: id).offset
    }

    @Test func aRoomKeepsItsNewestIDsUpToItsBound() async throws {
        let broker = SingleNodeBroker(store: InMemoryMessageStore(), maxRememberedPerRoom: 3)
        for (n, id) in ["a", "b", "c", "d", "e"].enumerated() { #expect(try await publish(broker, id) == Int64(n + 1)) }
        #expect(broker.rememberedClientMessageIDs == 3)
        #expect(try await publish(broker, "e") == 5, "a retry of a remembered id gets the original")
        #expect(try await publish(broker, "c") == 3)
        #expect(try await publish(broker, "a") == 6, "the oldest was forgotten: a new message")
        #expect(broker.rememberedClientMessageIDs == 3)
    }

    /// Past the total the busiest rooms give way: a room holding its share (the total ÷ the
    /// rooms remembering ids) or more forgets its own oldest, a quieter one still adds.
    @Test func pastTheTotalTheBusiestRoomsGiveWay() async throws {
        let broker = SingleNodeBroker(store: InMemoryMessageStore(), maxRememberedPerRoom: 100, maxRemembered: 4)
        let one = RoomKey(channel: "demo", room: "one"), two = RoomKey(channel: "demo", room: "two")
        for n in 1...6 { _ = try await publish(broker, "one-\(n)", in: one) }
        #expect(broker.rememberedClientMessageIDs == 4, "one room alone: the total")
        for n in 1...3 { _ = try await publish(broker, "two-\(n)", in: two) }
        // "two" kept its share (2 of 4), "one" its 4: the total stays under twice the bound.
        #expect(broker.rememberedClientMessageIDs == 6)
        #expect(try await publish(broker, "two-3", in: two) == 3)
        #expect(try await publish(broker, "two-2", in: two) == 2)
        #expect(try await publish(broker, "one-3", in: one) == 3)
        #expect(try await publish(broker, "one-7", in: one) == 7)
        #expect(try await publish(broker, "one-3", in: one) == 8, "the busy room forgot its oldest to take one-7")
        #expect(try await publish(broker, "two-1", in: two) == 4, "forgotten: a new message")
        #expect(broker.rememberedClientMessageIDs <= 8)
    }

    /// A room leaving memory gives its ids back to the count; when it is read again its ids
    /// come back from the store.
    @Test func aRoomLeavingMemoryGivesItsIDsBack() async throws {
        let clock = ManualClock()
        let broker = SingleNodeBroker(store: InMemoryMessageStore(), clock: clock)
        for id in ["a", "b", "c"] {
            _ = try await broker.publish(draft("text", in: room), clientMessageID: id)
        }
        #expect(broker.rememberedClientMessageIDs == 3)
        clock.advance(millis: 120_000)
        #expect(broker.evictIdle(nowMillis: clock.nowMillis(), idleMillis: 60_000) == 1)
        #expect(broker.rememberedClientMessageIDs == 0)
        #expect(try await publish(broker, "b") == 2, "read again from the store")
        #expect(broker.rememberedClientMessageIDs == 3)
    }

    /// The embedded store reads a room's newest ids only, as many as it is told.
    @Test func theEmbeddedStoreReadsARoomsNewestIDsOnly() async throws {
        let path = temporaryDatabase()
        let first = try SQLiteMessageStore(path: path)
        let writer = SingleNodeBroker(store: first)
        for id in ["a", "b", "c", "d"] { _ = try await publish(writer, id) }
        first.close()
        var options = SQLiteStoreOptions()
        options.maxClientIDsPerRoom = 2
        let store = try SQLiteMessageStore(path: path, options: options)
        defer { store.close() }
        let broker = SingleNodeBroker(store: store)
        #expect(try await publish(broker, "d") == 4)
        #expect(broker.rememberedClientMessageIDs == 2)
        #expect(try await publish(broker, "a") == 5, "not read back: a new message")
    }

    /// In a cluster the ids live in Redis, per room: an append past the bound forgets the
    /// room's oldest there (a store told to keep more reads back only what is left).
    @Test(arguments: [StoreKind.redis, .redisCluster])
    func redisKeepsARoomsNewestIDsOnly(kind: StoreKind) async throws {
        let deployment = try RedisDeployment.shared(kind == .redis ? .single : .cluster)
        let keyspace = RedisDeployment.freshKeyspace()
        var options = RedisStoreOptions()
        options.retentionIntervalMillis = 0
        options.maxClientIDsPerRoom = 2
        let store = RedisMessageStore(redis: deployment.client, keyspace: keyspace, options: options)
        for offset in Int64(1)...4 { try await store.append(message(offset, in: room), clientMessageID: "c\(offset)") }
        options.maxClientIDsPerRoom = 100
        let reader = RedisMessageStore(redis: deployment.client, keyspace: keyspace, options: options)
        #expect(try reader.recover(clientMessageIDsSince: 0).recentPublishes.map(\.clientMessageID) == ["c3", "c4"])
    }
}
