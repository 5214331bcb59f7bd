import ParleyCore
import Synchronization

/// Per-IP token buckets for the REST API.
final class RESTRateLimiter: Sendable {
    private let buckets = Mutex<[String: TokenBucket]>([:])
    let ratePerSecond: Double
    let burst: Double

    init(ratePerSecond: Double, burst: Double) {
        self.ratePerSecond = ratePerSecond
        self.burst = burst
    }

    /// Takes a token for `ip`; false when it has none left.
    func allow(ip: String, nowMillis: Int64) -> Bool {
        buckets.withLock { buckets in
            // Forget addresses whose bucket has refilled, so the table stays small.
            if buckets.count > 10_000 {
                buckets = buckets.filter { !$0.value.isFull(nowMillis: nowMillis) }
            }
            var bucket = buckets[ip] ?? TokenBucket(ratePerSecond: ratePerSecond, burst: burst)
            let allowed = bucket.take(nowMillis: nowMillis)
            buckets[ip] = bucket
            return allowed
        }
    }

    /// Whole seconds until one request is allowed again (for `Retry-After`).
    var retryAfterSeconds: Int { max(1, Int((1 / ratePerSecond).rounded(.up))) }
}

extension TokenBucket {
    /// True when the bucket would be full at `nowMillis` (nothing to remember).
    func isFull(nowMillis: Int64) -> Bool {
        var copy = self
        // A full bucket can give `burst` tokens right now.
        for _ in 0..<Int(burst.rounded(.down)) { if !copy.take(nowMillis: nowMillis) { return false } }
        return true
    }
}
