import ParleyCore
import Synchronization

/// Per-IP token buckets: REST requests, Socket.IO polls, bytes published and of history read.
/// The table is bounded and pruned a little whenever an address is added (never all at once
/// under a lock): addresses whose bucket has refilled are forgotten, and past the bound the
/// oldest address goes. Split
/// into shards by address, so requests from different addresses rarely wait for one another.
final class IPRateLimiter: Sendable {
    let ratePerSecond: Double
    let burst: Double
    /// Most addresses remembered (across shards).
    let capacity: Int
    private let shards: [ShardLock]

    /// One shard behind its lock (a `Mutex` cannot live in an array directly: it is not copyable).
    private final class ShardLock: Sendable {
        let lock = Mutex(Shard())
    }

    private struct Shard {
        var buckets: [String: TokenBucket] = [:]
        /// Addresses in the order they were last checked by the pruner (oldest first).
        var order = FIFO<String>()
        /// Shared across nodes: what each address spent here since it was last reported
        /// (``takeUnsynced(limit:)``), at most one entry per bucket.
        var unsynced: [String: Double] = [:]
    }

    /// Cluster mode: spending is recorded for ``ClusterBudgetSync``, which reports it to
    /// Redis and lowers the buckets to what the whole cluster has left.
    private let shared = Atomic<Bool>(false)
    private let nextReportShard = Atomic<Int>(0)

    /// Records spending from now on, for a ``ClusterBudgetSync``.
    func shareAcrossNodes() { shared.store(true, ordering: .relaxed) }

    /// Entries looked at by the pruner per address added.
    static let pruneStep = 2

    init(ratePerSecond: Double, burst: Double, capacity: Int = 100_000, shardCount: Int = 16) {
        self.ratePerSecond = ratePerSecond
        self.burst = burst
        self.capacity = max(shardCount, capacity)
        shards = (0..<shardCount).map { _ in ShardLock() }
    }

    /// Addresses remembered now.
    var trackedAddresses: Int { shards.reduce(0) { $0 + $1.lock.withLock { $0.buckets.count } } }

    /// An address as the limiter counts it: its limit key (an IPv6 client's /64) and that
    /// key's hash, worked out once. A session that charges the same address over and over
    /// keeps one (``ChatSession``), so a publish does not parse its address again.
    struct Key: Sendable, Equatable {
        let address: String
        let text: String
        let hash: Int
        init(_ address: String) {
            self.address = address
            text = IPAddress.limitKey(address)
            hash = text.hashValue
        }
    }

    /// Takes a token for `ip`; false when it has none left.
    func allow(ip address: String, nowMillis: Int64) -> Bool {
        allow(Key(address), nowMillis: nowMillis)
    }

    func allow(_ key: Key, nowMillis: Int64) -> Bool {
        withBucket(of: key, nowMillis: nowMillis) { bucket in
            let allowed = bucket.take(nowMillis: nowMillis)
            return (allowed, allowed ? 1 : 0)
        }
    }

    /// Whether `ip` has anything left of a budget charged afterwards (``charge(_:_:nowMillis:)``):
    /// a cost known only once the work is done, such as the bytes of a history page.
    func hasBudget(_ key: Key, nowMillis: Int64) -> Bool {
        withBucket(of: key, nowMillis: nowMillis) { ($0.available(nowMillis: nowMillis) > 0, 0) }
    }

    /// Whether `ip` had anything left, and if so spends `amount` (into debt if need be): one
    /// look at the bucket, for a cost known before the work (the bytes of a publish).
    func spend(_ key: Key, _ amount: Double, nowMillis: Int64) -> Bool {
        withBucket(of: key, nowMillis: nowMillis) { bucket in
            guard bucket.available(nowMillis: nowMillis) > 0 else { return (false, 0) }
            bucket.charge(amount, nowMillis: nowMillis)
            return (true, amount)
        }
    }

    /// Spends `amount` of `ip`'s budget, into debt if need be (down to one burst below empty):
    /// the address waits until it is paid back.
    func charge(_ key: Key, _ amount: Double, nowMillis: Int64) {
        withBucket(of: key, nowMillis: nowMillis) { bucket in
            bucket.charge(amount, nowMillis: nowMillis)
            return ((), amount)
        }
    }

    /// Takes out what addresses spent here since the last call, at most `limit` of them (the
    /// rest wait for the next): cluster mode reports it to the cluster's shared buckets.
    func takeUnsynced(limit: Int) -> [(address: String, amount: Double)] {
        var taken: [(address: String, amount: Double)] = []
        // Each call starts one shard further, so no shard's addresses wait behind the others'.
        let first = nextReportShard.add(1, ordering: .relaxed).oldValue
        for step in 0..<shards.count where taken.count < limit {
            shards[(first + step) % shards.count].lock.withLock { shard in
                while taken.count < limit, let (address, amount) = shard.unsynced.popFirst() {
                    taken.append((address, amount))
                }
            }
        }
        return taken
    }

    /// The cluster's bucket of `address` (its limit key, as ``takeUnsynced(limit:)`` gave it)
    /// had `clusterTokens` left once this node's report was in: this node's bucket comes down
    /// to that, less what the address spent here since. Never raised: a node that spent more
    /// than it reported keeps its own, lower level.
    func adopt(_ address: String, clusterTokens: Double, nowMillis: Int64) {
        shard(hash: address.hashValue).lock.withLock { shard in
            guard let index = shard.buckets.index(forKey: address) else { return }
            shard.buckets.values[index].lower(to: clusterTokens - (shard.unsynced[address] ?? 0), nowMillis: nowMillis)
        }
    }

    /// One look at the address's bucket (a single hash lookup when it is known). The pruner
    /// runs when an address is added, the only time the table grows. `body` answers with what
    /// it spent, recorded when the limiter is shared across nodes.
    private func withBucket<R>(of key: Key, nowMillis: Int64, _ body: (inout TokenBucket) -> (R, Double)) -> R {
        let perShard = capacity / shards.count
        let recording = shared.load(ordering: .relaxed)
        return shard(hash: key.hash).lock.withLock { shard in
            if let index = shard.buckets.index(forKey: key.text) {
                let (result, spent) = body(&shard.buckets.values[index])
                if recording, spent != 0 { shard.unsynced[key.text, default: 0] += spent }
                return result
            }
            prune(&shard, nowMillis: nowMillis, limit: perShard)
            if shard.buckets.count >= perShard { evictOldest(&shard) }
            shard.order.append(key.text)
            var bucket = TokenBucket(ratePerSecond: ratePerSecond, burst: burst)
            let (result, spent) = body(&bucket)
            shard.buckets[key.text] = bucket
            if recording, spent != 0 { shard.unsynced[key.text, default: 0] += spent }
            return result
        }
    }

    /// The shard an address's bucket lives in, by its limit key's hash.
    private func shard(hash: Int) -> ShardLock { shards[Int(UInt(bitPattern: hash) % UInt(shards.count))] }

    /// Looks at the oldest few entries: a refilled bucket is forgotten, another goes to the back.
    private func prune(_ shard: inout Shard, nowMillis: Int64, limit: Int) {
        for _ in 0..<Self.pruneStep {
            guard let ip = shard.order.popFirst() else { break }
            if let bucket = shard.buckets[ip], !bucket.isFull(nowMillis: nowMillis) {
                shard.order.append(ip)
            } else {
                shard.buckets[ip] = nil
                shard.unsynced[ip] = nil
            }
        }
    }

    private func evictOldest(_ shard: inout Shard) {
        while let ip = shard.order.popFirst() {
            shard.unsynced[ip] = nil
            if shard.buckets.removeValue(forKey: ip) != nil { break }
        }
    }

    /// Whole seconds until one request is allowed again (for `Retry-After`).
    var retryAfterSeconds: Int { max(1, Int((1 / ratePerSecond).rounded(.up))) }
}

