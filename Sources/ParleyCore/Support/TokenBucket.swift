/// A token bucket rate limiter: `ratePerSecond` tokens refill continuously up to `burst`.
/// Not thread-safe; one per connection, used on that connection's thread.
public struct TokenBucket: Sendable {
    public let ratePerSecond: Double
    public let burst: Double
    private var tokens: Double
    private var lastMillis: Int64?

    public init(ratePerSecond: Double, burst: Double) {
        self.ratePerSecond = ratePerSecond
        self.burst = burst
        self.tokens = burst
    }

    /// Takes one token if available.
    public mutating func take(nowMillis: Int64) -> Bool {
        if let last = lastMillis {
            let elapsed = Double(max(0, nowMillis - last)) / 1000
            tokens = min(burst, tokens + elapsed * ratePerSecond)
        }
        lastMillis = nowMillis
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
