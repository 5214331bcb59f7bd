import Foundation
import Testing
import ParleyCore
import ParleyRedis
import ParleySQLite

/// Every read-state store, run through one contract (``ReadStateStore``).
enum ReadStateStoreKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case memory, sqlite, redis, redisCluster
    var description: String { rawValue }

    func make(maxRoomsPerUser: Int = 500, maxMarks: Int = ReadMark.maxStored) throws -> any ReadStateStore {
        switch self {
        case .memory:
            return InMemoryReadStateStore(maxRoomsPerUser: maxRoomsPerUser, maxMarks: maxMarks)
        case .sqlite:
            let path = NSTemporaryDirectory() + "parley-reads-\(UUID().uuidString).sqlite3"
            return try SQLiteReadStateStore(path: path, maxRoomsPerUser: maxRoomsPerUser, maxMarks: maxMarks)
        case .redis, .redisCluster:
            let deployment = try RedisDeployment.shared(self == .redis ? .single : .cluster)
            return RedisReadStateStore(redis: deployment.client, keyspace: RedisDeployment.freshKeyspace(), maxRoomsPerUser: maxRoomsPerUser,
                                       maxMarks: maxMarks)
        }
    }
}

@Suite struct ReadStateStoreContractTests {
    let general = RoomKey(channel: "ch", room: "general")
    let random = RoomKey(channel: "ch", room: "random")

    func mark(_ user: String, _ room: RoomKey, _ offset: Int64, at time: Int64, name: String? = nil, shares: Bool = true) -> ReadMark {
        ReadMark(user: user, room: room, offset: offset, name: name ?? user.capitalized, sharesReceipts: shares, updatedMillis: time)
    }

    /// The store's bound, every user and channel together: a new mark past it drops the
    /// least recently touched of anyone's (from every list: the user's marks, the room's
    /// readers and users), never the one recorded; touching a mark keeps it.
    @Test(arguments: ReadStateStoreKind.allCases)
    func theStoreKeepsItsMostRecentlyTouchedMarks(kind: ReadStateStoreKind) async throws {
        let store = try kind.make(maxMarks: 3)
        _ = try await store.record(mark("ann", general, 5, at: 100))
        _ = try await store.record(mark("bob", general, 6, at: 110))
        _ = try await store.record(mark("cy", RoomKey(channel: "other", room: "x"), 1, at: 120))
        _ = try await store.record(mark("bob", general, 7, at: 130))  // touched: now the newest
        _ = try await store.record(mark("dee", random, 2, at: 140))
        #expect(try await store.mark(of: "ann", in: general) == nil, "the least recently touched went")
        #expect(try await store.readers(of: general, limit: 10).map(\.user) == ["bob"])
        #expect(try await store.users(of: general, limit: 10) == ["bob"])
        #expect(try await store.marks(of: "ann", in: "ch", limit: 10).isEmpty)
        _ = try await store.record(mark("eve", random, 3, at: 150))
        #expect(try await store.mark(of: "cy", in: RoomKey(channel: "other", room: "x")) == nil)
        #expect(try await store.mark(of: "bob", in: general)?.offset == 7)
        #expect(Set(try await store.users(of: random, limit: 10)) == ["dee", "eve"])
        // A mark recorded with an old time is kept all the same (the others go).
        _ = try await store.record(mark("fay", random, 1, at: 10))
        #expect(try await store.mark(of: "fay", in: random) != nil)
        #expect(try await store.users(of: random, limit: 10).contains("fay"))
    }

    @Test(arguments: ReadStateStoreKind.allCases)
    func aMarkOnlyMovesForward(kind: ReadStateStoreKind) async throws {
        let store = try kind.make()
        #expect(try await store.mark(of: "alice", in: general) == nil)
        let first = try await store.record(mark("alice", general, 0, at: 100))
        #expect(first.added && !first.moved && first.mark.offset == 0, "offset 0 only adds the conversation")
        let read = try await store.record(mark("alice", general, 7, at: 200))
        #expect(!read.added && read.moved && read.mark.offset == 7)
        let back = try await store.record(mark("alice", general, 3, at: 300, name: "Alice L."))
        #expect(!back.moved && back.mark.offset == 7, "never back")
        #expect(back.mark.name == "Alice L." && back.mark.updatedMillis == 300, "the newer name and time are kept")
        let stored = try await store.mark(of: "alice", in: general)
        #expect(stored == back.mark)
        #expect(try await store.mark(of: "alice", in: RoomKey(channel: "other", room: "general")) == nil, "per channel")
        #expect(try await store.mark(of: "bob", in: general) == nil, "per user")
    }

    @Test(arguments: ReadStateStoreKind.allCases)
    func aUsersConversationsAreListedMostRecentFirstAndBounded(kind: ReadStateStoreKind) async throws {
        let store = try kind.make(maxRoomsPerUser: 3)
        for (index, room) in ["a", "b", "c"].enumerated() {
            _ = try await store.record(mark("alice", RoomKey(channel: "ch", room: room), 0, at: Int64(100 + index)))
        }
        _ = try await store.record(mark("alice", RoomKey(channel: "ch", room: "a"), 4, at: 200))
        #expect(try await store.marks(of: "alice", in: "ch", limit: 10).map(\.room.room) == ["a", "c", "b"])
        #expect(try await store.marks(of: "alice", in: "ch", limit: 2).map(\.room.room) == ["a", "c"])
        // A fourth conversation drops the one touched least recently (b).
        let added = try await store.record(mark("alice", RoomKey(channel: "ch", room: "d"), 0, at: 300))
        #expect(added.added)
        #expect(try await store.marks(of: "alice", in: "ch", limit: 10).map(\.room.room) == ["d", "a", "c"])
        #expect(try await store.mark(of: "alice", in: RoomKey(channel: "ch", room: "b")) == nil)
        #expect(try await store.marks(of: "bob", in: "ch", limit: 10).isEmpty)
    }

    @Test(arguments: ReadStateStoreKind.allCases)
    func readersShareTheirReceiptsFurthestFirst(kind: ReadStateStoreKind) async throws {
        let store = try kind.make()
        _ = try await store.record(mark("alice", general, 5, at: 1))
        _ = try await store.record(mark("bob", general, 9, at: 2))
        _ = try await store.record(mark("carol", general, 7, at: 3, shares: false))
        _ = try await store.record(mark("dave", general, 0, at: 4))
        _ = try await store.record(mark("erin", random, 20, at: 5))
        #expect(try await store.readers(of: general, limit: 10)
                == [ReadReceipt(user: "bob", name: "Bob", offset: 9), ReadReceipt(user: "alice", name: "Alice", offset: 5)],
                "private and unread marks are not receipts")
        #expect(try await store.readers(of: general, limit: 1).map(\.user) == ["bob"])
        // Alice reads further; Bob goes private.
        _ = try await store.record(mark("alice", general, 12, at: 6))
        _ = try await store.record(mark("bob", general, 9, at: 7, shares: false))
        #expect(try await store.readers(of: general, limit: 10) == [ReadReceipt(user: "alice", name: "Alice", offset: 12)])
        // Carol shares again: her mark counts from where it stands.
        _ = try await store.record(mark("carol", general, 1, at: 8))
        #expect(try await store.readers(of: general, limit: 10).map(\.offset) == [12, 7])
    }

    @Test(arguments: ReadStateStoreKind.allCases)
    func aDroppedConversationTakesItsReceiptWithIt(kind: ReadStateStoreKind) async throws {
        let store = try kind.make(maxRoomsPerUser: 1)
        _ = try await store.record(mark("alice", general, 5, at: 1))
        _ = try await store.record(mark("alice", random, 2, at: 2))
        #expect(try await store.readers(of: general, limit: 10).isEmpty)
        #expect(try await store.readers(of: random, limit: 10).map(\.user) == ["alice"])
    }
}

extension ReadStateStoreContractTests {
    @Test(arguments: ReadStateStoreKind.allCases)
    func anEmptyNameKeepsTheStoredOne(kind: ReadStateStoreKind) async throws {
        let store = try kind.make()
        _ = try await store.record(mark("bob", general, 3, at: 1, name: "Bob B."))
        // Alice opens a direct room with Bob: his conversation is touched, his name kept.
        let touched = try await store.record(mark("bob", general, 0, at: 2, name: ""))
        #expect(touched.mark.name == "Bob B." && touched.mark.offset == 3 && touched.mark.updatedMillis == 2)
        #expect(try await store.readers(of: general, limit: 5) == [ReadReceipt(user: "bob", name: "Bob B.", offset: 3)])
    }
}

extension ReadStateStoreContractTests {
    @Test(arguments: ReadStateStoreKind.allCases)
    func aConversationOpenedForSomeoneElseNeverPushesTheirsOut(kind: ReadStateStoreKind) async throws {
        let store = try kind.make(maxRoomsPerUser: 2)
        _ = try await store.record(mark("alice", general, 1, at: 1))
        _ = try await store.record(mark("alice", random, 1, at: 2))
        let spam = try await store.record(mark("alice", RoomKey(channel: "ch", room: "dm+alice+mallory"), 0, at: 3, name: ""),
                                          evicting: false)
        #expect(!spam.added)
        #expect(try await store.marks(of: "alice", in: "ch", limit: 10).map(\.room.room) == ["random", "general"])
        // An existing one is still touched; with room to spare a new one is added.
        #expect(try await store.record(mark("alice", general, 0, at: 4, name: ""), evicting: false).mark.offset == 1)
        let roomy = try kind.make(maxRoomsPerUser: 3)
        #expect(try await roomy.record(mark("bob", general, 0, at: 1, name: ""), evicting: false).added)
    }
}

extension ReadStateStoreContractTests {
    @Test(arguments: ReadStateStoreKind.allCases)
    func aRoomsUsersAreEveryoneWhoHasItPrivateOrNot(kind: ReadStateStoreKind) async throws {
        let store = try kind.make(maxRoomsPerUser: 1)
        _ = try await store.record(mark("alice", general, 3, at: 1))
        _ = try await store.record(mark("bob", general, 0, at: 2, shares: false))
        _ = try await store.record(mark("carol", random, 1, at: 3))
        #expect(try await store.users(of: general, limit: 10).sorted() == ["alice", "bob"])
        #expect(try await store.users(of: general, limit: 1).count == 1)
        // Alice's only conversation becomes another room: she is no user of general any more.
        _ = try await store.record(mark("alice", random, 0, at: 4))
        #expect(try await store.users(of: general, limit: 10) == ["bob"])
    }
}
