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

/// The shared buckets behind per-address budgets in a cluster (``RedisBudgetStore/charge``):
/// what every node reports is spent from one bucket, into debt, refilled at the same rate as
/// the nodes' own.
@Suite struct RedisSharedBucketTests {
    func charge(_ store: RedisBudgetStore, _ amount: Double, key: String = "ip-publish:192.0.2.1", at millis: Int64) async throws -> Double {
        try await withCheckedThrowingContinuation { continuation in
            store.charge(amount, key: key, ratePerSecond: 1_000, burst: 4_000, nowMillis: millis) { continuation.resume(with: $0) }
        }
    }

    @Test(arguments: [BudgetStoreKind.redis, .redisCluster])
    func nodesSpendOneBucketIntoDebtAndItRefills(kind: BudgetStoreKind) async throws {
        let deployment = try RedisDeployment.shared(kind == .redis ? .single : .cluster)
        let keyspace = RedisDeployment.freshKeyspace()
        // Two nodes' stores over the same keyspace.
        let nodeA = RedisBudgetStore(redis: deployment.client, keyspace: keyspace)
        let nodeB = RedisBudgetStore(redis: deployment.client, keyspace: keyspace)
        #expect(try await charge(nodeA, 3_000, at: 10_000) == 1_000)
        #expect(try await charge(nodeB, 3_000, at: 10_000) == -2_000, "B's report is spent from A's bucket")
        #expect(try await charge(nodeA, 9_000, at: 10_000) == -4_000, "no deeper than one burst")
        #expect(try await charge(nodeB, 0, key: "ip-publish:198.51.100.7", at: 10_000) == 4_000, "another address")
        // 1,000 a second come back, up to the burst.
        #expect(try await charge(nodeB, 0, at: 13_000) == -1_000)
        #expect(try await charge(nodeA, 0, at: 60_000) == 4_000)
    }
}
