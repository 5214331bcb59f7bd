import CSQLite
import ParleyCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A consistent copy of a live Parley database, made with SQLite's online backup API.
///
/// The copy is taken in one backup step, i.e. inside one read transaction of the source: in
/// WAL mode that transaction sees the database as of one commit and does not block the
/// server's writer, so the copy holds exactly the messages committed before that point
/// (offsets 1…n of every room, no gap) however busy the server is.
public enum SQLiteBackup {
    /// What a backup copied.
    public struct Summary: Sendable, Equatable {
        public let pages: Int
        public let bytes: Int
        public let rooms: Int
        public let messages: Int
    }

    /// Copies the database at `source` to a new file `destination` (which must not exist),
    /// then checks the copy (`PRAGMA quick_check`). Blocking: for `parley backup`, never on an
    /// event loop. Retries for up to `busyTimeoutMillis` while the source is locked.
    ///
    /// `countMessages` false copies another database of the data directory (the bans), whose
    /// summary counts no rooms or messages.
    public static func copy(from source: String, to destination: String, busyTimeoutMillis: Int32 = 10_000,
                            countMessages: Bool = true) throws(ParleyError) -> Summary {
        guard access(source, R_OK) == 0 else {
            throw ParleyError(.notFound, "cannot read the database \(source): \(String(cString: strerror(errno)))")
        }
        guard access(destination, F_OK) != 0 else {
            throw ParleyError(.conflict, "\(destination) already exists; a backup never overwrites a file")
        }
        var sourceHandle: OpaquePointer?
        // Read-write without create: a reader of a WAL database takes part in its locking
        // (the -shm file); nothing is written to it.
        guard sqlite3_open_v2(source, &sourceHandle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK else {
            let message = sourceHandle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(sourceHandle)
            throw ParleyError(.internalError, "cannot open \(source): \(message)")
        }
        defer { sqlite3_close_v2(sourceHandle) }
        sqlite3_busy_timeout(sourceHandle, busyTimeoutMillis)
        var destinationHandle: OpaquePointer?
        guard sqlite3_open_v2(destination, &destinationHandle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK else {
            let message = destinationHandle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(destinationHandle)
            throw ParleyError(.internalError, "cannot create \(destination): \(message)")
        }
        var destinationOpen = true
        defer { if destinationOpen { sqlite3_close_v2(destinationHandle) } }
        guard let backup = sqlite3_backup_init(destinationHandle, "main", sourceHandle, "main") else {
            throw ParleyError(.internalError, "cannot start the backup: \(String(cString: sqlite3_errmsg(destinationHandle)))")
        }
        var status: Int32
        var waitedMillis: Int32 = 0
        repeat {
            // -1: every page in one step, i.e. one read transaction of the source.
            status = sqlite3_backup_step(backup, -1)
            if status == SQLITE_BUSY || status == SQLITE_LOCKED {
                guard waitedMillis < busyTimeoutMillis else { break }
                usleep(50_000)
                waitedMillis += 50
            }
        } while status == SQLITE_OK || status == SQLITE_BUSY || status == SQLITE_LOCKED
        let pages = Int(sqlite3_backup_pagecount(backup))
        let finish = sqlite3_backup_finish(backup)
        guard status == SQLITE_DONE, finish == SQLITE_OK else {
            let reason = String(cString: sqlite3_errstr(status == SQLITE_DONE ? finish : status))
            sqlite3_close_v2(destinationHandle)
            destinationOpen = false
            unlink(destination)
            throw ParleyError(.internalError, "the backup of \(source) failed: \(reason)")
        }
        // The copy is an ordinary database now; check it and count what it holds.
        let check = try single(destinationHandle, "PRAGMA quick_check", destination)
        guard check == "ok" else {
            throw ParleyError(.internalError, "the backup \(destination) does not pass quick_check: \(check)")
        }
        let rooms = countMessages ? Int(try single(destinationHandle, "SELECT count(*) FROM rooms", destination)) ?? 0 : 0
        let messages = countMessages ? Int(try single(destinationHandle, "SELECT count(*) FROM messages", destination)) ?? 0 : 0
        let pageSize = Int(try single(destinationHandle, "PRAGMA page_size", destination)) ?? 0
        return Summary(pages: pages, bytes: pages * pageSize, rooms: rooms, messages: messages)
    }

    /// The first column of the first row of `sql`, as text.
    private static func single(_ handle: OpaquePointer?, _ sql: String, _ path: String) throws(ParleyError) -> String {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK else {
            throw ParleyError(.internalError, "\(sql) failed on \(path): \(String(cString: sqlite3_errmsg(handle)))")
        }
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0) else {
            throw ParleyError(.internalError, "\(sql) failed on \(path): \(String(cString: sqlite3_errmsg(handle)))")
        }
        return String(cString: text)
    }
}

extension SQLiteMessageStore {
    /// The SQLite library's version (`sqlite3_libversion`), for `parley --version`.
    public static var libraryVersion: String { String(cString: sqlite3_libversion()) }
}
