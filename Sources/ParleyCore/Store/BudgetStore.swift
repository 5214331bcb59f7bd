import Synchronization

/// Allowances that refill continuously over a period (token buckets: the whole allowance as
/// burst), keyed by a client address or `*` for the whole server, shared by every node that
/// uses the same store: the day's upload bytes per address, for example, hold across a
/// cluster rather than once per node. The memory backend serves one process, the Redis one
/// (`RedisBudgetStore`) a cluster; both pass `BudgetStoreContractTests`.
///
/// Blocking: called on worker threads (file work), never on an event loop.
public protocol BudgetStore: Sendable {
    /// Takes `amount` from `key`'s allowance (`allowance` per `periodMillis`) if that much is
    /// left; false (nothing taken) if not. A negative `amount` gives back (at most up to a
    /// full allowance) and returns true.
    func take(_ amount: Double, key: String, allowance: Int, periodMillis: Int64, nowMillis: Int64) throws(ParleyError) -> Bool
}

/// The memory backend: token buckets in this process, at most ``maxKeys`` of them (full
/// ones are forgotten first, then the fullest; the server-wide key `*` never:
/// ``TokenBucket/prune(_:maxKeys:pinned:nowMillis:)``).
public final class InMemoryBudgetStore: BudgetStore {
    public static let maxKeys = 10_000
    private let buckets = Mutex<[String: TokenBucket]>([:])

    public init() {}

    /// Keys held now (tests).
    public var keyCount: Int { buckets.withLock { $0.count } }

    /// Never fails (it satisfies the protocol's throwing requirement without throwing).
    public func take(_ amount: Double, key: String, allowance: Int, periodMillis: Int64, nowMillis: Int64) -> Bool {
        update(key, allowance: allowance, periodMillis: periodMillis, nowMillis: nowMillis) { bucket in
            // A refund (negative) always goes in; it is capped at the burst by the next refill.
            bucket.take(amount, nowMillis: nowMillis) || amount < 0
        }
    }

    /// What is left of `key`'s allowance now (nothing taken).
    public func available(key: String, allowance: Int, periodMillis: Int64, nowMillis: Int64) -> Double {
        update(key, allowance: allowance, periodMillis: periodMillis, nowMillis: nowMillis) { $0.available(nowMillis: nowMillis) }
    }

    private func update<T>(_ key: String, allowance: Int, periodMillis: Int64, nowMillis: Int64,
                           _ body: (inout TokenBucket) -> T) -> T {
        buckets.withLock { buckets in
            if buckets[key] == nil { TokenBucket.prune(&buckets, maxKeys: Self.maxKeys, pinned: ["*"], nowMillis: nowMillis) }
            let rate = Double(allowance) / (Double(max(1, periodMillis)) / 1000), burst = Double(allowance)
            var bucket = buckets[key].map { $0.burst == burst ? $0 : $0.resized(ratePerSecond: rate, burst: burst) }
                ?? TokenBucket(ratePerSecond: rate, burst: burst)
            let result = body(&bucket)
            buckets[key] = bucket
            return result
        }
    }
}
