import CSQLite
import ParleyCore

/// One SQLite connection and its prepared statements.
///
/// `@unchecked Sendable` proof: a connection is created on the thread that opens the store,
/// handed once to exactly one ``WorkerThread`` before that thread starts, and from then on
/// used only by that thread (the writer or the reader). SQLite itself is built threadsafe
/// (serialized), so even a mistake here would not corrupt memory.
final class SQLiteConnection: @unchecked Sendable {
    let path: String
    private(set) var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]

    init(path: String) throws(ParleyError) {
        self.path = path
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &handle, flags, nil)
        guard status == SQLITE_OK else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(handle)
            handle = nil
            throw ParleyError(.internalError, "cannot open \(path): \(message)")
        }
        sqlite3_extended_result_codes(handle, 1)
        // Every connection waits out a lock another holds for a moment (a process or store
        // closing the same file checkpoints it under an exclusive lock; a backup reads it)
        // instead of failing at once: opening a store right after another let go of it
        // failed with "database is locked".
        sqlite3_busy_timeout(handle, Self.busyTimeoutMillis)
    }

    /// How long a statement waits for a lock another connection holds.
    static let busyTimeoutMillis: Int32 = 5_000

    deinit { close() }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    var errorMessage: String { handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed" }

    /// Rows the last statement inserted, changed or deleted.
    var changes: Int { Int(sqlite3_changes(handle)) }

    func error(_ what: String, _ status: Int32) -> ParleyError {
        let code: ParleyError.Code = (status & 0xFF) == SQLITE_FULL ? .unavailable : .internalError
        let reason = (status & 0xFF) == SQLITE_FULL ? "disk full" : errorMessage
        return ParleyError(code, "\(what) failed on \(path): \(reason)")
    }

    /// Runs SQL with no results (one or more statements).
    func exec(_ sql: String) throws(ParleyError) {
        var message: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &message)
        if status != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? errorMessage
            sqlite3_free(message)
            let code: ParleyError.Code = (status & 0xFF) == SQLITE_FULL ? .unavailable : .internalError
            throw ParleyError(code, "\(sql.prefix(60)) failed on \(path): \((status & 0xFF) == SQLITE_FULL ? "disk full" : text)")
        }
    }

    /// A prepared statement, compiled once per connection, reset and unbound for this use.
    func statement(_ sql: String) throws(ParleyError) -> Statement {
        if let cached = statements[sql] {
            sqlite3_reset(cached)
            sqlite3_clear_bindings(cached)
            return Statement(handle: cached, connection: self)
        }
        var prepared: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
        guard status == SQLITE_OK, let prepared else { throw error("prepare", status) }
        statements[sql] = prepared
        return Statement(handle: prepared, connection: self)
    }

    /// A single integer (e.g. a PRAGMA's value).
    func integer(_ sql: String) throws(ParleyError) -> Int64 {
        let statement = try statement(sql)
        guard try statement.step() else { return 0 }
        let value = statement.int64(0)
        // A statement left mid-result keeps a read transaction open, which would stop WAL
        // checkpoints from ever reaching past it.
        try statement.run()
        return value
    }
}

/// A prepared statement being used: bind, step, read columns.
struct Statement {
    let handle: OpaquePointer
    let connection: SQLiteConnection

    func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(handle, index, value) }
    func bind(_ index: Int32, _ value: Int64?) {
        guard let value else { sqlite3_bind_null(handle, index); return }
        sqlite3_bind_int64(handle, index, value)
    }
    func bind(_ index: Int32, _ value: String?) {
        guard let value else { sqlite3_bind_null(handle, index); return }
        // withCString lends a native string's own bytes; passing the String itself as a C
        // string would copy it into a new array first.
        let length = Int32(value.utf8.count)
        _ = value.withCString { text in parley_sqlite3_bind_text(handle, index, text, length) }
    }

    /// Text given as its UTF-8 bytes (a message body encoded once, ``Message/bodyJSON``).
    func bind(_ index: Int32, utf8 bytes: [UInt8]) {
        guard !bytes.isEmpty else { parley_sqlite3_bind_text(handle, index, "", 0); return }
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { text in
                _ = parley_sqlite3_bind_text(handle, index, text.baseAddress, Int32(text.count))
            }
        }
    }

    /// True when a row is ready, false when done.
    func step() throws(ParleyError) -> Bool {
        let status = sqlite3_step(handle)
        if status == SQLITE_ROW { return true }
        if status == SQLITE_DONE { sqlite3_reset(handle); return false }
        sqlite3_reset(handle)
        throw connection.error("query", status)
    }

    func run() throws(ParleyError) { while try step() {} }

    /// Ends a result early (a statement left mid-result would hold a read transaction open).
    func reset() { sqlite3_reset(handle) }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    /// Bytes of a column's value (0 for NULL), without copying it out.
    func byteCount(_ column: Int32) -> Int { Int(sqlite3_column_bytes(handle, column)) }
    func string(_ column: Int32) -> String? {
        guard let text = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }
}

extension SQLiteConnection {
    /// `body` in one `BEGIN IMMEDIATE` … `COMMIT` (rolled back when it throws): the small
    /// stores beside the message store (bans, push) make each call one transaction.
    func transaction<T>(_ body: () throws(ParleyError) -> T) throws(ParleyError) -> T {
        try exec("BEGIN IMMEDIATE")
        do throws(ParleyError) {
            let result = try body()
            try exec("COMMIT")
            return result
        } catch {
            try? exec("ROLLBACK")
            throw error
        }
    }
}
