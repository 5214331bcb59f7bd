extension TokenBucket {
    /// Keeps a table of buckets (one per key: a client address, say) at most `maxKeys` long.
    /// Past it the full buckets go first (a full bucket is what a new one would be); if more
    /// than nine tenths of the bound are left, the buckets with the most tokens go too (a
    /// key seen again starts full: bounded memory is worth more than the budget of an address
    /// that has not used it lately, and an address that just spent its budget is the last to
    /// go). So the table is walked once per tenth of the bound of new keys, not on every call
    /// once it holds more than the bound of busy keys.
    public static func prune<Key: Hashable>(_ table: inout [Key: TokenBucket], maxKeys: Int, nowMillis: Int64) {
        guard table.count > maxKeys else { return }
        var levels = table.map { key, bucket -> (key: Key, tokens: Double, full: Bool) in
            var copy = bucket
            let tokens = copy.available(nowMillis: nowMillis)
            return (key, tokens, tokens >= copy.burst)
        }
        for entry in levels where entry.full { table[entry.key] = nil }
        let target = maxKeys - maxKeys / 10
        guard table.count > target else { return }
        levels.removeAll { $0.full }
        levels.sort { $0.tokens > $1.tokens }
        for entry in levels.prefix(table.count - target) { table[entry.key] = nil }
    }
}
