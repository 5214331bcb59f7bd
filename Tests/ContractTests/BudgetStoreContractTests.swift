import Testing
import ParleyCore
import ParleyRedis

/// Every budget store, run through one contract (``BudgetStore``).
enum BudgetStoreKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case memory, redis, redisCluster
    var description: String { rawValue }

    func make() throws -> any BudgetStore {
        switch self {
        case .memory:
            return InMemoryBudgetStore()
        case .redis, .redisCluster:
            let deployment = try RedisDeployment.shared(self == .redis ? .single : .cluster)
            return RedisBudgetStore(redis: deployment.client, keyspace: RedisDeployment.freshKeyspace())
        }
    }
}

@Suite struct BudgetStoreContractTests {
    @Test(arguments: BudgetStoreKind.allCases)
    func anAllowanceIsSpentRefilledAndGivenBackPerKey(kind: BudgetStoreKind) throws {
        let store = try kind.make()
        let period: Int64 = 100_000  // 1,000 per 100 s: 10 per second
        #expect(try store.take(600, key: "ip:a", allowance: 1_000, periodMillis: period, nowMillis: 1_000))
        #expect(try !store.take(600, key: "ip:a", allowance: 1_000, periodMillis: period, nowMillis: 1_000), "400 left")
        #expect(try store.take(600, key: "ip:b", allowance: 1_000, periodMillis: period, nowMillis: 1_000), "another key")
        // 20 s later 200 more have come back: 600 fit again.
        #expect(try store.take(600, key: "ip:a", allowance: 1_000, periodMillis: period, nowMillis: 21_000))
        #expect(try !store.take(100, key: "ip:a", allowance: 1_000, periodMillis: period, nowMillis: 21_000), "nothing left")
        // A refund gives back; never more than the whole allowance.
        #expect(try store.take(-300, key: "ip:a", allowance: 1_000, periodMillis: period, nowMillis: 21_000))
        #expect(try store.take(300, key: "ip:a", allowance: 1_000, periodMillis: period, nowMillis: 21_000))
        #expect(try store.take(-5_000, key: "ip:c", allowance: 1_000, periodMillis: period, nowMillis: 21_000))
        #expect(try !store.take(1_001, key: "ip:c", allowance: 1_000, periodMillis: period, nowMillis: 21_000))
        // Long after, the allowance is whole again, and no more than whole.
        #expect(try store.take(1_000, key: "ip:a", allowance: 1_000, periodMillis: period, nowMillis: 10_000_000))
        #expect(try !store.take(1, key: "ip:a", allowance: 1_000, periodMillis: period, nowMillis: 10_000_000))
    }
}
