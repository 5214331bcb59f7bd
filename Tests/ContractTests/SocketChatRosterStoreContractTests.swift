import Testing
import ParleyCore
import ParleyRedis

/// Every SocketChat roster store, run through one contract (``SocketChatRosterStore``).
enum RosterStoreKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case memory, redis, redisCluster
    var description: String { rawValue }

    func make() throws -> any SocketChatRosterStore {
        switch self {
        case .memory:
            return InMemorySocketChatRosterStore()
        case .redis, .redisCluster:
            let deployment = try RedisDeployment.shared(self == .redis ? .single : .cluster)
            return RedisSocketChatRosterStore(redis: deployment.client, keyspace: RedisDeployment.freshKeyspace())
        }
    }
}

private func user(_ nickname: String, _ id: String = "sid") -> SocketChatUser {
    SocketChatUser(id: id, nickname: nickname, isConnected: false)
}

@Suite struct SocketChatRosterStoreContractTests {
    @Test(arguments: RosterStoreKind.allCases)
    func oneEntryPerNicknameOldestFirstAndBounded(kind: RosterStoreKind) async throws {
        let store = try kind.make()
        let start = try await store.version()
        try await store.departed(user("sam", "s1"), leftMillis: 100, maxDeparted: 3)
        try await store.departed(user("ann"), leftMillis: 200, maxDeparted: 3)
        try await store.departed(user("sam", "s2"), leftMillis: 300, maxDeparted: 3)
        var loaded = try await store.load(nowMillis: 400, lifetimeMillis: 10_000)
        #expect(loaded.entries.map(\.user.nickname) == ["ann", "sam"], "the latest departure of sam, oldest first")
        #expect(loaded.entries.last?.user.id == "s2")
        #expect(loaded.version != start)
        try await store.departed(user("bob"), leftMillis: 500, maxDeparted: 3)
        try await store.departed(user("cy"), leftMillis: 600, maxDeparted: 3)
        loaded = try await store.load(nowMillis: 700, lifetimeMillis: 10_000)
        #expect(loaded.entries.map(\.user.nickname) == ["sam", "bob", "cy"], "at most 3: the oldest (ann) went")
    }

    @Test(arguments: RosterStoreKind.allCases)
    func returnedAndExpiredUsersAreForgottenAndChangesMoveTheVersion(kind: RosterStoreKind) async throws {
        let store = try kind.make()
        try await store.departed(user("old"), leftMillis: 1_000, maxDeparted: 10)
        try await store.departed(user("new"), leftMillis: 5_000, maxDeparted: 10)
        let before = try await store.version()
        try await store.returned(nickname: "nobody")
        #expect(try await store.version() == before, "forgetting nobody changes nothing")
        let loaded = try await store.load(nowMillis: 6_000, lifetimeMillis: 3_000)
        #expect(loaded.entries.map(\.user.nickname) == ["new"], "old left more than the lifetime ago")
        try await store.returned(nickname: "new")
        #expect(try await store.version() != before)
        #expect(try await store.load(nowMillis: 6_000, lifetimeMillis: 3_000).entries.isEmpty)
    }
}
