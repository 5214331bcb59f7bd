import Foundation
import Testing
import ParleyCore
import ParleyRedis
import ParleySQLite

/// Every ban store, run through one contract (``BanStore``).
enum BanStoreKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case memory, sqlite, redis, redisCluster
    var description: String { rawValue }

    func make() throws -> any BanStore {
        switch self {
        case .memory:
            return InMemoryBanStore()
        case .sqlite:
            let path = NSTemporaryDirectory() + "parley-bans-\(UUID().uuidString).sqlite3"
            return try SQLiteBanStore(path: path)
        case .redis, .redisCluster:
            let deployment = try RedisDeployment.shared(self == .redis ? .single : .cluster)
            return RedisBanStore(redis: deployment.client, keyspace: RedisDeployment.freshKeyspace())
        }
    }
}

@Suite struct BanStoreContractTests {
    @Test(arguments: BanStoreKind.allCases)
    func bansGetUniqueIdsAndOneTargetHasOneBan(kind: BanStoreKind) async throws {
        let store = try kind.make()
        let empty = try await store.load(nowMillis: 0)
        #expect(empty.bans.isEmpty)
        let mallory = try await store.add(.name("  Mallory "), reason: "spam", createdMillis: 10, untilMillis: 10_000)
        #expect(mallory.target == .name("mallory"), "names are stored normalized")
        let address = try await store.add(.ip("2001:db8::1"), reason: "flood\nwith a newline", createdMillis: 20, untilMillis: 20_000)
        #expect(address.id != mallory.id)
        // The same target again replaces the first ban, under a new id.
        let again = try await store.add(.name("MALLORY"), reason: "again", createdMillis: 30, untilMillis: 30_000)
        #expect(again.id != mallory.id && again.id != address.id)
        let loaded = try await store.load(nowMillis: 100)
        #expect(loaded.bans == [address, again], "oldest first, one per target, reasons kept as they were")
        #expect(loaded.bans.first?.reason == "flood\nwith a newline")
        #expect(try store.loadNow(nowMillis: 100, timeoutMillis: 2_000) == loaded, "the blocking read a starting server uses")
    }

    @Test(arguments: BanStoreKind.allCases)
    func removeIsTrueOnceAndExpiredBansAreForgotten(kind: BanStoreKind) async throws {
        let store = try kind.make()
        let short = try await store.add(.ip("203.0.113.9"), reason: "", createdMillis: 0, untilMillis: 1_000)
        let long = try await store.add(.ip("203.0.113.10"), reason: "", createdMillis: 0, untilMillis: 100_000)
        #expect(try await store.load(nowMillis: 999).bans.map(\.id) == [short.id, long.id])
        #expect(try await store.load(nowMillis: 1_000).bans.map(\.id) == [long.id], "expired at its time")
        #expect(try await store.load(nowMillis: 0).bans.map(\.id) == [long.id], "and forgotten for good")
        #expect(try await store.remove(id: long.id))
        #expect(try await !store.remove(id: long.id))
        #expect(try await !store.remove(id: 987_654))
        #expect(try await store.load(nowMillis: 0).bans.isEmpty)
    }

    @Test(arguments: BanStoreKind.allCases)
    func everyChangeMovesTheVersion(kind: BanStoreKind) async throws {
        let store = try kind.make()
        var seen: Set<Int64> = [try await store.version()]
        let ban = try await store.add(.name("eve"), reason: "", createdMillis: 0, untilMillis: 60_000)
        let afterAdd = try await store.version()
        #expect(!seen.contains(afterAdd))
        seen.insert(afterAdd)
        #expect(try await store.load(nowMillis: 1).version == afterAdd, "load reports the version it read")
        #expect(try await !store.remove(id: ban.id + 1000))
        #expect(try await store.version() == afterAdd, "a remove that found nothing changes nothing")
        #expect(try await store.remove(id: ban.id))
        let afterRemove = try await store.version()
        #expect(!seen.contains(afterRemove))
    }

    /// SQLite keeps bans across a restart of the process (a reopen of the file).
    @Test func sqliteBansOutliveAReopen() async throws {
        let path = NSTemporaryDirectory() + "parley-bans-\(UUID().uuidString).sqlite3"
        let first = try SQLiteBanStore(path: path)
        let ban = try await first.add(.ip("198.51.100.7"), reason: "abuse", createdMillis: 5, untilMillis: 50_000)
        first.close()
        let second = try SQLiteBanStore(path: path)
        #expect(try await second.load(nowMillis: 6).bans == [ban])
        let next = try await second.add(.name("x"), reason: "", createdMillis: 7, untilMillis: 50_000)
        #expect(next.id > ban.id, "ids keep growing after a reopen")
    }
}
