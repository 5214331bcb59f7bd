import Testing
import ParleyCore

/// Tables of per-key buckets (client addresses) stay bounded however many keys come, and
/// the bound is kept without a walk of the table on every call.
@Suite struct TokenBucketTableTests {
    @Test func aTablePastItsBoundDropsFullThenFullestBuckets() {
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
        // Within the bound nothing is walked or dropped.
        TokenBucket.prune(&table, maxKeys: 10, nowMillis: 0)
        #expect(table.count == 8)
        for n in 12..<14 { table["k\(n)"] = TokenBucket(ratePerSecond: 0.001, burst: 10) }
        for n in 14..<16 {
            var bucket = TokenBucket(ratePerSecond: 0.001, burst: 10)
            _ = bucket.take(9.5, nowMillis: 0)
            table["k\(n)"] = bucket
        }
        TokenBucket.prune(&table, maxKeys: 10, nowMillis: 0)
        #expect(table.count == 9)
        #expect(table["k14"] != nil && table["k15"] != nil && table["k11"] != nil, "the ones that spent most stay")
        #expect(table["k4"] == nil && table["k12"] == nil, "the fullest went")
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
    }
}
