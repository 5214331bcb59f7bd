import Foundation
import Synchronization
import Testing
import ParleyCore
import CSQLite
import ParleyRedis
@testable import ParleySQLite
import ParleyTestSupport

/// One contract, every store: memory and SQLite must pass the same tests (and the test
/// suites' fault-injecting store, letting everything through to SQLite).
enum StoreKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case memory, sqlite, faultInjectingOverSQLite, redis, redisCluster
    var description: String { rawValue }

    /// Every store keeps message actions.
    static var keepingActions: [StoreKind] { allCases }

    func make(retention: StoreRetention = .keepEverything, path: String? = nil) throws -> any MessageStore {
        switch self {
        case .memory:
            return InMemoryMessageStore(retention: retention)
        case .sqlite:
            var options = SQLiteStoreOptions()
            options.retention = retention
            options.synchronousFull = false
            // Background retention runs at "time 0", so only the explicit calls with the
            // tests' made-up timestamps drop anything.
            return try SQLiteMessageStore(path: path ?? temporaryDatabase(), options: options, clockMillis: { 0 })
        case .faultInjectingOverSQLite:
            return FaultInjectingMessageStore(wrapping: try StoreKind.sqlite.make(retention: retention, path: path))
        case .redis, .redisCluster:
            var options = RedisStoreOptions()
            options.retention = retention
            // No background pass: only the explicit calls with the tests' made-up times drop anything.
            options.retentionIntervalMillis = 0
            let deployment = try RedisDeployment.shared(self == .redis ? .single : .cluster)
            return RedisMessageStore(redis: deployment.client, keyspace: RedisDeployment.freshKeyspace(), options: options)
        }
    }
}

func temporaryDatabase() -> String {
    let directory = NSTemporaryDirectory() + "parley-store-\(UUID().uuidString)"
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    return directory + "/parley.sqlite3"
}

private let room = RoomKey(channel: "demo", room: "r")
private let other = RoomKey(channel: "demo", room: "other")
private let alice = Member(id: "a1", clientData: ["name": "alice", "color": "#FF0000"], authData: ["role": "admin"])

func message(_ offset: Int64, in key: RoomKey = room, at millis: Int64 = 1_700_000_000_000, body: JSONValue? = nil) -> Message {
    Message(id: "m\(offset)", offset: offset, timestampMillis: millis, room: key, sender: offset % 2 == 0 ? alice : nil,
            body: body ?? .string("text \(offset)"))
}

@Suite struct MessageStoreContractTests {
    @Test(arguments: StoreKind.allCases)
    func appendsReadBackExactly(kind: StoreKind) async throws {
        let store = try kind.make()
        let body: JSONValue = ["text": "héllo", "n": 3, "list": [1, true, nil]]
        for offset in Int64(1)...5 { try await store.append(message(offset, body: offset == 3 ? body : nil)) }
        let all = try await store.messages(in: room, after: 0, limit: 100)
        #expect(all == (1...5).map { message($0, body: $0 == 3 ? body : nil) })
        #expect(try await store.messages(in: room, after: 3, limit: 1).map(\.offset) == [4])
        #expect(try await store.messages(in: other, after: 0, limit: 10).isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func offsetsMustFollowWithoutGap(kind: StoreKind) async throws {
        let store = try kind.make()
        try await store.append(message(1))
        await #expect(throws: ParleyError.self) { try await store.append(message(3)) }
        await #expect(throws: ParleyError.self) { try await store.append(message(1)) }
        try await store.append(message(2))
        try await store.append(message(1, in: other))
        #expect(try store.recover(clientMessageIDsSince: 0).lastOffsets == [room: 2, other: 1])
    }

    @Test(arguments: StoreKind.allCases)
    func pagesBackwardsWithHasMore(kind: StoreKind) async throws {
        let store = try kind.make()
        for offset in Int64(1)...25 { try await store.append(message(offset)) }
        let newest = try await store.messages(in: room, before: nil, limit: 10)
        #expect(newest.messages.map(\.offset) == Array(16...25))
        #expect(newest.hasMore)
        let oldest = try await store.messages(in: room, before: 6, limit: 10)
        #expect(oldest.messages.map(\.offset) == Array(1...5))
        #expect(!oldest.hasMore)
        #expect(try await store.messages(in: room, before: 1, limit: 10) == MessagePage(messages: [], hasMore: false))
    }

    /// A page also ends at its byte budget, newest first, and says there is more; one message
    /// larger than the budget is a page of its own.
    @Test(arguments: StoreKind.allCases)
    func pagesBackwardsWithinAByteBudget(kind: StoreKind) async throws {
        let store = try kind.make()
        let big = JSONValue.string(String(repeating: "x", count: 10_000))
        let huge = JSONValue.string(String(repeating: "y", count: 50_000))
        // 1-5 small, 6 huge, 7-10 big.
        for offset in Int64(1)...10 {
            try await store.append(message(offset, body: offset <= 5 ? nil : offset == 6 ? huge : big))
        }
        let newest = try await store.messages(in: room, before: nil, limit: 100, maxBytes: 25_000)
        #expect(newest.messages.map(\.offset) == [9, 10])
        #expect(newest.hasMore)
        #expect(newest.messages == [message(9, body: big), message(10, body: big)])
        let next = try await store.messages(in: room, before: 9, limit: 100, maxBytes: 25_000)
        #expect(next.messages.map(\.offset) == [7, 8] && next.hasMore)
        let alone = try await store.messages(in: room, before: 7, limit: 100, maxBytes: 25_000)
        #expect(alone.messages.map(\.offset) == [6] && alone.hasMore)
        let rest = try await store.messages(in: room, before: 6, limit: 100, maxBytes: 25_000)
        #expect(rest.messages.map(\.offset) == Array(1...5) && !rest.hasMore)
        // The count still applies, and a budget below one message still gives one.
        let counted = try await store.messages(in: room, before: nil, limit: 1, maxBytes: 1 << 30)
        #expect(counted.messages.map(\.offset) == [10] && counted.hasMore)
        let tiny = try await store.messages(in: room, before: nil, limit: 100, maxBytes: 1)
        #expect(tiny.messages.map(\.offset) == [10] && tiny.hasMore)
        let everything = try await store.messages(in: room, before: nil, limit: 100, maxBytes: .max)
        #expect(everything.messages.map(\.offset) == Array(1...10) && !everything.hasMore)
        #expect(try await store.messages(in: other, before: nil, limit: 100, maxBytes: 25_000) == MessagePage(messages: [], hasMore: false))
    }

    /// Reading forward (a resume) also stops at a byte budget, after at least one message.
    @Test(arguments: StoreKind.allCases)
    func readsForwardWithinAByteBudget(kind: StoreKind) async throws {
        let store = try kind.make()
        let big = JSONValue.string(String(repeating: "x", count: 10_000))
        let huge = JSONValue.string(String(repeating: "y", count: 50_000))
        for offset in Int64(1)...10 {
            try await store.append(message(offset, body: offset <= 5 ? nil : offset == 6 ? huge : big))
        }
        #expect(try await store.messages(in: room, after: 0, limit: 100, maxBytes: 25_000).map(\.offset) == Array(1...5))
        #expect(try await store.messages(in: room, after: 5, limit: 100, maxBytes: 25_000).map(\.offset) == [6])
        let two = try await store.messages(in: room, after: 6, limit: 100, maxBytes: 25_000)
        #expect(two == [message(7, body: big), message(8, body: big)])
        #expect(try await store.messages(in: room, after: 8, limit: 100, maxBytes: 1).map(\.offset) == [9])
        #expect(try await store.messages(in: room, after: 0, limit: 3, maxBytes: 1 << 30).map(\.offset) == [1, 2, 3])
        #expect(try await store.messages(in: room, after: 0, limit: 100, maxBytes: .max).map(\.offset) == Array(1...10))
        #expect(try await store.messages(in: other, after: 0, limit: 100, maxBytes: 25_000).isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func remembersClientMessageIDs(kind: StoreKind) async throws {
        let store = try kind.make()
        try await store.append(message(1, at: 1000), clientMessageID: "old")
        try await store.append(message(2, at: 5000), clientMessageID: "new")
        try await store.append(message(3, at: 6000))
        let recovery = try store.recover(clientMessageIDsSince: 2000)
        #expect(recovery.recentPublishes == [RememberedPublish(room: room, clientMessageID: "new", id: "m2", offset: 2, timestampMillis: 5000)])
    }

    @Test(arguments: StoreKind.allCases)
    func retentionByCountAndAgeKeepsOffsets(kind: StoreKind) async throws {
        let byCount = try kind.make(retention: StoreRetention(maxMessagesPerRoom: 3))
        for offset in Int64(1)...10 { try await byCount.append(message(offset)) }
        try await byCount.enforceRetention(nowMillis: 0)
        #expect(try await byCount.messages(in: room, after: 0, limit: 100).map(\.offset) == [8, 9, 10])
        #expect(try byCount.recover(clientMessageIDsSince: 0).lastOffsets[room] == 10)
        #expect(try await byCount.messages(in: room, before: nil, limit: 100).hasMore == false)

        let byAge = try kind.make(retention: StoreRetention(maxAgeMillis: 1000))
        for offset in Int64(1)...10 { try await byAge.append(message(offset, at: offset * 500)) }
        try await byAge.enforceRetention(nowMillis: 5000)
        #expect(try await byAge.messages(in: room, after: 0, limit: 100).map(\.offset) == [8, 9, 10])
        try await byAge.append(message(11, at: 5500))
        #expect(try await byAge.messages(in: room, after: 9, limit: 100).map(\.offset) == [10, 11])
    }

    @Test(arguments: StoreKind.allCases)
    func aChannelsOwnRetentionReplacesTheServerWideOne(kind: StoreKind) async throws {
        var retention = StoreRetention(maxMessagesPerRoom: 5)
        retention.channels["short"] = .init(maxMessagesPerRoom: 2)
        retention.channels["forever"] = .init()
        let store = try kind.make(retention: retention)
        let short = RoomKey(channel: "short", room: "r"), forever = RoomKey(channel: "forever", room: "r")
        for offset in Int64(1)...10 {
            for key in [room, short, forever] { try await store.append(message(offset, in: key)) }
        }
        try await store.enforceRetention(nowMillis: 0)
        #expect(try await store.messages(in: room, after: 0, limit: 100).map(\.offset) == Array(6...10))
        #expect(try await store.messages(in: short, after: 0, limit: 100).map(\.offset) == [9, 10])
        #expect(try await store.messages(in: forever, after: 0, limit: 100).count == 10)
    }

    /// A deleted message stays in its place as a tombstone: same id, offset, time and sender,
    /// no body; every read returns it so; offsets and later appends are untouched.
    @Test(arguments: StoreKind.allCases)
    func deletingLeavesATombstoneInPlace(kind: StoreKind) async throws {
        let store = try kind.make()
        for offset in Int64(1)...5 { try await store.append(message(offset)) }
        #expect(try await store.deleteMessage(in: room, offset: 2))
        #expect(try await store.deleteMessage(in: room, offset: 2), "deleting twice still finds it")
        #expect(try await !store.deleteMessage(in: room, offset: 9), "no message at offset 9")
        #expect(try await !store.deleteMessage(in: other, offset: 1), "a room that never had one")

        let all = try await store.messages(in: room, after: 0, limit: 100)
        #expect(all.map(\.offset) == [1, 2, 3, 4, 5])
        let tombstone = all[1]
        #expect(tombstone == message(2).tombstone)
        #expect(tombstone.isDeleted && tombstone.body == .null)
        #expect(tombstone.id == "m2" && tombstone.sender == message(2).sender && tombstone.timestampMillis == message(2).timestampMillis)
        #expect(all.filter(\.isDeleted).map(\.offset) == [2])
        #expect(try await store.messages(in: room, before: 3, limit: 1).messages == [message(2).tombstone])
        try await store.append(message(6))
        #expect(try store.recover(clientMessageIDsSince: 0).lastOffsets[room] == 6)
    }

    @Test(arguments: StoreKind.allCases)
    func aMessageDroppedByRetentionCannotBeDeleted(kind: StoreKind) async throws {
        let store = try kind.make(retention: StoreRetention(maxMessagesPerRoom: 2))
        for offset in Int64(1)...4 { try await store.append(message(offset)) }
        try await store.enforceRetention(nowMillis: 0)
        #expect(try await !store.deleteMessage(in: room, offset: 1))
        #expect(try await store.deleteMessage(in: room, offset: 4))
        #expect(try await store.messages(in: room, after: 0, limit: 10).map(\.isDeleted) == [false, true])
    }

    @Test(arguments: StoreKind.allCases)
    func concurrentAppendsCompleteInOrder(kind: StoreKind) async throws {
        let store = try kind.make()
        let completed = Mutex<[Int64]>([])
        let done = AsyncStream<Void>.makeStream()
        for offset in Int64(1)...2_000 {
            store.append(message(offset), clientMessageID: nil) { result in
                if case .success = result { completed.withLock { $0.append(offset) } }
                if offset == 2_000 { done.continuation.yield(()) }
            }
        }
        for await _ in done.stream { break }
        #expect(completed.withLock { $0 } == Array(1...2_000))
        #expect(try await store.messages(in: room, after: 0, limit: 5_000).count == 2_000)
    }
}

@Suite struct SQLiteStoreTests {
    @Test func survivesReopen() async throws {
        let path = temporaryDatabase()
        do {
            let store = try StoreKind.sqlite.make(path: path) as! SQLiteMessageStore
            for offset in Int64(1)...3 { try await store.append(message(offset), clientMessageID: "c\(offset)") }
            store.close()
        }
        let again = try SQLiteMessageStore(path: path)
        #expect(try again.recover(clientMessageIDsSince: 0).lastOffsets == [room: 3])
        #expect(try again.recover(clientMessageIDsSince: 0).recentPublishes.map(\.clientMessageID) == ["c1", "c2", "c3"])
        try await again.append(message(4))
        #expect(try await again.messages(in: room, after: 0, limit: 10).map(\.offset) == [1, 2, 3, 4])
        again.close()
    }

    /// A room's last offset is written down only before retention deletes (its newest row
    /// says it otherwise): a room whose every message aged out still counts on after a reopen,
    /// and one that stored more since the last retention pass counts from its newest row.
    @Test func offsetsSurviveRetentionAndReopen() async throws {
        let path = temporaryDatabase()
        var options = SQLiteStoreOptions()
        options.synchronousFull = false
        options.retention = StoreRetention(maxAgeMillis: 1000)
        do {
            let store = try SQLiteMessageStore(path: path, options: options, clockMillis: { 0 })
            for offset in Int64(1)...4 { try await store.append(message(offset, at: 100)) }
            for offset in Int64(1)...2 { try await store.append(message(offset, in: other, at: 100)) }
            try await store.enforceRetention(nowMillis: 10_000)
            #expect(try await store.messages(in: room, after: 0, limit: 10).isEmpty)
            // Stored after the pass: only its row says offset 3.
            try await store.append(message(3, in: other, at: 9_000))
            store.close()
        }
        let again = try SQLiteMessageStore(path: path, options: options, clockMillis: { 0 })
        defer { again.close() }
        #expect(try again.recover(clientMessageIDsSince: 0).lastOffsets == [room: 4, other: 3])
        try await again.append(message(5))
        #expect(try await again.messages(in: room, after: 0, limit: 10).map(\.offset) == [5])
    }

    @Test func aTombstoneSurvivesReopen() async throws {
        let path = temporaryDatabase()
        do {
            let store = try StoreKind.sqlite.make(path: path) as! SQLiteMessageStore
            for offset in Int64(1)...3 { try await store.append(message(offset)) }
            #expect(try await store.deleteMessage(in: room, offset: 3))
            store.close()
        }
        let again = try SQLiteMessageStore(path: path)
        defer { again.close() }
        #expect(try await again.messages(in: room, after: 0, limit: 10) == [message(1), message(2), message(3).tombstone])
    }

    /// A database written by schema 1 (before tombstones) opens, is migrated, and keeps its
    /// messages.
    /// A database file as schema `version` wrote it, with `rows` (SQL) in it, opened (and so
    /// migrated) by today's store.
    func legacyStore(version: Int, rows: String) throws -> SQLiteMessageStore {
        let path = temporaryDatabase()
        var handle: OpaquePointer?
        #expect(sqlite3_open(path, &handle) == SQLITE_OK)
        let sql = SQLiteMessageStore.migrations[0..<version].joined() + rows + "\nPRAGMA user_version = \(version);"
        #expect(sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK)
        sqlite3_close(handle)
        return try SQLiteMessageStore(path: path)
    }

    @Test func aVersion1DatabaseIsMigrated() async throws {
        let store = try legacyStore(version: 1, rows: """
            INSERT INTO rooms (id, channel, name, last_offset) VALUES (1, 'demo', 'r', 1);
            INSERT INTO messages (room_id, offset, id, ts, body) VALUES (1, 1, 'm1', 1700000000000, '"text 1"');
            """)
        defer { store.close() }
        #expect(store.openedAtSchemaVersion == 1)
        #expect(try await store.messages(in: room, after: 0, limit: 10) == [message(1)])
        #expect(try await store.deleteMessage(in: room, offset: 1))
        #expect(try await store.messages(in: room, after: 0, limit: 10) == [message(1).tombstone])
    }

    /// The online backup copies exactly what is committed, and the copy is a working store.
    @Test func backupCopiesACommittedSnapshot() async throws {
        let path = temporaryDatabase()
        let store = try StoreKind.sqlite.make(path: path) as! SQLiteMessageStore
        defer { store.close() }
        for offset in Int64(1)...20 { try await store.append(message(offset)) }
        #expect(try await store.deleteMessage(in: room, offset: 5))
        let copy = temporaryDatabase() + ".backup"
        let summary = try SQLiteBackup.copy(from: path, to: copy)
        #expect(summary.rooms == 1 && summary.messages == 20 && summary.pages > 0)
        #expect(throws: ParleyError.self) { try SQLiteBackup.copy(from: path, to: copy) }
        let restored = try SQLiteMessageStore(path: copy)
        defer { restored.close() }
        let messages = try await restored.messages(in: room, after: 0, limit: 100)
        #expect(messages.map(\.offset) == Array(1...20))
        #expect(messages[4].isDeleted)
    }

    @Test func retentionRunsInTheBackgroundEvenUnderLoad() async throws {
        var options = SQLiteStoreOptions()
        options.synchronousFull = false
        options.retention = StoreRetention(maxMessagesPerRoom: 5)
        options.retentionIntervalMillis = 1
        let store = try SQLiteMessageStore(path: temporaryDatabase(), options: options)
        defer { store.close() }
        for offset in Int64(1)...20 {
            try await store.append(message(offset))
            // The load pattern, not a wait: appends keep coming while retention's 1 ms interval
            // passes again and again.
            try await Task.sleep(for: .milliseconds(2))
        }
        try await store.append(message(21))
        // Retention runs after a commit once its interval has passed, or when the writer idles
        // for that long: wait until it has run after the last append.
        var kept: [Int64] = []
        try await eventually("retention down to 5 messages") {
            kept = try await store.messages(in: room, after: 0, limit: 100).map(\.offset)
            return kept.count <= 5
        }
        #expect(kept == Array(17...21))
    }

    @Test func walIsCheckpointedWhileRunningAndOnClose() async throws {
        let path = temporaryDatabase()
        var options = SQLiteStoreOptions()
        options.synchronousFull = false
        // 1,000 pages (4 MiB) instead of the default 10,000, so a few MiB show it working.
        options.walCheckpointPages = 1_000
        let store = try SQLiteMessageStore(path: path, options: options)
        let big = JSONValue.string(String(repeating: "y", count: 2_000))
        for offset in Int64(1)...5_000 { try await store.append(message(offset, body: big)) }
        let wal = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int ?? 0
        #expect(wal < 8 << 20, "the WAL grew to \(wal) bytes: checkpoints are not running")
        store.close()
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    /// Under a stream of concurrent appends the WAL is copied into the database file by the
    /// checkpointer's own thread, and the writer makes it start over at its limit. A
    /// background pass under way keeps the writer's checkpoint out until it ends, and a slow
    /// disk (CI's) makes that pass long: the WAL never grows past twice its limit and one
    /// commit's worth of pages (without the writer's checkpoint it grows by every commit).
    @Test func walIsCopiedBesideTheWriterAndStaysBoundedUnderConstantLoad() async throws {
        let path = temporaryDatabase()
        var options = SQLiteStoreOptions()
        options.synchronousFull = false
        options.walCheckpointPages = 400
        let store = try SQLiteMessageStore(path: path, options: options)
        defer { store.close() }
        let rooms = (0..<100).map { RoomKey(channel: "demo", room: "busy-\($0)") }
        let body = JSONValue.string(String(repeating: "z", count: 300))
        let largest = Locked(0)
        // 50 appends in flight all the time, as the bench's publishers: each lane owns two
        // rooms and appends to them in turn (a room's offsets must arrive in order).
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<50 {
                group.addTask {
                    for offset in Int64(1)...128 {
                        for key in [rooms[lane], rooms[lane + 50]] {
                            try await store.append(message(offset, in: key, body: body))
                            let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
                            largest.withLock { $0 = max($0, wal) }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let runs = store.checkpointer.runs
        #expect(runs.background > 0, "no checkpoint ran on the checkpointer's thread")
        // Twice 400 pages, and the commit that crossed it (at most 50 messages of 300 bytes
        // over as many rooms: a page each and their index pages), in 4 KiB pages with 24-byte
        // headers.
        #expect(largest.value <= (2 * 400 + 3 * 64) * 4_120, "the WAL grew to \(largest.value) bytes")
        for key in rooms.prefix(3) {
            #expect(try await store.messages(in: key, after: 0, limit: 1_000).map(\.offset) == Array(1...128))
        }
    }

    /// A database of schema 4 (messages clustered by room) is rewritten as the log of schema
    /// 5 and keeps every message, its id, its client message id and its actions.
    @Test func aVersion4DatabaseIsMigratedToTheMessageLog() async throws {
        let store = try legacyStore(version: 4, rows: """
            INSERT INTO rooms (id, channel, name, last_offset) VALUES (1, 'demo', 'r', 0), (2, 'demo', 'other', 0);
            INSERT INTO messages (room_id, offset, id, ts, body, client_message_id) VALUES
                (1, 1, 'm1', 1700000000000, '"text 1"', 'c1'), (1, 2, 'm2', 1700000000000, '"text 2"', NULL),
                (2, 1, 'm1', 1700000000000, '"text 1"', NULL);
            """)
        defer { store.close() }
        #expect(store.openedAtSchemaVersion == 4)
        // As written by schema 4: no sender.
        func unsent(_ message: Message) -> Message {
            Message(id: message.id, offset: message.offset, timestampMillis: message.timestampMillis, room: message.room,
                    sender: nil, body: message.body)
        }
        #expect(try await store.messages(in: room, after: 0, limit: 10) == [unsent(message(1)), unsent(message(2))])
        #expect(try await store.messages(in: other, after: 0, limit: 10) == [unsent(message(1, in: other))])
        #expect(try store.recover(clientMessageIDsSince: 0).recentPublishes.map(\.clientMessageID) == ["c1"])
        #expect(try await store.message(withID: "m2", in: room) == unsent(message(2)))
        #expect(try await store.message(withID: "m1", in: other) == unsent(message(1, in: other)))
        // Offsets go on from the migrated rows; a duplicate offset is refused.
        try await store.append(message(3))
        await #expect(throws: ParleyError.self) { try await store.append(message(3)) }
        #expect(try await store.messages(in: room, after: 0, limit: 10).map(\.offset) == [1, 2, 3])
    }

    @Test func corruptFileIsRefusedNamingThePath() throws {
        let path = temporaryDatabase()
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: path))
        #expect { try SQLiteMessageStore(path: path) } throws: { error in
            (error as? ParleyError)?.message.contains(path) == true
        }
    }

    @Test func fullDiskFailsAppendsThenRecovers() async throws {
        var options = SQLiteStoreOptions()
        options.synchronousFull = false
        options.maxPageCount = 64
        let store = try SQLiteMessageStore(path: temporaryDatabase(), options: options)
        let big = JSONValue.string(String(repeating: "x", count: 2_000))
        var offset: Int64 = 1
        var failure: ParleyError?
        while failure == nil && offset < 10_000 {
            do { try await store.append(message(offset, body: big)); offset += 1 } catch { failure = error }
        }
        #expect(failure?.code == .unavailable)
        #expect(failure?.message.contains("disk full") == true)
        // Space comes back: the same offset is accepted, and nothing stored was lost.
        let raised: Result<Void, ParleyError> = await withCheckedContinuation { c in store.setMaxPageCount(1 << 20) { c.resume(returning: $0) } }
        try raised.get()
        try await store.append(message(offset, body: big))
        let all = try await store.messages(in: room, after: 0, limit: 100_000)
        #expect(all.map(\.offset) == Array(1...offset))
        store.close()
    }
}

// MARK: message actions

private let bob = Member(id: "b1", clientData: ["name": "bob"])
private let carol = Member(id: "c1", clientData: ["name": "carol"])

/// An action entry at `offset` by `sender` on `target`.
func action(_ offset: Int64, _ kind: MessageAction.Kind, on target: Message, by sender: Member?, body: JSONValue = .null,
            emoji: String? = nil, in key: RoomKey? = nil) -> Message {
    Message(id: "a\(offset)", offset: offset, timestampMillis: 1_700_000_000_000 + offset * 1000, room: key ?? target.room, sender: sender,
            body: body, action: MessageAction(kind, target: MessageReference(id: target.id, offset: target.offset), emoji: emoji))
}

@Suite struct MessageActionStoreContractTests {
    /// History shows each message in its current state and no action; a resume reads the log
    /// as appended, actions in order; `message(withID:)` finds messages, not actions.
    @Test(arguments: StoreKind.keepingActions)
    func historyShowsCurrentStateAndReplayTheLog(kind: StoreKind) async throws {
        let store = try kind.make()
        let first = message(1, body: "helo")
        let reply = Message(id: "m2", offset: 2, timestampMillis: 1_700_000_000_500, room: room, sender: bob, body: "hi alice",
                            replyTo: MessageReference(id: "m1", offset: 1))
        let log = [first, reply,
                   action(3, .edit, on: first, by: nil, body: "hello"),
                   action(4, .react, on: first, by: bob, emoji: "👍"),
                   action(5, .react, on: first, by: carol, emoji: "👍"),
                   action(6, .react, on: first, by: bob, emoji: "❤️"),
                   action(7, .unreact, on: first, by: bob, emoji: "❤️"),
                   action(8, .react, on: first, by: bob, emoji: "👍"),
                   message(9)]
        for entry in log { try await store.append(entry) }

        let replayed = try await store.messages(in: room, after: 0, limit: 100)
        #expect(replayed == log, "a resume reads every entry as it was appended")
        #expect(try await store.messages(in: room, after: 4, limit: 2).map(\.offset) == [5, 6])

        let page = try await store.messages(in: room, before: nil, limit: 10)
        #expect(page.messages.map(\.offset) == [1, 2, 9], "actions are not history entries")
        #expect(!page.hasMore)
        let current = page.messages[0]
        #expect(current.body == "hello" && current.editedMillis == log[2].timestampMillis && current.editCount == 1)
        #expect(current.reactions == [Reaction(emoji: "👍", reactors: [Reactor(id: "b1", name: "bob"), Reactor(id: "c1", name: "carol")])])
        #expect(page.messages[1] == reply, "untouched messages are as appended, replies with their target")

        let older = try await store.messages(in: room, before: 9, limit: 1)
        #expect(older.messages.map(\.offset) == [2] && older.hasMore, "limit counts messages; actions are walked over")
        #expect(try await store.messages(in: room, before: 2, limit: 5).messages == [current])
        #expect(try await store.messages(in: room, before: 9, limit: 5, maxBytes: 1).messages.map(\.offset) == [2])

        #expect(try await store.message(withID: "m1", in: room) == current)
        #expect(try await store.message(withID: "m2", in: room) == reply)
        #expect(try await store.message(withID: "a3", in: room) == nil, "an action is no message")
        #expect(try await store.message(withID: "m1", in: other) == nil, "ids are per room")
        #expect(try await store.message(withID: "nope", in: room) == nil)
    }

    /// A delete by its author is the operator's tombstone, and the edits of it lose their text
    /// too; replay shows both as tombstones, the delete in its place.
    @Test(arguments: StoreKind.keepingActions)
    func aDeleteTombstonesTheMessageAndItsEdits(kind: StoreKind) async throws {
        let store = try kind.make()
        let first = message(1, body: "my secret")
        try await store.append(first)
        try await store.append(action(2, .edit, on: first, by: nil, body: "my secret, edited"))
        try await store.append(action(3, .react, on: first, by: bob, emoji: "👀"))
        try await store.append(action(4, .delete, on: first, by: nil))
        try await store.append(action(5, .edit, on: first, by: nil, body: "late"))

        let replayed = try await store.messages(in: room, after: 0, limit: 10)
        #expect(replayed.map(\.offset) == [1, 2, 3, 4, 5])
        #expect(replayed[0] == first.tombstone && replayed[1].isDeleted && replayed[1].body == .null)
        #expect(replayed[2].action?.kind == .react && replayed[3].action?.kind == .delete)
        // An edit stored after the delete (it passed its checks just before) keeps no text.
        #expect(replayed[4].isDeleted && replayed[4].body == .null, "\(replayed[4])")
        let page = try await store.messages(in: room, before: nil, limit: 10)
        #expect(page.messages == [first.tombstone], "an edit after the delete changes nothing")
        #expect(try await store.message(withID: "m1", in: room)?.isDeleted == true)
        #expect(page.messages[0].reactions.isEmpty && page.messages[0].editedMillis == nil)
    }

    /// The operator's delete and the author's are one tombstone: the edits go as well.
    @Test(arguments: StoreKind.keepingActions)
    func anOperatorDeleteAlsoTombstonesTheEdits(kind: StoreKind) async throws {
        let store = try kind.make()
        let first = message(1)
        try await store.append(first)
        try await store.append(action(2, .edit, on: first, by: nil, body: "text, edited"))
        #expect(try await store.deleteMessage(in: room, offset: 1))
        try await store.append(action(3, .edit, on: first, by: nil, body: "raced the delete"))
        let replayed = try await store.messages(in: room, after: 0, limit: 10)
        #expect(replayed.map(\.isDeleted) == [true, true, true])
        #expect(replayed[2].body == .null)
        #expect(try await store.messages(in: room, before: nil, limit: 10).messages == [first.tombstone])
    }

    /// An action whose target is not there (retention dropped it, or it never was) is logged
    /// and changes nothing.
    @Test(arguments: StoreKind.keepingActions)
    func anActionOnAMissingTargetChangesNothing(kind: StoreKind) async throws {
        let store = try kind.make(retention: StoreRetention(maxMessagesPerRoom: 3))
        for offset in Int64(1)...3 { try await store.append(message(offset)) }
        try await store.append(message(4))
        try await store.enforceRetention(nowMillis: 0)
        let gone = message(1)
        try await store.append(action(5, .edit, on: gone, by: nil, body: "too late"))
        try await store.append(action(6, .react, on: Message(id: "x", offset: 99, timestampMillis: 0, room: room, sender: nil, body: .null),
                                      by: bob, emoji: "👍"))
        #expect(try await store.message(withID: "m1", in: room) == nil)
        #expect(try await store.messages(in: room, before: nil, limit: 10).messages.allSatisfy { $0.editCount == 0 && $0.reactions.isEmpty })
        #expect(try store.recover(clientMessageIDsSince: 0).lastOffsets[room] == 6)
    }

    @Test func actionStateSurvivesReopen() async throws {
        let path = temporaryDatabase()
        let first = message(1)
        do {
            let store = try StoreKind.sqlite.make(path: path) as! SQLiteMessageStore
            try await store.append(first)
            try await store.append(action(2, .edit, on: first, by: nil, body: "edited"))
            try await store.append(action(3, .react, on: first, by: bob, emoji: "🎉"))
            store.close()
        }
        let again = try SQLiteMessageStore(path: path)
        defer { again.close() }
        let current = try #require(try await again.message(withID: "m1", in: room))
        #expect(current.body == "edited" && current.editCount == 1 && current.reactions.map(\.emoji) == ["🎉"])
        #expect(try await again.messages(in: room, after: 0, limit: 10).map(\.action?.kind) == [nil, .edit, .react])
    }
}
