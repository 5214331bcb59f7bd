import ParleyCore
import Synchronization

/// The rows of a table held under a bound (read marks, push devices): counted when first
/// needed, then kept beside the table by the writes that add and remove rows (inside their
/// transaction), and counted again after a transaction that rolled back (``forget()``).
/// ``trim(_:_:)`` drops the oldest rows past the bound, a thousand at a time, so a file over
/// it (a lowered bound, an older file) shrinks over the next writes, not in one long
/// statement that holds every other call.
final class TableCount: Sendable {
    let table: String
    let bound: Int64
    private let rows = Mutex<Int64?>(nil)

    init(table: String, bound: Int) {
        self.table = table
        self.bound = Int64(max(1, bound))
    }

    /// Rows added (or, negative, removed) by the write under way; nothing while not counted.
    func add(_ delta: Int64) { rows.withLock { $0 = $0.map { $0 + delta } } }

    /// The count is no longer known (a transaction rolled back): counted at the next trim.
    func forget() { rows.withLock { $0 = nil } }

    /// Past the bound, runs the statement `dropOldest(excess)` makes (a DELETE of at most
    /// `excess` rows, the oldest first, never the one being written) and counts what it took.
    func trim(_ connection: SQLiteConnection, _ dropOldest: (Int64) throws(ParleyError) -> Statement) throws(ParleyError) {
        let held = try rows.withLock { rows throws(ParleyError) -> Int64 in
            if let rows { return rows }
            let counted = try connection.integer("SELECT count(*) FROM \(table)")
            rows = counted
            return counted
        }
        guard held > bound else { return }
        try dropOldest(min(held - bound, 1_000)).run()
        add(-Int64(connection.changes))
    }
}
