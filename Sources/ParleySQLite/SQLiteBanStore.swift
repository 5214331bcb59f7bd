import ParleyCore
import Synchronization

/// The bans of a single node, in a small SQLite file of their own beside the message store
/// (`bans.sqlite3` in the data directory): they outlive restarts and crashes. Bans change
/// rarely (an operator's action), so each call runs at once, under a lock, on the caller's
/// thread, in its own transaction.
public final class SQLiteBanStore: BanStore {
    /// The connection, used only while the lock is held (the lock is the one thread at a
    /// time that ``SQLiteConnection``'s proof asks for).
    private let connection: Mutex<SQLiteConnection>
    public let path: String

    /// Opens (creating when missing) the ban file at `path`.
    public init(path: String, synchronousFull: Bool = false) throws(ParleyError) {
        self.path = path
        let connection = try SQLiteConnection(path: path)
        try connection.exec("""
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = \(synchronousFull ? "FULL" : "NORMAL");
            CREATE TABLE IF NOT EXISTS bans (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                kind TEXT NOT NULL,
                value TEXT NOT NULL,
                reason TEXT NOT NULL,
                created_ms INTEGER NOT NULL,
                until_ms INTEGER NOT NULL,
                UNIQUE (kind, value)
            );
            CREATE TABLE IF NOT EXISTS ban_version (version INTEGER NOT NULL);
            INSERT INTO ban_version SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM ban_version);
            """)
        self.connection = Mutex(connection)
    }

    public func add(_ target: Ban.Target, reason: String, createdMillis: Int64, untilMillis: Int64) async throws(ParleyError) -> Ban {
        let target = Ban.target(target)
        return try connection.withLock { connection throws(ParleyError) -> Ban in
            try connection.transaction { () throws(ParleyError) -> Ban in
                let delete = try connection.statement("DELETE FROM bans WHERE kind = ?1 AND value = ?2")
                delete.bind(1, target.kind)
                delete.bind(2, target.value)
                try delete.run()
                let insert = try connection.statement(
                    "INSERT INTO bans (kind, value, reason, created_ms, until_ms) VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id")
                insert.bind(1, target.kind)
                insert.bind(2, target.value)
                insert.bind(3, reason)
                insert.bind(4, createdMillis)
                insert.bind(5, untilMillis)
                guard try insert.step() else { throw ParleyError(.internalError, "the ban was not stored") }
                let id = insert.int64(0)
                try insert.run()
                try bump(connection)
                return Ban(id: Int(id), target: target, reason: reason, createdMillis: createdMillis, untilMillis: untilMillis)
            }
        }
    }

    public func remove(id: Int) async throws(ParleyError) -> Bool {
        try connection.withLock { connection throws(ParleyError) -> Bool in
            try connection.transaction { () throws(ParleyError) -> Bool in
                let delete = try connection.statement("DELETE FROM bans WHERE id = ?1 RETURNING id")
                delete.bind(1, Int64(id))
                let found = try delete.step()
                if found { try delete.run() }
                if found { try bump(connection) }
                return found
            }
        }
    }

    public func load(nowMillis: Int64) async throws(ParleyError) -> BanSet {
        try loadNow(nowMillis: nowMillis)
    }

    public func loadNow(nowMillis: Int64, timeoutMillis: Int = 0) throws(ParleyError) -> BanSet {
        try connection.withLock { connection throws(ParleyError) -> BanSet in
            try connection.transaction { () throws(ParleyError) -> BanSet in
                let expire = try connection.statement("DELETE FROM bans WHERE until_ms <= ?1")
                expire.bind(1, nowMillis)
                try expire.run()
                let select = try connection.statement("SELECT id, kind, value, reason, created_ms, until_ms FROM bans ORDER BY id")
                var bans: [Ban] = []
                while try select.step() {
                    let value = select.string(2) ?? ""
                    let target: Ban.Target = select.string(1) == "ip" ? .ip(value) : .name(value)
                    bans.append(Ban(id: Int(select.int64(0)), target: target, reason: select.string(3) ?? "",
                                    createdMillis: select.int64(4), untilMillis: select.int64(5)))
                }
                return BanSet(bans: bans, version: try connection.integer("SELECT version FROM ban_version"))
            }
        }
    }

    public func version() async throws(ParleyError) -> Int64 {
        try connection.withLock { connection throws(ParleyError) -> Int64 in
            try connection.integer("SELECT version FROM ban_version")
        }
    }

    /// Closes the file (later calls fail).
    public func close() {
        connection.withLock { $0.close() }
    }

    private func bump(_ connection: SQLiteConnection) throws(ParleyError) {
        try connection.exec("UPDATE ban_version SET version = version + 1")
    }
}
