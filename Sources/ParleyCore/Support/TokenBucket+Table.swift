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
        var levels = table.compactMap { key, bucket -> (key: Key, share: Double)? in
            guard !pinned.contains(key) else { return nil }
            var copy = bucket
            return (key, copy.available(nowMillis: nowMillis) / max(copy.burst, .leastNonzeroMagnitude))
        }
        for entry in levels where entry.share >= 1 { table[entry.key] = nil }
        let target = maxKeys - max(1, maxKeys / 10)
        guard table.count > target else { return }
        levels.removeAll { $0.share >= 1 }
        levels.sort { $0.share > $1.share }
        for entry in levels.prefix(table.count - target) { table[entry.key] = nil }
    }
}
