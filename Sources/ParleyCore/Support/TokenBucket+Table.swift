extension TokenBucket {
    /// Keeps a table of buckets (one per key: a client address, say) at most `maxKeys` long
    /// once one more key is added: call it before adding one. Past the bound the full buckets
    /// go first (a full bucket is what a new one would be); if more than nine tenths of the
    /// bound are left, the buckets with the largest share of their burst left go too (a key
    /// seen again starts full: bounded memory is worth more than the budget of an address that
    /// has not used it lately, and an address that just spent its budget is the last to go).
    /// `pinned` keys never go (the server's own bucket, `*`, beside the addresses'). So the
    /// table is walked once per tenth of the bound of new keys, not on every call once it
    /// holds more than the bound of busy keys.
    public static func prune<Key: Hashable>(_ table: inout [Key: TokenBucket], maxKeys: Int, pinned: Set<Key> = [],
                                            nowMillis: Int64) {
        guard table.count >= maxKeys else { return }
        var partial: [(key: Key, share: Double)] = []
        for (key, bucket) in table where !pinned.contains(key) {
            let share = bucket.share(nowMillis: nowMillis)
            if share >= 1 { table[key] = nil } else { partial.append((key, share)) }
        }
        let target = maxKeys - max(1, maxKeys / 10)
        guard table.count > target else { return }
        partial.sort { $0.share > $1.share }
        for entry in partial.prefix(table.count - target) { table[entry.key] = nil }
    }

    /// The share of its burst the bucket holds at `nowMillis`: 1 when full, as a new one is.
    public func share(nowMillis: Int64) -> Double {
        var copy = self
        return copy.available(nowMillis: nowMillis) / max(copy.burst, .leastNonzeroMagnitude)
    }

    /// True when the bucket would be full at `nowMillis` (nothing to remember).
    public func isFull(nowMillis: Int64) -> Bool { share(nowMillis: nowMillis) >= 1 }
}
