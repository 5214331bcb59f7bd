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

    /// The same bucket under a new rate and burst (a reloaded limit): what was used stays
    /// used, so a raised limit gives the difference at once and a lowered one takes it away.
    public func resized(ratePerSecond: Double, burst: Double) -> TokenBucket {
        var copy = TokenBucket(ratePerSecond: ratePerSecond, burst: burst)
        copy.tokens = max(0, min(burst, tokens + burst - self.burst))
        copy.lastMillis = lastMillis
        return copy
    }

    /// Takes one token if available.
    public mutating func take(nowMillis: Int64) -> Bool {
        take(1, nowMillis: nowMillis)
    }

    /// Takes `amount` tokens if that many are available (a budget of bytes, say).
    public mutating func take(_ amount: Double, nowMillis: Int64) -> Bool {
        refill(nowMillis: nowMillis)
        guard tokens >= amount else { return false }
        tokens -= amount
        return true
    }

    /// Spends `amount` whether or not that many are left (a cost known only afterwards): the
    /// bucket may go into debt, at most one burst deep, and refills from there.
    public mutating func charge(_ amount: Double, nowMillis: Int64) {
        refill(nowMillis: nowMillis)
        tokens = max(-burst, tokens - amount)
    }

    /// Brings the tokens down to `level` if they are above it (never below one burst of
    /// debt): another source of truth (the cluster's shared bucket) says less is left.
    public mutating func lower(to level: Double, nowMillis: Int64) {
        refill(nowMillis: nowMillis)
        tokens = max(-burst, min(tokens, level))
    }

    /// Tokens available now.
    public mutating func available(nowMillis: Int64) -> Double {
        refill(nowMillis: nowMillis)
        return tokens
    }

    private mutating func refill(nowMillis: Int64) {
        if let last = lastMillis {
            let elapsed = Double(max(0, nowMillis - last)) / 1000
            tokens = min(burst, tokens + elapsed * ratePerSecond)
        }
        lastMillis = nowMillis
    }
}
