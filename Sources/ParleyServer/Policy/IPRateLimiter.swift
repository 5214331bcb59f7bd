import ParleyCore
import Synchronization

/// Per-IP token buckets: REST requests, Socket.IO polls, bytes of history read. The table is
/// bounded and pruned a little on every request (never all at once under a lock): addresses
/// whose bucket has refilled are forgotten, and past the bound the oldest address goes. Split
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
    }

    /// Entries looked at by the pruner per request.
    static let pruneStep = 2

    init(ratePerSecond: Double, burst: Double, capacity: Int = 100_000, shardCount: Int = 16) {
        self.ratePerSecond = ratePerSecond
        self.burst = burst
        self.capacity = max(shardCount, capacity)
        shards = (0..<shardCount).map { _ in ShardLock() }
    }

    /// Addresses remembered now.
    var trackedAddresses: Int { shards.reduce(0) { $0 + $1.lock.withLock { $0.buckets.count } } }

    /// Takes a token for `ip`; false when it has none left.
    func allow(ip address: String, nowMillis: Int64) -> Bool {
        withBucket(of: address, nowMillis: nowMillis) { $0.take(nowMillis: nowMillis) }
    }

    /// Whether `ip` has anything left of a budget charged afterwards (``charge(ip:_:nowMillis:)``):
    /// a cost known only once the work is done, such as the bytes of a history page.
    func hasBudget(ip address: String, nowMillis: Int64) -> Bool {
        withBucket(of: address, nowMillis: nowMillis) { $0.available(nowMillis: nowMillis) > 0 }
    }

    /// Whether `ip` had anything left, and if so spends `amount` (into debt if need be): one
    /// look at the bucket, for a cost known before the work (the bytes of a publish).
    func spend(ip address: String, _ amount: Double, nowMillis: Int64) -> Bool {
        withBucket(of: address, nowMillis: nowMillis) { bucket in
            guard bucket.available(nowMillis: nowMillis) > 0 else { return false }
            bucket.charge(amount, nowMillis: nowMillis)
            return true
        }
    }

    /// Spends `amount` of `ip`'s budget, into debt if need be (down to one burst below empty):
    /// the address waits until it is paid back.
    func charge(ip address: String, _ amount: Double, nowMillis: Int64) {
        withBucket(of: address, nowMillis: nowMillis) { $0.charge(amount, nowMillis: nowMillis) }
    }

    private func withBucket<R>(of address: String, nowMillis: Int64, _ body: (inout TokenBucket) -> R) -> R {
        // One bucket per limit key: an IPv6 client's /64 shares one.
        let ip = IPAddress.limitKey(address)
        let perShard = capacity / shards.count
        return shards[Int(UInt(bitPattern: ip.hashValue) % UInt(shards.count))].lock.withLock { shard in
            prune(&shard, nowMillis: nowMillis, limit: perShard)
            if shard.buckets[ip] == nil {
                if shard.buckets.count >= perShard { evictOldest(&shard) }
                shard.order.append(ip)
            }
            var bucket = shard.buckets[ip] ?? TokenBucket(ratePerSecond: ratePerSecond, burst: burst)
            let result = body(&bucket)
            shard.buckets[ip] = bucket
            return result
        }
    }

    /// Looks at the oldest few entries: a refilled bucket is forgotten, another goes to the back.
    private func prune(_ shard: inout Shard, nowMillis: Int64, limit: Int) {
        for _ in 0..<Self.pruneStep {
            guard let ip = shard.order.popFirst() else { break }
            if let bucket = shard.buckets[ip], !bucket.isFull(nowMillis: nowMillis) {
                shard.order.append(ip)
            } else {
                shard.buckets[ip] = nil
            }
        }
    }

    private func evictOldest(_ shard: inout Shard) {
        while let ip = shard.order.popFirst() {
            if shard.buckets.removeValue(forKey: ip) != nil { break }
        }
    }

    /// Whole seconds until one request is allowed again (for `Retry-After`).
    var retryAfterSeconds: Int { max(1, Int((1 / ratePerSecond).rounded(.up))) }
}

extension TokenBucket {
    /// True when the bucket would be full at `nowMillis` (nothing to remember).
    func isFull(nowMillis: Int64) -> Bool {
        var copy = self
        return copy.available(nowMillis: nowMillis) >= burst
    }
}
