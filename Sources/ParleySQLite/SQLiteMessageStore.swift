import CSQLite
import ParleyCore
import Synchronization

/// Options of the SQLite store.
public struct SQLiteStoreOptions: Sendable {
    public var retention = StoreRetention.keepEverything
    /// `FULL` fsyncs the WAL at every commit (a group commit covers many publishes), so an
    /// acknowledged message survives power loss too; `NORMAL` survives a killed process only.
    public var synchronousFull = true
    /// Most appends committed in one transaction.
    public var maxBatch = 8_192
    /// How often retention runs in the background, in milliseconds.
    public var retentionIntervalMillis = 60_000
    /// Most appends (and other writer jobs) waiting at once; past it appends fail at once
    /// with `.unavailable` (publishers are slowed well before, by back-pressure).
    public var maxQueuedWrites = 200_000
    /// Most reads waiting at once.
    public var maxQueuedReads = 100_000
    /// Test hook: caps the database size (SQLite's `max_page_count`) to simulate a full disk.
    public var maxPageCount: Int?
    /// The most bytes the database file may grow to (nil: as the disk allows). A commit that
    /// would pass it fails with ``SQLiteMessageStore/budgetReachedMessage(_:)``; retention's
    /// deletions free pages that later messages reuse.
    public var maxBytes: Int?
    /// WAL pages after which the WAL starts over: a thread of its own copies it into the
    /// database file as it grows (``WALCheckpointer``), the writer only the last commits'.
    public var walCheckpointPages = 10_000
    /// Most client message ids one room's load returns (its newest): as many as the broker
    /// keeps for a room.
    public var maxClientIDsPerRoom = SingleNodeBroker.maxRememberedPerRoom
    /// When appends come from many connections at once (the last commit held two or more) and
    /// fewer than 64 wait, the writer waits this long for more before it commits, so a commit
    /// (and its fsync) serves several: at moderate rates a commit held one or two messages and
    /// cost the writer about 160 µs. A lone writer waiting for each append never waits. 0: off.
    public var gatherMicros = 1_000
    public init() {}
}

/// The embedded default store: one SQLite file in WAL mode. A dedicated writer thread owns
/// the only writing connection and commits every append queued since its last commit as one
/// transaction (group commit); a reader thread with its own connection serves reads, which
/// WAL lets run while the writer commits. The writer's answers (every append's completion,
/// and with it the broker's fan-out) run on a third thread, in the order the writer gave
/// them, one hand-over per commit: the writer commits the next batch while the last one is
/// delivered. Nothing here ever runs on an event loop.
public final class SQLiteMessageStore: MessageStore {
    /// The error text of a commit refused because the database reached its size budget.
    public static func budgetReachedMessage(_ maxBytes: Int) -> String {
        "the message store is full: it reached its size budget of \(maxBytes) bytes; nothing more is stored until retention frees space or the budget is raised"
    }

    /// The current schema version (`PRAGMA user_version`).
    public static let schemaVersion: Int64 = 5
    public let path: String
    public let options: SQLiteStoreOptions
    /// The schema version the file had when it was opened (0: a new file); below
    /// ``schemaVersion`` when opening migrated it.
    public let openedAtSchemaVersion: Int64
    private let writer: WorkerThread<WriteJob>
    private let reader: WorkerThread<ReadJob>
    /// Runs the writer's answers, a commit's worth at a time, in order.
    private let answers: WorkerThread<[StoreAnswer]>
    /// Commits whose answers may wait before the writer waits for them.
    static let maxCommitsAwaitingAnswers = 8
    private let clockMillis: @Sendable () -> Int64
    private let closed = Atomic<Bool>(false)
    private let unreadable = Atomic<Int>(0)
    private let unreadableHandler = Mutex<Callback<@Sendable (RoomKey, Int64) -> Void>?>(nil)
    private let connections: [SQLiteConnection]
    /// Copies the WAL into the database file beside the writer.
    let checkpointer: WALCheckpointer

    enum WriteJob: Sendable {
        case append(Message, String?, @Sendable (Result<Void, ParleyError>) -> Void)
        case retention(Int64, @Sendable (Result<Void, ParleyError>) -> Void)
        case maxPageCount(Int, @Sendable (Result<Void, ParleyError>) -> Void)
        case lastOffsets(@Sendable ([RoomKey: Int64]) -> Void)
        case loadRoom(RoomKey, Int64, @Sendable (Result<RoomRecovery, ParleyError>) -> Void)
        case delete(RoomKey, Int64, @Sendable (Result<Bool, ParleyError>) -> Void)
    }

    /// The columns every message read selects, in ``decode(_:room:current:)``'s order.
    static let columns = "m.id, m.offset, m.ts, m.sender_id, m.client_data, m.auth_data, m.body, m.deleted, "
        + "m.kind, m.target_id, m.target_offset, m.emoji, m.reply_to_id, m.reply_to_offset, m.state, m.sender_user"
    typealias ReadJob = @Sendable (SQLiteConnection) -> Void

    /// Opens (creating when missing) the database at `path` and migrates it. Throws, naming
    /// the path, when it cannot be opened, written or read as a Parley database.
    public init(path: String, options: SQLiteStoreOptions = SQLiteStoreOptions(),
                clockMillis: @escaping @Sendable () -> Int64 = { SystemWallClock().nowMillis() }) throws(ParleyError) {
        self.path = path
        self.options = options
        self.clockMillis = clockMillis
        let write = try SQLiteConnection(path: path)
        let state: WriterState
        var openedAt: Int64 = 0
        do throws(ParleyError) {
            let mode = try write.statement("PRAGMA journal_mode = WAL")
            _ = try mode.step()
            guard mode.string(0)?.lowercased() == "wal" else {
                throw ParleyError(.internalError, "cannot switch \(path) to WAL mode")
            }
            try mode.run()
            try write.exec("PRAGMA synchronous = \(options.synchronousFull ? "FULL" : "NORMAL")")
            // The writer's page cache: SQLite's default 2 MiB made it read back index pages
            // of busy rooms on every group commit (with thousands of rooms, a few percent of
            // the server's CPU in pread). At most 32 MiB, only as the database grows.
            try write.exec("PRAGMA cache_size = -32768")
            // Checkpoints run on their own thread (WALCheckpointer), not inside a commit.
            // The WAL holds up to `walCheckpointPages` pages: with many busy rooms SQLite's
            // default (1,000 pages) copied the same hot pages back again and again.
            openedAt = try Self.migrate(write)
            if let pages = options.maxPageCount { try write.exec("PRAGMA max_page_count = \(pages)") }
            if let maxBytes = options.maxBytes {
                let pageSize = max(512, try write.integer("PRAGMA page_size"))
                try write.exec("PRAGMA max_page_count = \(max(1, Int64(maxBytes) / pageSize))")
            }
            state = try WriterState(connection: write, retention: options.retention,
                                    retentionIntervalMillis: Int64(options.retentionIntervalMillis), maxBytes: options.maxBytes,
                                    maxClientIDsPerRoom: options.maxClientIDsPerRoom)
            // Retention runs when the store opens (then in the background), before any read.
            state.enforceRetention(nowMillis: clockMillis())
        } catch {
            throw ParleyError(error.code, "the data store \(path) cannot be used: \(error.message)")
        }
        let read: SQLiteConnection
        do throws(ParleyError) {
            read = try SQLiteConnection(path: path)
        } catch {
            throw ParleyError(error.code, "the data store \(path) cannot be used: \(error.message)")
        }
        let checkpointer: WALCheckpointer
        do throws(ParleyError) {
            checkpointer = try WALCheckpointer(path: path, limitPages: options.walCheckpointPages)
        } catch {
            throw ParleyError(error.code, "the data store \(path) cannot be used: \(error.message)")
        }
        checkpointer.watch(write)
        self.checkpointer = checkpointer
        connections = [write, read]
        openedAtSchemaVersion = openedAt
        // One job per commit; the writer waits past maxCommitsAwaitingAnswers of them.
        let answers = WorkerThread<[StoreAnswer]>(name: "parley-sqlite-a", idleMillis: 3_600_000, handle: { batches in
            for batch in batches { for answer in batch { answer.run() } }
        })
        self.answers = answers
        writer = WorkerThread(name: "parley-sqlite-w", idleMillis: options.retentionIntervalMillis, limit: options.maxQueuedWrites,
                              gather: options.gatherMicros > 0 ? (2, 64, options.gatherMicros) : nil,
                              handle: { jobs in
                                  state.handle(jobs, nowMillis: clockMillis())
                                  checkpointer.writerCheckpoint(write)
                                  // Every queue has a bound: the writer waits while the answer
                                  // thread is this many commits behind, as it did when it ran
                                  // the answers itself (what they hold stays bounded).
                                  answers.waitUntilFewer(than: Self.maxCommitsAwaitingAnswers)
                                  answers.submit(state.takeAnswers())
                              },
                              idle: {
                                  state.enforceRetention(nowMillis: clockMillis())
                                  checkpointer.writerCheckpoint(write, force: true)
                                  let done = state.takeAnswers()
                                  if !done.isEmpty { answers.submit(done) }
                              })
        reader = WorkerThread(name: "parley-sqlite-r", idleMillis: 3_600_000, limit: options.maxQueuedReads, handle: { jobs in
            for job in jobs { job(read) }
        })
    }

    /// Commits what is queued, then stops both threads and closes the database.
    public func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        writer.stop()
        answers.stop()
        reader.stop()
        checkpointer.stop()
        // The threads have ended: nothing else can touch the connections now. Closing the
        // last one checkpoints the WAL into the database file.
        for connection in connections.reversed() { connection.close() }
    }

    // MARK: schema

    /// Each migration takes the schema from version i to i+1; they run in one transaction.
    static let migrations: [String] = [
        """
        CREATE TABLE rooms (
            id INTEGER PRIMARY KEY,
            channel TEXT NOT NULL,
            name TEXT NOT NULL,
            last_offset INTEGER NOT NULL,
            UNIQUE (channel, name)
        );
        CREATE TABLE messages (
            room_id INTEGER NOT NULL,
            offset INTEGER NOT NULL,
            id TEXT NOT NULL,
            ts INTEGER NOT NULL,
            sender_id TEXT,
            client_data TEXT,
            auth_data TEXT,
            body TEXT NOT NULL,
            client_message_id TEXT,
            PRIMARY KEY (room_id, offset)
        ) WITHOUT ROWID;
        CREATE INDEX messages_client_message_id ON messages (client_message_id) WHERE client_message_id IS NOT NULL;
        """,
        // 2: deleted messages stay as tombstones (body 'null', deleted = 1).
        """
        ALTER TABLE messages ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0;
        """,
        // 3: message actions. An action is a row of its own (its offset, `kind` set, the target
        // by id and offset, `emoji` for reactions); a reply names its target; `state` holds a
        // message's current state (MessageStateRecord) once an action changed it, written in
        // the transaction that appends the action. Messages are looked up by id per room; the
        // edits of a message by their target (to take their text when it is deleted). Both
        // indexes are partial: an action row costs no id entry, a message row no target entry.
        // Their queries name them (INDEXED BY): without statistics SQLite prefers the primary
        // key's room prefix, which is a scan of the room.
        """
        ALTER TABLE messages ADD COLUMN kind TEXT;
        ALTER TABLE messages ADD COLUMN target_id TEXT;
        ALTER TABLE messages ADD COLUMN target_offset INTEGER;
        ALTER TABLE messages ADD COLUMN emoji TEXT;
        ALTER TABLE messages ADD COLUMN reply_to_id TEXT;
        ALTER TABLE messages ADD COLUMN reply_to_offset INTEGER;
        ALTER TABLE messages ADD COLUMN state TEXT;
        CREATE INDEX messages_id ON messages (room_id, id) WHERE kind IS NULL;
        CREATE INDEX messages_target ON messages (room_id, target_offset) WHERE kind IS NOT NULL;
        """,
        // 4: users. The sender's user id (docs/protocols.md, "Users") when it is not the
        // member id: unread counts leave out a user's own messages from any device.
        """
        ALTER TABLE messages ADD COLUMN sender_user TEXT;
        """,
        // 5: messages kept in the order they are written (a rowid log), found by room through
        // an index. Clustered by (room, offset), every group commit dirtied a page of full
        // rows per busy room, plus a page of the (room, id) index: with 2,000 busy rooms two
        // 4 KiB pages went to the WAL per 100-byte message, and the writer was a third of the
        // server's CPU. Now new rows share the log's last pages, the (room, offset) index's
        // entries are a dozen bytes, and ids (ordered within a process, MessageIDGenerator)
        // and the client message ids' timestamps are indexed where they are appended.
        """
        CREATE TABLE messages_log (
            seq INTEGER PRIMARY KEY,
            room_id INTEGER NOT NULL,
            offset INTEGER NOT NULL,
            id TEXT NOT NULL,
            ts INTEGER NOT NULL,
            sender_id TEXT,
            client_data TEXT,
            auth_data TEXT,
            body TEXT NOT NULL,
            client_message_id TEXT,
            deleted INTEGER NOT NULL DEFAULT 0,
            kind TEXT,
            target_id TEXT,
            target_offset INTEGER,
            emoji TEXT,
            reply_to_id TEXT,
            reply_to_offset INTEGER,
            state TEXT,
            sender_user TEXT
        );
        INSERT INTO messages_log (room_id, offset, id, ts, sender_id, client_data, auth_data, body, client_message_id,
                                  deleted, kind, target_id, target_offset, emoji, reply_to_id, reply_to_offset, state, sender_user)
            SELECT room_id, offset, id, ts, sender_id, client_data, auth_data, body, client_message_id,
                   deleted, kind, target_id, target_offset, emoji, reply_to_id, reply_to_offset, state, sender_user
            FROM messages ORDER BY ts, room_id, offset;
        DROP TABLE messages;
        ALTER TABLE messages_log RENAME TO messages;
        CREATE UNIQUE INDEX messages_room ON messages (room_id, offset);
        CREATE INDEX messages_id ON messages (id) WHERE kind IS NULL;
        CREATE INDEX messages_target ON messages (room_id, target_offset) WHERE kind IS NOT NULL;
        CREATE INDEX messages_client_message_id ON messages (ts) WHERE client_message_id IS NOT NULL;
        """,
    ]

    /// Brings the schema to ``schemaVersion``; returns the version the file had.
    @discardableResult
    static func migrate(_ connection: SQLiteConnection) throws(ParleyError) -> Int64 {
        let version = try connection.integer("PRAGMA user_version")
        guard version <= schemaVersion else {
            throw ParleyError(.internalError, "schema version \(version) is newer than this build understands (\(schemaVersion))")
        }
        guard version < schemaVersion else { return version }
        try connection.exec("BEGIN IMMEDIATE")
        do {
            for index in Int(version)..<Int(schemaVersion) { try connection.exec(migrations[index]) }
            try connection.exec("PRAGMA user_version = \(schemaVersion)")
            try connection.exec("COMMIT")
        } catch {
            try? connection.exec("ROLLBACK")
            throw error
        }
        return version
    }

    // MARK: MessageStore

    public func append(_ message: Message, clientMessageID: String?,
                       completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        guard writer.submit(.append(message, clientMessageID, completion)) else {
            completion(.failure(Self.overloaded(writer)))
            return
        }
    }

    /// Appends waiting for the writer now.
    public var writeQueueDepth: Int { writer.depth }
    /// Reads waiting for the reader now.
    public var readQueueDepth: Int { reader.depth }

    static func overloaded<Job>(_ thread: WorkerThread<Job>) -> ParleyError {
        ParleyError(.unavailable, "the store is overloaded (\(thread.limit) requests waiting); try again")
    }

    public func enforceRetention(nowMillis: Int64, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        writer.submit(.retention(nowMillis, completion))
    }

    public func deleteMessage(in room: RoomKey, offset: Int64, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        writer.submit(.delete(room, offset, completion))
    }

    /// Test hook: changes `max_page_count` (raise it to simulate space coming back).
    public func setMaxPageCount(_ pages: Int, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        writer.submit(.maxPageCount(pages, completion))
    }

    public func messages(in room: RoomKey, after offset: Int64, limit: Int,
                         completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        messages(in: room, after: offset, limit: limit, maxBytes: .max, completion: completion)
    }

    /// As the `before` page: each row's size is looked at before it is decoded.
    public func messages(in room: RoomKey, after offset: Int64, limit: Int, maxBytes: Int,
                         completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        submitRead(failing: completion) { connection in
            completion(Result { () throws(ParleyError) -> [Message] in
                let statement = try connection.statement("""
                    SELECT \(Self.columns) FROM messages m
                    JOIN rooms r ON r.id = m.room_id
                    WHERE r.channel = ?1 AND r.name = ?2 AND m.offset > ?3 ORDER BY m.offset LIMIT ?4
                    """)
                statement.bind(1, room.channel)
                statement.bind(2, room.room)
                statement.bind(3, offset)
                statement.bind(4, Int64(max(0, limit)))
                return try self.rows(statement, room: room, maxBytes: maxBytes, current: false).messages
            })
        }
    }

    public func messages(in room: RoomKey, before: Int64?, limit: Int,
                         completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        messages(in: room, before: before, limit: limit, maxBytes: .max, completion: completion)
    }

    /// Rows are read newest first and each one's size is looked at before it is decoded: the
    /// page ends at the first that does not fit, so at most one message past the budget is
    /// ever read (by SQLite, not decoded).
    public func messages(in room: RoomKey, before: Int64?, limit: Int, maxBytes: Int,
                         completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        submitRead(failing: completion) { connection in
            completion(Result { () throws(ParleyError) -> MessagePage in
                let statement = try connection.statement("""
                    SELECT \(Self.columns) FROM messages m
                    JOIN rooms r ON r.id = m.room_id
                    WHERE r.channel = ?1 AND r.name = ?2 AND m.offset < ?3 AND m.kind IS NULL ORDER BY m.offset DESC LIMIT ?4
                    """)
                statement.bind(1, room.channel)
                statement.bind(2, room.room)
                statement.bind(3, before ?? Int64.max)
                statement.bind(4, Int64(max(0, limit)))
                let (newestFirst, cut) = try self.rows(statement, room: room, maxBytes: maxBytes, current: true)
                let page = Array(newestFirst.reversed())
                guard let first = page.first else { return MessagePage(messages: [], hasMore: false) }
                if cut { return MessagePage(messages: page, hasMore: true) }
                let older = try connection.statement("""
                    SELECT EXISTS (SELECT 1 FROM messages m JOIN rooms r ON r.id = m.room_id
                    WHERE r.channel = ?1 AND r.name = ?2 AND m.offset < ?3 AND m.kind IS NULL)
                    """)
                older.bind(1, room.channel)
                older.bind(2, room.room)
                older.bind(3, first.offset)
                _ = try older.step()
                let hasMore = older.int64(0) != 0
                try older.run()
                return MessagePage(messages: page, hasMore: hasMore)
            })
        }
    }

    public func message(withID id: String, in room: RoomKey, completion: @escaping @Sendable (Result<Message?, ParleyError>) -> Void) {
        submitRead(failing: completion) { connection in
            completion(Result { () throws(ParleyError) -> Message? in
                let statement = try connection.statement("""
                    SELECT \(Self.columns) FROM messages m INDEXED BY messages_id
                    JOIN rooms r ON r.id = m.room_id
                    WHERE r.channel = ?1 AND r.name = ?2 AND m.id = ?3 AND m.kind IS NULL LIMIT 1
                    """)
                statement.bind(1, room.channel)
                statement.bind(2, room.room)
                statement.bind(3, id)
                return try self.rows(statement, room: room, maxBytes: .max, current: true).messages.first
            })
        }
    }

    public func loadRoom(_ room: RoomKey, clientMessageIDsSince: Int64,
                         completion: @escaping @Sendable (Result<RoomRecovery, ParleyError>) -> Void) {
        // On the writer thread: it knows every room's last offset, appends already queued
        // included (it handles its jobs in order).
        guard writer.submit(.loadRoom(room, clientMessageIDsSince, completion)) else {
            completion(.failure(Self.overloaded(writer)))
            return
        }
    }

    /// Queues a read, or fails it at once when the reader's queue is full.
    private func submitRead<T>(failing completion: @escaping @Sendable (Result<T, ParleyError>) -> Void,
                               _ job: @escaping ReadJob) {
        guard reader.submit(job) else {
            completion(.failure(Self.overloaded(reader)))
            return
        }
    }

    public func recover(clientMessageIDsSince: Int64) throws(ParleyError) -> StoreRecovery {
        let result = Mutex<Result<[RememberedPublish], ParleyError>?>(nil)
        let done = Semaphore()
        reader.submit { connection in
            let found = Result { () throws(ParleyError) -> [RememberedPublish] in
                let statement = try connection.statement("""
                    SELECT r.channel, r.name, m.client_message_id, m.id, m.offset, m.ts
                    FROM messages m INDEXED BY messages_client_message_id
                    JOIN rooms r ON r.id = m.room_id
                    WHERE m.client_message_id IS NOT NULL AND m.ts >= ?1 ORDER BY m.room_id, m.offset
                    """)
                statement.bind(1, clientMessageIDsSince)
                var found: [RememberedPublish] = []
                while try statement.step() {
                    found.append(RememberedPublish(room: RoomKey(channel: statement.string(0) ?? "", room: statement.string(1) ?? ""),
                                                   clientMessageID: statement.string(2) ?? "", id: statement.string(3) ?? "",
                                                   offset: statement.int64(4), timestampMillis: statement.int64(5)))
                }
                return found
            }
            result.withLock { $0 = found }
            done.post()
        }
        let offsets = Mutex<[RoomKey: Int64]>([:])
        writer.submit(.lastOffsets { found in
            offsets.withLock { $0 = found }
            done.post()
        })
        done.wait(timeoutMillis: -1)
        done.wait(timeoutMillis: -1)
        return StoreRecovery(lastOffsets: offsets.withLock { $0 }, recentPublishes: try result.withLock { $0! }.get())
    }

    /// Stored messages whose JSON no longer parses (a damaged file, a hand edit), skipped by
    /// every read since the store opened: a reader sees the gap in offsets, the operator this
    /// count (in `/metrics`) and a log line.
    public var unreadableMessages: Int { unreadable.load(ordering: .relaxed) }

    /// Called with the room and offset of each unreadable message a read skips.
    public var onUnreadableMessage: (@Sendable (RoomKey, Int64) -> Void)? {
        get { unreadableHandler.withLock { $0 }?.call }
        set { unreadableHandler.withLock { $0 = newValue.map(Callback.init) } }
    }

    func rows(_ statement: Statement, room: RoomKey) throws(ParleyError) -> [Message] {
        try rows(statement, room: room, maxBytes: .max, current: false).messages
    }

    /// How many bytes the current row's message counts for in a page's budget: about what
    /// ``Message/approximateSize`` says of it once decoded.
    private static func rowSize(_ statement: Statement, current: Bool) -> Int {
        var size = 96 + statement.byteCount(0) + (current && !statement.isNull(14) ? statement.byteCount(14) : statement.byteCount(6))
        if !statement.isNull(3) { size += 32 + statement.byteCount(3) + statement.byteCount(4) + statement.byteCount(5) }
        return size
    }

    /// The rows up to the first one that would take them past `maxBytes` (the first row is
    /// always taken); `cut` when one was left, and then the statement is reset.
    /// Each row as appended, or with `current` in its current state (its `state` applied).
    func rows(_ statement: Statement, room: RoomKey, maxBytes: Int, current: Bool) throws(ParleyError) -> (messages: [Message], cut: Bool) {
        var messages: [Message] = []
        var bytes = 0
        var rowsRead = 0
        while try statement.step() {
            if maxBytes != .max {
                let size = Self.rowSize(statement, current: current)
                if rowsRead > 0 && bytes + size > maxBytes {
                    statement.reset()
                    return (messages, true)
                }
                bytes += size
            }
            rowsRead += 1
            do throws(JSONParseError) {
                messages.append(try Self.decode(statement, room: room, current: current))
            } catch {
                // Never handed out as `null`: skipped, counted and reported.
                unreadable.add(1, ordering: .relaxed)
                unreadableHandler.withLock { $0 }?.call(room, statement.int64(1))
            }
        }
        return (messages, false)
    }
}

extension SQLiteMessageStore {
    /// The current row (selected as ``columns``) as appended, or with `current` in its
    /// current state.
    static func decode(_ statement: Statement, room: RoomKey, current: Bool) throws(JSONParseError) -> Message {
        var sender: Member?
        if let id = statement.string(3) {
            sender = Member(id: id, clientData: try statement.string(4).map { text throws(JSONParseError) in try JSONParser.parse(text) },
                            authData: try statement.string(5).map { text throws(JSONParseError) in try JSONParser.parse(text) },
                            userID: statement.string(15))
        }
        let body = try JSONParser.parse(statement.string(6) ?? "")
        var action: MessageAction?
        if let kind = statement.string(8).flatMap(MessageAction.Kind.init(rawValue:)) {
            action = MessageAction(kind, target: MessageReference(id: statement.string(9) ?? "", offset: statement.int64(10)),
                                   emoji: statement.string(11))
        }
        let replyTo = statement.string(12).map { MessageReference(id: $0, offset: statement.int64(13)) }
        let entry = Message(id: statement.string(0) ?? "", offset: statement.int64(1), timestampMillis: statement.int64(2),
                            room: room, sender: sender, body: body, isDeleted: statement.int64(7) != 0, replyTo: replyTo, action: action)
        guard current, let text = statement.string(14) else { return entry }
        guard let state = MessageStateRecord.decode(try JSONParser.parse(text), onto: entry) else {
            throw JSONParseError(offset: 0, message: "not a message state record")
        }
        return state
    }
}

/// One completion the answer thread calls: an append's with its result, or any other job's.
private enum StoreAnswer: Sendable {
    case append(@Sendable (Result<Void, ParleyError>) -> Void, Result<Void, ParleyError>)
    case call(@Sendable () -> Void)

    func run() {
        switch self {
        case .append(let completion, let result): completion(result)
        case .call(let completion): completion()
        }
    }
}

/// What only the writer thread touches: its connection and each room's id and last offset.
///
/// `@unchecked Sendable` proof: made in `SQLiteMessageStore.init` before the writer thread
/// starts (which reads `lastOffsets()` once, before the thread exists), then used only from
/// the writer thread's `handle` and `idle` closures, which run one at a time on that thread.
private final class WriterState: @unchecked Sendable {
    let connection: SQLiteConnection
    let retention: StoreRetention
    var rooms: [RoomKey: (id: Int64, last: Int64)] = [:]
    /// Rooms whose `last_offset` row is behind ``rooms`` (their newest message row says it).
    var unsavedLastOffsets: Set<RoomKey> = []
    /// Completions of the jobs handled so far, in order, for the answer thread.
    private var pendingAnswers: [StoreAnswer] = []

    /// Queues a job's completion (with its result already worked out) for the answer thread.
    func answer(_ completion: @escaping @Sendable () -> Void) { pendingAnswers.append(.call(completion)) }

    /// Queues an append's completion and result: no closure made per message.
    func answer(_ completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void, _ result: Result<Void, ParleyError>) {
        pendingAnswers.append(.append(completion, result))
    }

    /// The completions queued since the last call, in order.
    func takeAnswers() -> [StoreAnswer] {
        defer { pendingAnswers = [] }
        return pendingAnswers
    }
    let maxBatch = 8_192
    let retentionIntervalMillis: Int64
    /// When retention runs next (also under constant load, when the thread is never idle).
    var nextRetentionMillis: Int64 = 0
    /// ``SQLiteStoreOptions/maxBytes``.
    let maxBytes: Int?
    /// ``SQLiteStoreOptions/maxClientIDsPerRoom``.
    let maxClientIDsPerRoom: Int

    init(connection: SQLiteConnection, retention: StoreRetention, retentionIntervalMillis: Int64,
         maxBytes: Int? = nil, maxClientIDsPerRoom: Int = SingleNodeBroker.maxRememberedPerRoom) throws(ParleyError) {
        self.connection = connection
        self.retention = retention
        self.retentionIntervalMillis = retentionIntervalMillis
        self.maxBytes = maxBytes
        self.maxClientIDsPerRoom = max(0, maxClientIDsPerRoom)
        // `rooms.last_offset` is written only before retention deletes (``saveLastOffsets()``),
        // not with every batch: a room's last offset is the larger of it and its newest row
        // (one seek down the primary key per room).
        let statement = try connection.statement("""
            SELECT r.id, r.channel, r.name,
                   max(r.last_offset, coalesce((SELECT max(m.offset) FROM messages m WHERE m.room_id = r.id), 0))
            FROM rooms r
            """)
        while try statement.step() {
            rooms[RoomKey(channel: statement.string(1) ?? "", room: statement.string(2) ?? "")] = (statement.int64(0), statement.int64(3))
        }
    }

    func lastOffsets() -> [RoomKey: Int64] { rooms.mapValues(\.last) }

    static let insertMessageSQL = """
        INSERT INTO messages (room_id, offset, id, ts, sender_id, client_data, auth_data, body, client_message_id,
                              kind, target_id, target_offset, emoji, reply_to_id, reply_to_offset, sender_user)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
        """

    func handle(_ jobs: [SQLiteMessageStore.WriteJob], nowMillis: Int64) {
        var batch: [(Message, String?, @Sendable (Result<Void, ParleyError>) -> Void)] = []
        // Mostly appends: one buffer each for the batch and its answers, not one per doubling.
        batch.reserveCapacity(min(jobs.count, maxBatch))
        pendingAnswers.reserveCapacity(pendingAnswers.count + jobs.count)
        func flush() {
            guard !batch.isEmpty else { return }
            commit(batch)
            batch.removeAll(keepingCapacity: true)
        }
        for job in jobs {
            switch job {
            case .append(let message, let clientID, let completion):
                batch.append((message, clientID, completion))
                if batch.count >= maxBatch { flush() }
            case .retention(let now, let completion):
                flush()
                enforceRetention(nowMillis: now, completion: completion)
            case .lastOffsets(let completion):
                flush()
                let offsets = lastOffsets()
                answer { completion(offsets) }
            case .loadRoom(let room, let since, let completion):
                flush()
                let result = Result { () throws(ParleyError) in try loadRoom(room, clientMessageIDsSince: since) }
                answer { completion(result) }
            case .delete(let room, let offset, let completion):
                flush()
                let result = Result { () throws(ParleyError) in try delete(room, offset: offset) }
                answer { completion(result) }
            case .maxPageCount(let pages, let completion):
                flush()
                let result = Result { () throws(ParleyError) in try connection.exec("PRAGMA max_page_count = \(pages)") }
                answer { completion(result) }
            }
        }
        flush()
        if nowMillis >= nextRetentionMillis { enforceRetention(nowMillis: nowMillis) }
    }

    /// Replaces one message by its tombstone (the body and current state go; id, time and
    /// sender stay), and the edits of it too (they hold its text).
    func delete(_ key: RoomKey, offset: Int64) throws(ParleyError) -> Bool {
        guard let room = rooms[key] else { return false }
        return try delete(roomID: room.id, offset: offset)
    }

    func delete(roomID: Int64, offset: Int64) throws(ParleyError) -> Bool {
        let update = try connection.statement("""
            UPDATE messages SET body = 'null', deleted = 1, state = NULL WHERE room_id = ?1 AND offset = ?2 AND kind IS NULL
            """)
        update.bind(1, roomID)
        update.bind(2, offset)
        try update.run()
        guard sqlite3_changes(connection.handle) > 0 else { return false }
        let edits = try connection.statement("""
            UPDATE messages INDEXED BY messages_target SET body = 'null', deleted = 1
            WHERE room_id = ?1 AND target_offset = ?2 AND kind = 'edit' AND deleted = 0
            """)
        edits.bind(1, roomID)
        edits.bind(2, offset)
        try edits.run()
        return true
    }

    /// Applies an action entry to its target's row (in the transaction appending it, after the
    /// entry's own row): a delete makes the tombstone, anything else rewrites the target's
    /// `state`; an edit whose target is deleted becomes a tombstone itself.
    func apply(_ entry: Message, roomID: Int64, room key: RoomKey) throws(ParleyError) {
        guard let action = entry.action else { return }
        if action.kind == .delete {
            _ = try delete(roomID: roomID, offset: action.target.offset)
            return
        }
        let read = try connection.statement("""
            SELECT \(SQLiteMessageStore.columns) FROM messages m WHERE m.room_id = ?1 AND m.offset = ?2 AND m.kind IS NULL
            """)
        read.bind(1, roomID)
        read.bind(2, action.target.offset)
        guard try read.step() else { return }
        let target: Message
        do throws(JSONParseError) {
            target = try SQLiteMessageStore.decode(read, room: key, current: true)
        } catch {
            // An unreadable target keeps its row as it is; the action is still logged.
            read.reset()
            return
        }
        read.reset()
        guard !target.isDeleted else {
            // An edit that passed its checks before the delete was stored: kept as a
            // tombstone, as the edits the delete found were, so its text is not replayed.
            if action.kind == .edit {
                let tombstone = try connection.statement("UPDATE messages SET body = 'null', deleted = 1 WHERE room_id = ?1 AND offset = ?2")
                tombstone.bind(1, roomID)
                tombstone.bind(2, entry.offset)
                try tombstone.run()
            }
            return
        }
        let update = try connection.statement("UPDATE messages SET state = ?1 WHERE room_id = ?2 AND offset = ?3")
        update.bind(1, MessageStateRecord.encode(target.applying(entry)).jsonString)
        update.bind(2, roomID)
        update.bind(3, action.target.offset)
        try update.run()
    }

    /// A room's last offset and its client message ids since `since` (Unix ms). Offsets grow
    /// with time in a room, so the first young enough message is found by a binary search on
    /// offsets rather than by scanning the room's old messages.
    func loadRoom(_ key: RoomKey, clientMessageIDsSince since: Int64) throws(ParleyError) -> RoomRecovery {
        guard let room = rooms[key] else { return RoomRecovery() }
        let probe = try connection.statement("SELECT offset, ts FROM messages WHERE room_id = ?1 AND offset >= ?2 ORDER BY offset LIMIT 1")
        var low: Int64 = 1, high = room.last + 1
        while low < high {
            let mid = low + (high - low) / 2
            probe.bind(1, room.id)
            probe.bind(2, mid)
            if try probe.step() {
                let (offset, ts) = (probe.int64(0), probe.int64(1))
                if ts >= since { high = min(mid, offset) } else { low = offset + 1 }
            } else {
                high = mid
            }
            probe.reset()
        }
        // The newest ones only, as many as the broker keeps for a room: a room that took a
        // million in the window would otherwise be read whole, on the writer's thread.
        let statement = try connection.statement("""
            SELECT client_message_id, id, offset, ts FROM messages
            WHERE room_id = ?1 AND offset >= ?2 AND client_message_id IS NOT NULL ORDER BY offset DESC LIMIT ?3
            """)
        statement.bind(1, room.id)
        statement.bind(2, low)
        statement.bind(3, Int64(maxClientIDsPerRoom))
        var recovery = RoomRecovery(lastOffset: room.last)
        while try statement.step() {
            guard statement.int64(3) >= since else { continue }
            recovery.recentPublishes.append(RememberedPublish(room: key, clientMessageID: statement.string(0) ?? "",
                                                              id: statement.string(1) ?? "", offset: statement.int64(2),
                                                              timestampMillis: statement.int64(3)))
        }
        recovery.recentPublishes.reverse()
        return recovery
    }

    /// A full database that is full because it reached ``SQLiteStoreOptions/maxBytes``, said
    /// so (rather than "disk full", which sends an operator to the wrong place). The failed
    /// batch was rolled back, so the file stands where it was before it: full means the batch
    /// (`batchBytes`, about; each row also costs index pages) would not have fitted.
    private func budgetError(_ error: ParleyError, batchBytes: Int) -> ParleyError? {
        guard let maxBytes, error.code == .unavailable,
              let pages = try? connection.integer("PRAGMA page_count"),
              let limit = try? connection.integer("PRAGMA max_page_count"),
              let pageSize = try? connection.integer("PRAGMA page_size"), pageSize > 0,
              pages + Int64(batchBytes) / pageSize + 16 >= limit else { return nil }
        return ParleyError(.unavailable, SQLiteMessageStore.budgetReachedMessage(maxBytes))
    }

    /// One transaction for the whole batch: all of it is durable, or none of it.
    private func commit(_ batch: [(Message, String?, @Sendable (Result<Void, ParleyError>) -> Void)]) {
        var results = [Result<Void, ParleyError>](repeating: .success(()), count: batch.count)
        var touched: [RoomKey: (id: Int64, last: Int64)] = [:]
        do throws(ParleyError) {
            try connection.exec("BEGIN IMMEDIATE")
            // Prepared once per commit, not looked up (by its text) once per message.
            let insert = try connection.statement(Self.insertMessageSQL)
            for (index, (message, clientID, _)) in batch.enumerated() {
                var room: (id: Int64, last: Int64)
                if let known = touched[message.room] ?? rooms[message.room] {
                    room = known
                } else {
                    let create = try connection.statement("INSERT INTO rooms (channel, name, last_offset) VALUES (?1, ?2, 0)")
                    create.bind(1, message.room.channel)
                    create.bind(2, message.room.room)
                    try create.run()
                    room = (sqlite3_last_insert_rowid(connection.handle), 0)
                }
                guard message.offset == room.last + 1 else {
                    results[index] = .failure(ParleyError(.conflict, "offset \(message.offset) does not follow \(room.last) in \(message.room)"))
                    touched[message.room] = room
                    continue
                }
                // Every parameter is bound below: none needs clearing first.
                insert.bind(1, room.id)
                insert.bind(2, message.offset)
                insert.bind(3, message.id)
                insert.bind(4, message.timestampMillis)
                insert.bind(5, message.sender?.id)
                insert.bind(6, message.sender?.clientData?.jsonString)
                insert.bind(7, message.sender?.authData?.jsonString)
                insert.bind(8, utf8: message.bodyJSON)
                insert.bind(9, clientID)
                insert.bind(10, message.action?.kind.rawValue)
                insert.bind(11, message.action?.target.id)
                insert.bind(12, message.action.map { $0.target.offset })
                insert.bind(13, message.action?.emoji)
                insert.bind(14, message.replyTo?.id)
                insert.bind(15, message.replyTo.map { $0.offset })
                insert.bind(16, message.sender?.userID)
                try insert.run()
                // After the entry's own row is there: an edit of a deleted target makes it a
                // tombstone (``apply(_:roomID:room:)``).
                if message.isAction { try apply(message, roomID: room.id, room: message.room) }
                room.last = message.offset
                touched[message.room] = room
            }
            // No `UPDATE rooms` per batch: the rows just inserted say the last offset.
            try connection.exec("COMMIT")
        } catch {
            try? connection.exec("ROLLBACK")
            let error = budgetError(error, batchBytes: batch.reduce(0) { $0 + 2 * $1.0.approximateSize }) ?? error
            for (_, _, completion) in batch { answer(completion, .failure(error)) }
            return
        }
        for (key, room) in touched {
            rooms[key] = room
            // Only retention deletes rows: a store that keeps everything never needs the row.
            if !retention.keepsEverything { unsavedLastOffsets.insert(key) }
        }
        for (index, (_, _, completion)) in batch.enumerated() { answer(completion, results[index]) }
    }

    func enforceRetention(nowMillis: Int64, completion: (@Sendable (Result<Void, ParleyError>) -> Void)? = nil) {
        nextRetentionMillis = nowMillis + retentionIntervalMillis
        guard !retention.keepsEverything else {
            if let completion { answer { completion(.success(())) } }
            return
        }
        let result = Result { () throws(ParleyError) in
            try connection.exec("BEGIN IMMEDIATE")
            do throws(ParleyError) {
                // Before any row goes, the offsets it carried are written down: a room whose
                // messages all went keeps counting from where it was.
                try saveLastOffsets()
                for (key, room) in rooms {
                    let policy = retention.policy(for: key.channel)
                    var floor: Int64 = 0
                    if let keep = policy.maxMessagesPerRoom { floor = max(floor, room.last - Int64(keep)) }
                    if let age = policy.maxAgeMillis {
                        // Offsets grow with time in a room: the first message young enough
                        // bounds what goes, found without scanning what stays.
                        let young = try connection.statement(
                            "SELECT offset FROM messages WHERE room_id = ?1 AND ts >= ?2 ORDER BY offset LIMIT 1")
                        young.bind(1, room.id)
                        young.bind(2, nowMillis - age)
                        let first = try young.step() ? young.int64(0) : room.last + 1
                        try young.run()
                        floor = max(floor, first - 1)
                    }
                    guard floor > 0 else { continue }
                    let delete = try connection.statement("DELETE FROM messages WHERE room_id = ?1 AND offset <= ?2")
                    delete.bind(1, room.id)
                    delete.bind(2, floor)
                    try delete.run()
                }
                try connection.exec("COMMIT")
                unsavedLastOffsets.removeAll()
            } catch {
                try? connection.exec("ROLLBACK")
                throw error
            }
        }
        if let completion { answer { completion(result) } }
    }

    /// Writes `rooms.last_offset` of every room that stored messages since the last time; in
    /// the caller's transaction.
    func saveLastOffsets() throws(ParleyError) {
        for key in unsavedLastOffsets {
            guard let room = rooms[key] else { continue }
            let statement = try connection.statement("UPDATE rooms SET last_offset = ?1 WHERE id = ?2")
            statement.bind(1, room.last)
            statement.bind(2, room.id)
            try statement.run()
        }
    }
}
