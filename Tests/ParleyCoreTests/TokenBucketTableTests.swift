import Testing
import ParleyCore

/// Tables of per-key buckets (client addresses) stay bounded however many keys come, and
/// the bound is kept without a walk of the table on every call.
@Suite struct TokenBucketTableTests {
    @Test func aTableAtItsBoundDropsFullThenFullestBuckets() {
        var table: [String: TokenBucket] = [:]
        for n in 0..<12 {
            var bucket = TokenBucket(ratePerSecond: 0.001, burst: 10)
            // Keys 0–3 untouched (full), 4–11 spent more and more: key 11 spent the most.
            if n >= 4 { _ = bucket.take(Double(n - 3), nowMillis: 0) }
            table["k\(n)"] = bucket
        }
        TokenBucket.prune(&table, maxKeys: 10, nowMillis: 0)
        // The full ones go, then the fullest down to nine tenths of the bound (9).
        #expect(table.count == 8)
        #expect(Set(table.keys) == Set((4..<12).map { "k\($0)" }))
        // Below the bound nothing is walked or dropped.
        TokenBucket.prune(&table, maxKeys: 10, nowMillis: 0)
        #expect(table.count == 8)
        for n in 12..<14 { table["k\(n)"] = TokenBucket(ratePerSecond: 0.001, burst: 10) }
        TokenBucket.prune(&table, maxKeys: 10, nowMillis: 0)
        #expect(table.count == 8, "at the bound (10): the two full ones went")
    }

    /// Buckets of different bursts are ranked by the share of their burst left, and a pinned
    /// key (the server's own, `*`) never goes, however many tokens it holds.
    @Test func sharesRankMixedBurstsAndPinnedKeysStay() {
        var table: [String: TokenBucket] = [:]
        var server = TokenBucket(ratePerSecond: 0.001, burst: 1_000)
        _ = server.take(500, nowMillis: 0)  // half spent: 500 tokens, more than any address has
        table["*"] = server
        for n in 0..<9 {
            var bucket = TokenBucket(ratePerSecond: 0.001, burst: 10)
            _ = bucket.take(Double(n + 1), nowMillis: 0)  // 9 … 1 tokens left
            table["a\(n)"] = bucket
        }
        var big = TokenBucket(ratePerSecond: 0.001, burst: 100)
        _ = big.take(95, nowMillis: 0)  // 5 tokens: a twentieth of its burst
        table["big"] = big
        TokenBucket.prune(&table, maxKeys: 10, pinned: ["*"], nowMillis: 0)
        #expect(table.count == 9)
        #expect(table["*"] != nil, "pinned")
        #expect(table["a0"] == nil, "nine tenths of its burst left: the largest share")
        #expect(table["big"] != nil, "five tokens, but a twentieth of its burst")
    }

    /// The memory budget store: ever new keys keep it at its bound, and a key that spent its
    /// allowance stays refused meanwhile.
    @Test func theMemoryBudgetStoreStaysBounded() {
        let store = InMemoryBudgetStore()
        #expect(store.take(100, key: "heavy", allowance: 100, periodMillis: 86_400_000, nowMillis: 0))
        for n in 0..<(InMemoryBudgetStore.maxKeys + 2_000) {
            _ = store.take(1, key: "k\(n)", allowance: 100, periodMillis: 86_400_000, nowMillis: 0)
        }
        #expect(store.keyCount <= InMemoryBudgetStore.maxKeys)
        #expect(!store.take(1, key: "heavy", allowance: 100, periodMillis: 86_400_000, nowMillis: 0), "still spent")
        // The server-wide key is never dropped, full or not.
        #expect(store.take(1, key: "*", allowance: 1_000_000, periodMillis: 86_400_000, nowMillis: 0))
        for n in 0..<(InMemoryBudgetStore.maxKeys + 2_000) {
            _ = store.take(1, key: "again\(n)", allowance: 100, periodMillis: 86_400_000, nowMillis: 0)
        }
        #expect(store.available(key: "*", allowance: 1_000_000, periodMillis: 86_400_000, nowMillis: 0) < 1_000_000)
    }
}
