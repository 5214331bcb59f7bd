import ParleyCore
import ParleyIO
import ParleyRedis
import Synchronization

/// Per-address budgets that hold across the cluster, not once per node: the bytes an address
/// may publish and read as history, its REST requests, its downloads and its Socket.IO polls.
///
/// A node still decides each request on its own buckets (``IPRateLimiter``: no Redis round
/// trip on a publish). Every ``intervalMillis`` it reports what each address spent here to
/// that address's bucket in Redis (one script: refill, spend, answer what is left; the same
/// rate and burst), and lowers its own bucket to the cluster's level. So an address that
/// spends its budget through one node is refused by every other within about an interval,
/// and one that spreads its requests over N nodes gets the budget once (plus at most a
/// burst per node before the first report), not N times.
///
/// Bounded: at most ``maxAddressesPerSync`` addresses per budget per interval (the others
/// keep their spending for the next), one script call each. When Redis does not answer, the
/// nodes fall back to their own buckets, which is what they enforce anyway.
final class ClusterBudgetSync: Sendable {
    struct Budget: Sendable {
        /// Part of the Redis key (`P:budget:{ip-NAME:ADDRESS}`).
        let name: String
        let limiter: IPRateLimiter
    }

    static let intervalMillis = 250
    static let maxAddressesPerSync = 512

    let budgets: [Budget]
    private let store: RedisBudgetStore
    private let clock: any WallClock
    private let reported = Atomic<Int>(0)
    private let failures = Atomic<Int>(0)

    init(budgets: [Budget], store: RedisBudgetStore, clock: any WallClock) {
        self.budgets = budgets
        self.store = store
        self.clock = clock
        for budget in budgets { budget.limiter.shareAcrossNodes() }
    }

    /// Reports every ``intervalMillis`` from `loop` (what a report costs the loop: taking
    /// the spending out of the buckets; Redis answers on its own threads).
    func start(on loop: EventLoop) {
        loop.execute { [self] in
            // Kept alive by the loop until it stops, as the node's other timers.
            LoopTimer(loop: loop).start(after: UInt64(Self.intervalMillis), repeating: UInt64(Self.intervalMillis),
                                        keepAlive: true) { [self] in sync() }
        }
    }

    /// One report of every budget's spending since the last.
    func sync() {
        let now = clock.nowMillis()
        for budget in budgets {
            let limiter = budget.limiter
            for (address, amount) in limiter.takeUnsynced(limit: Self.maxAddressesPerSync) {
                reported.add(1, ordering: .relaxed)
                store.charge(amount, key: "ip-\(budget.name):\(address)", ratePerSecond: limiter.ratePerSecond,
                             burst: limiter.burst, nowMillis: now) { [self] result in
                    switch result {
                    case .success(let tokens): limiter.adopt(address, clusterTokens: tokens, nowMillis: clock.nowMillis())
                    case .failure: self.failures.add(1, ordering: .relaxed)
                    }
                }
            }
        }
    }

    /// `/metrics` lines.
    func writeMetrics(into out: inout PrometheusText) {
        out.family("parley_cluster_budget_reports_total", "counter",
                   help: "Per-address spending (publish and history bytes, REST requests, downloads, polls) reported to the cluster's shared buckets.")
        out.sample("parley_cluster_budget_reports_total", reported.load(ordering: .relaxed))
        out.family("parley_cluster_budget_report_failures_total", "counter",
                   help: "Reports Redis did not take (the node kept deciding on its own buckets).")
        out.sample("parley_cluster_budget_report_failures_total", failures.load(ordering: .relaxed))
    }
}
