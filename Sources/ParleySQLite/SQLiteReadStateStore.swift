import ParleyCore

/// Users' read marks on a single node (``ReadStateStore``), in a SQLite file of their own
/// beside the message store (`reads.sqlite3` in the data directory). One worker thread does
/// every call; the calls queued together share one transaction, and each completion runs
/// after its commit (so a recorded mark survives a crash).
public final class SQLiteReadStateStore: ReadStateStore {
    public let maxRoomsPerUser: Int
    public var maxMarks: Int { Int(count.bound) }
    /// Marks in the file, under the store's bound.
    private let count: TableCount
    public let path: String
    /// A job reads or writes, and returns what to run once its transaction is over (with
    /// the commit's error, if any).
    typealias Job = @Sendable (SQLiteConnection) -> @Sendable (ParleyError?) -> Void
    private let worker: WorkerThread<Job>

    /// Most calls waiting for the worker: past it a call fails at once (`unavailable`).
    public static let queueLimit = 100_000

    /// Opens (creating when missing) the file at `path`.
    public init(path: String, maxRoomsPerUser: Int = 500, maxMarks: Int = ReadMark.maxStored,
                synchronousFull: Bool = false) throws(ParleyError) {
        self.path = path
        self.maxRoomsPerUser = maxRoomsPerUser
        let count = TableCount(table: "read_marks", bound: maxMarks)
        self.count = count
        let connection = try SQLiteConnection(path: path)
        try connection.exec("""
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = \(synchronousFull ? "FULL" : "NORMAL");
            CREATE TABLE IF NOT EXISTS read_marks (
                channel TEXT NOT NULL,
                user TEXT NOT NULL,
                room TEXT NOT NULL,
                offset INTEGER NOT NULL,
                name TEXT NOT NULL,
                shares INTEGER NOT NULL,
                updated_ms INTEGER NOT NULL,
                PRIMARY KEY (channel, user, room)
            ) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS read_marks_room ON read_marks (channel, room, offset);
            CREATE INDEX IF NOT EXISTS read_marks_recent ON read_marks (channel, user, updated_ms, room);
            CREATE INDEX IF NOT EXISTS read_marks_age ON read_marks (updated_ms);
            """)
        // The connection goes to the worker and is used on its thread only
        // (SQLiteConnection's proof).
        worker = WorkerThread(name: "parley-reads", idleMillis: 60_000, limit: Self.queueLimit) { jobs in
            // Without a transaction (BEGIN failed: the disk, say) each statement commits on
            // its own, and a failing one fails its own call.
            let inTransaction = (try? connection.exec("BEGIN IMMEDIATE")) != nil
            let finish = jobs.map { $0(connection) }
            var failure: ParleyError?
            if inTransaction {
                do throws(ParleyError) { try connection.exec("COMMIT") } catch {
                    failure = error
                    try? connection.exec("ROLLBACK")
                    // The batch's rows are gone, and its changes to the count with them.
                    count.forget()
                }
            }
            for done in finish { done(failure) }
        }
    }

    /// Stops the worker once every queued call ran.
    public func close() { worker.stop() }

    private func submit<T: Sendable>(_ completion: @escaping @Sendable (Result<T, ParleyError>) -> Void,
                                     _ body: @escaping @Sendable (SQLiteConnection) throws(ParleyError) -> T) {
        let queued = worker.submit { connection in
            let result: Result<T, ParleyError>
            do throws(ParleyError) { result = .success(try body(connection)) } catch { result = .failure(error) }
            return { commitError in completion(commitError.map { .failure($0) } ?? result) }
        }
        if !queued { completion(.failure(ParleyError(.unavailable, "the read-state store is overloaded; try again"))) }
    }

    public func record(_ mark: ReadMark, evicting: Bool, completion: @escaping @Sendable (Result<ReadUpdate, ParleyError>) -> Void) {
        let (limit, count) = (maxRoomsPerUser, self.count)
        submit(completion) { connection throws(ParleyError) -> ReadUpdate in
            let old = try Self.read(connection, user: mark.user, room: mark.room)
            if old == nil, !evicting, try Self.count(connection, user: mark.user, channel: mark.room.channel) >= Int64(limit) {
                return ReadUpdate(mark: mark, moved: false, added: false)
            }
            let merged = old?.merged(with: mark) ?? mark
            let upsert = try connection.statement("""
                INSERT INTO read_marks (channel, user, room, offset, name, shares, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                ON CONFLICT (channel, user, room) DO UPDATE SET offset = ?4, name = ?5, shares = ?6, updated_ms = ?7
                """)
            upsert.bind(1, mark.room.channel)
            upsert.bind(2, mark.user)
            upsert.bind(3, mark.room.room)
            upsert.bind(4, merged.offset)
            upsert.bind(5, merged.name)
            upsert.bind(6, Int64(merged.sharesReceipts ? 1 : 0))
            upsert.bind(7, merged.updatedMillis)
            try upsert.run()
            if old == nil {
                count.add(1)
                let held = try Self.count(connection, user: mark.user, channel: mark.room.channel)
                if held > Int64(limit) {
                    let drop = try connection.statement("""
                        DELETE FROM read_marks WHERE channel = ?1 AND user = ?2 AND room IN (
                            SELECT room FROM read_marks WHERE channel = ?1 AND user = ?2 AND room <> ?3
                            ORDER BY updated_ms, room LIMIT ?4)
                        """)
                    drop.bind(1, mark.room.channel)
                    drop.bind(2, mark.user)
                    drop.bind(3, mark.room.room)
                    drop.bind(4, held - Int64(limit))
                    try drop.run()
                    count.add(-Int64(connection.changes))
                }
                // The store's bound: anyone's least recently touched marks go.
                try count.trim(connection) { excess throws(ParleyError) in
                    let drop = try connection.statement("""
                        DELETE FROM read_marks WHERE (channel, user, room) IN (
                            SELECT channel, user, room FROM read_marks INDEXED BY read_marks_age
                            WHERE NOT (channel = ?1 AND user = ?2 AND room = ?3) ORDER BY updated_ms LIMIT ?4)
                        """)
                    drop.bind(1, mark.room.channel)
                    drop.bind(2, mark.user)
                    drop.bind(3, mark.room.room)
                    drop.bind(4, excess)
                    return drop
                }
            }
            return ReadUpdate(mark: merged, moved: merged.offset > (old?.offset ?? 0), added: old == nil)
        }
    }

    public func mark(of user: String, in room: RoomKey, completion: @escaping @Sendable (Result<ReadMark?, ParleyError>) -> Void) {
        submit(completion) { connection throws(ParleyError) -> ReadMark? in try Self.read(connection, user: user, room: room) }
    }

    public func marks(of user: String, in channel: String, limit: Int,
                      completion: @escaping @Sendable (Result<[ReadMark], ParleyError>) -> Void) {
        submit(completion) { connection throws(ParleyError) -> [ReadMark] in
            let select = try connection.statement("""
                SELECT room, offset, name, shares, updated_ms FROM read_marks WHERE channel = ?1 AND user = ?2
                ORDER BY updated_ms DESC, room DESC LIMIT ?3
                """)
            select.bind(1, channel)
            select.bind(2, user)
            select.bind(3, Int64(max(0, limit)))
            var marks: [ReadMark] = []
            while try select.step() {
                marks.append(ReadMark(user: user, room: RoomKey(channel: channel, room: select.string(0) ?? ""), offset: select.int64(1),
                                      name: select.string(2) ?? "", sharesReceipts: select.int64(3) != 0, updatedMillis: select.int64(4)))
            }
            return marks
        }
    }

    public func readers(of room: RoomKey, limit: Int, completion: @escaping @Sendable (Result<[ReadReceipt], ParleyError>) -> Void) {
        submit(completion) { connection throws(ParleyError) -> [ReadReceipt] in
            let select = try connection.statement("""
                SELECT user, offset, name FROM read_marks WHERE channel = ?1 AND room = ?2 AND shares = 1 AND offset > 0
                ORDER BY offset DESC, user DESC LIMIT ?3
                """)
            select.bind(1, room.channel)
            select.bind(2, room.room)
            select.bind(3, Int64(max(0, limit)))
            var receipts: [ReadReceipt] = []
            while try select.step() {
                receipts.append(ReadReceipt(user: select.string(0) ?? "", name: select.string(2) ?? "", offset: select.int64(1)))
            }
            return receipts
        }
    }

    public func users(of room: RoomKey, limit: Int, completion: @escaping @Sendable (Result<[String], ParleyError>) -> Void) {
        submit(completion) { connection throws(ParleyError) -> [String] in
            let select = try connection.statement("SELECT user FROM read_marks WHERE channel = ?1 AND room = ?2 LIMIT ?3")
            select.bind(1, room.channel)
            select.bind(2, room.room)
            select.bind(3, Int64(max(0, limit)))
            var users: [String] = []
            while try select.step() { if let user = select.string(0) { users.append(user) } }
            return users
        }
    }

    private static func count(_ connection: SQLiteConnection, user: String, channel: String) throws(ParleyError) -> Int64 {
        let count = try connection.statement("SELECT count(*) FROM read_marks WHERE channel = ?1 AND user = ?2")
        count.bind(1, channel)
        count.bind(2, user)
        _ = try count.step()
        let held = count.int64(0)
        count.reset()
        return held
    }

    private static func read(_ connection: SQLiteConnection, user: String, room: RoomKey) throws(ParleyError) -> ReadMark? {
        let select = try connection.statement(
            "SELECT offset, name, shares, updated_ms FROM read_marks WHERE channel = ?1 AND user = ?2 AND room = ?3")
        select.bind(1, room.channel)
        select.bind(2, user)
        select.bind(3, room.room)
        guard try select.step() else { return nil }
        let mark = ReadMark(user: user, room: room, offset: select.int64(0), name: select.string(1) ?? "",
                            sharesReceipts: select.int64(2) != 0, updatedMillis: select.int64(3))
        select.reset()
        return mark
    }
}
