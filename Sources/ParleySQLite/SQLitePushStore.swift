import ParleyCore
import Synchronization

/// Devices, mutes and the push queue of a single node (``PushStore``), in a SQLite file of
/// their own beside the message store (`push.sqlite3` in the data directory). Each call runs
/// at once on the caller's thread (the push worker's), in its own transaction, so a queued
/// push survives a crash.
public final class SQLitePushStore: PushStore {
    /// Used only while the lock is held (the one thread at a time SQLiteConnection asks for).
    private let connection: Mutex<SQLiteConnection>
    public let path: String
    public var maxDevices: Int { Int(deviceCount.bound) }
    /// Devices in the file, under the store's bound.
    private let deviceCount: TableCount

    public init(path: String, maxDevices: Int = PushDevice.maxStored, synchronousFull: Bool = false) throws(ParleyError) {
        self.path = path
        deviceCount = TableCount(table: "devices", bound: maxDevices)
        let connection = try SQLiteConnection(path: path)
        try connection.exec("""
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = \(synchronousFull ? "FULL" : "NORMAL");
            CREATE TABLE IF NOT EXISTS devices (
                platform TEXT NOT NULL,
                token TEXT NOT NULL,
                channel TEXT NOT NULL,
                user TEXT NOT NULL,
                topic TEXT,
                sandbox INTEGER NOT NULL,
                p256dh BLOB,
                auth BLOB,
                registered_ms INTEGER NOT NULL,
                PRIMARY KEY (platform, token)
            ) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS devices_user ON devices (channel, user);
            CREATE INDEX IF NOT EXISTS devices_registered ON devices (registered_ms);
            CREATE TABLE IF NOT EXISTS mutes (
                channel TEXT NOT NULL,
                user TEXT NOT NULL,
                room TEXT NOT NULL,
                until_ms INTEGER NOT NULL,
                PRIMARY KEY (channel, user, room)
            ) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS jobs (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                channel TEXT NOT NULL,
                user TEXT NOT NULL,
                room TEXT NOT NULL,
                count INTEGER NOT NULL,
                last_offset INTEGER NOT NULL,
                due_ms INTEGER NOT NULL,
                attempts INTEGER NOT NULL,
                UNIQUE (channel, user, room)
            );
            CREATE INDEX IF NOT EXISTS jobs_due ON jobs (due_ms, id);
            """)
        self.connection = Mutex(connection)
    }

    public func close() { connection.withLock { $0.close() } }

    /// One transaction under the lock (`SQLiteConnection.transaction` spelled out: a generic
    /// result returned through the nested closure trips Mutex's `sending` check).
    private func run<T>(_ body: (SQLiteConnection) throws(ParleyError) -> T) throws(ParleyError) -> T {
        try connection.withLock { connection throws(ParleyError) -> T in
            try connection.exec("BEGIN IMMEDIATE")
            do throws(ParleyError) {
                let result = try body(connection)
                try connection.exec("COMMIT")
                return result
            } catch {
                try? connection.exec("ROLLBACK")
                // Whatever the transaction did to the device count is undone: counted again
                // at the next registration (under the lock, so no call reads the stale one).
                deviceCount.forget()
                throw error
            }
        }
    }

    public func register(_ device: PushDevice) throws(ParleyError) {
        try run { connection throws(ParleyError) in
            let known = try connection.statement("SELECT 1 FROM devices WHERE platform = ?1 AND token = ?2")
            known.bind(1, device.platform.rawValue)
            known.bind(2, device.token)
            if !(try known.step()) { deviceCount.add(1) }
            known.reset()
            let insert = try connection.statement("""
                INSERT OR REPLACE INTO devices (platform, token, channel, user, topic, sandbox, p256dh, auth, registered_ms)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                """)
            insert.bind(1, device.platform.rawValue)
            insert.bind(2, device.token)
            insert.bind(3, device.channel)
            insert.bind(4, device.user)
            insert.bind(5, device.topic)
            insert.bind(6, Int64(device.sandbox ? 1 : 0))
            insert.bind(7, device.p256dh.map { Base64URL.encode($0) })
            insert.bind(8, device.auth.map { Base64URL.encode($0) })
            insert.bind(9, device.registeredMillis)
            try insert.run()
            let trim = try connection.statement("""
                DELETE FROM devices WHERE (platform, token) IN (
                    SELECT platform, token FROM devices WHERE channel = ?1 AND user = ?2
                    ORDER BY registered_ms DESC, token DESC LIMIT -1 OFFSET ?3)
                """)
            trim.bind(1, device.channel)
            trim.bind(2, device.user)
            trim.bind(3, Int64(PushDevice.maxPerUser))
            try trim.run()
            deviceCount.add(-Int64(connection.changes))
            // The store's bound: the devices registered longest ago go.
            try deviceCount.trim(connection) { excess throws(ParleyError) in
                let drop = try connection.statement("""
                    DELETE FROM devices WHERE (platform, token) IN (
                        SELECT platform, token FROM devices INDEXED BY devices_registered
                        WHERE NOT (platform = ?1 AND token = ?2) ORDER BY registered_ms LIMIT ?3)
                    """)
                drop.bind(1, device.platform.rawValue)
                drop.bind(2, device.token)
                drop.bind(3, excess)
                return drop
            }
        }
    }

    public func unregister(platform: PushDevice.Platform, token: String) throws(ParleyError) -> Bool {
        try run { connection throws(ParleyError) -> Bool in
            let delete = try connection.statement("DELETE FROM devices WHERE platform = ?1 AND token = ?2 RETURNING token")
            delete.bind(1, platform.rawValue)
            delete.bind(2, token)
            let found = try delete.step()
            if found { try delete.run() }
            if found { deviceCount.add(-1) }
            return found
        }
    }

    public func devices(of user: String, in channel: String) throws(ParleyError) -> [PushDevice] {
        try run { connection throws(ParleyError) -> [PushDevice] in
            let select = try connection.statement("""
                SELECT platform, token, topic, sandbox, p256dh, auth, registered_ms FROM devices
                WHERE channel = ?1 AND user = ?2 ORDER BY registered_ms, token
                """)
            select.bind(1, channel)
            select.bind(2, user)
            var devices: [PushDevice] = []
            while try select.step() {
                guard let platform = select.string(0).flatMap(PushDevice.Platform.init(rawValue:)), let token = select.string(1) else { continue }
                devices.append(PushDevice(channel: channel, user: user, platform: platform, token: token, topic: select.string(2),
                                          sandbox: select.int64(3) != 0, p256dh: select.string(4).flatMap { Base64URL.decode($0) },
                                          auth: select.string(5).flatMap { Base64URL.decode($0) }, registeredMillis: select.int64(6)))
            }
            return devices
        }
    }

    public func usersWithDevices(_ users: [String], in channel: String) throws(ParleyError) -> Set<String> {
        guard !users.isEmpty else { return [] }
        return try run { connection throws(ParleyError) -> Set<String> in
            var found = Set<String>()
            let select = try connection.statement("SELECT 1 FROM devices INDEXED BY devices_user WHERE channel = ?1 AND user = ?2 LIMIT 1")
            for user in Set(users) {
                select.bind(1, channel)
                select.bind(2, user)
                if try select.step() {
                    found.insert(user)
                    select.reset()
                }
            }
            return found
        }
    }

    public func setMute(_ mute: PushMute, user: String, channel: String, nowMillis: Int64) throws(ParleyError) {
        try run { connection throws(ParleyError) in
            // Ended mutes go (and a time not after now lifts this one).
            let ended = try connection.statement("DELETE FROM mutes WHERE channel = ?1 AND user = ?2 AND (until_ms <= ?3 OR room = ?4)")
            ended.bind(1, channel)
            ended.bind(2, user)
            ended.bind(3, nowMillis)
            ended.bind(4, mute.untilMillis <= nowMillis ? mute.room ?? "" : nil)
            try ended.run()
            guard mute.untilMillis > nowMillis else { return }
            let held = try connection.statement("SELECT count(*), sum(room = ?3) FROM mutes WHERE channel = ?1 AND user = ?2")
            held.bind(1, channel)
            held.bind(2, user)
            held.bind(3, mute.room ?? "")
            _ = try held.step()
            let (count, this) = (held.int64(0), held.int64(1))
            held.reset()
            if this == 0, count >= Int64(PushMute.maxPerUser) { throw PushMute.tooMany }
            let upsert = try connection.statement("INSERT OR REPLACE INTO mutes (channel, user, room, until_ms) VALUES (?1, ?2, ?3, ?4)")
            upsert.bind(1, channel)
            upsert.bind(2, user)
            upsert.bind(3, mute.room ?? "")
            upsert.bind(4, mute.untilMillis)
            try upsert.run()
        }
    }

    public func mutes(of user: String, in channel: String, nowMillis: Int64) throws(ParleyError) -> [PushMute] {
        try run { connection throws(ParleyError) -> [PushMute] in
            let select = try connection.statement("SELECT room, until_ms FROM mutes WHERE channel = ?1 AND user = ?2 AND until_ms > ?3 ORDER BY room")
            select.bind(1, channel)
            select.bind(2, user)
            select.bind(3, nowMillis)
            var mutes: [PushMute] = []
            while try select.step() {
                let room = select.string(0) ?? ""
                mutes.append(PushMute(room: room.isEmpty ? nil : room, untilMillis: select.int64(1)))
            }
            return mutes
        }
    }

    public func enqueue(_ job: PushJob, maxQueued: Int) throws(ParleyError) -> Bool {
        try run { connection throws(ParleyError) -> Bool in
            let update = try connection.statement("""
                UPDATE jobs SET count = count + ?4, last_offset = max(last_offset, ?5)
                WHERE channel = ?1 AND user = ?2 AND room = ?3 RETURNING id
                """)
            update.bind(1, job.channel)
            update.bind(2, job.user)
            update.bind(3, job.room)
            update.bind(4, Int64(job.count))
            update.bind(5, job.lastOffset)
            if try update.step() {
                try update.run()
                return true
            }
            guard try connection.integer("SELECT count(*) FROM jobs") < Int64(maxQueued) else { return false }
            let insert = try connection.statement("""
                INSERT INTO jobs (channel, user, room, count, last_offset, due_ms, attempts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0)
                """)
            insert.bind(1, job.channel)
            insert.bind(2, job.user)
            insert.bind(3, job.room)
            insert.bind(4, Int64(job.count))
            insert.bind(5, job.lastOffset)
            insert.bind(6, job.dueMillis)
            try insert.run()
            return true
        }
    }

    public func due(nowMillis: Int64, limit: Int) throws(ParleyError) -> [PushJob] {
        try run { connection throws(ParleyError) -> [PushJob] in
            let select = try connection.statement("""
                SELECT id, channel, user, room, count, last_offset, due_ms, attempts FROM jobs WHERE due_ms <= ?1 ORDER BY due_ms, id LIMIT ?2
                """)
            select.bind(1, nowMillis)
            select.bind(2, Int64(limit))
            var jobs: [PushJob] = []
            while try select.step() {
                jobs.append(PushJob(id: select.int64(0), channel: select.string(1) ?? "", user: select.string(2) ?? "",
                                    room: select.string(3) ?? "", count: Int(select.int64(4)), lastOffset: select.int64(5),
                                    dueMillis: select.int64(6), attempts: Int(select.int64(7))))
            }
            let lease = try connection.statement("UPDATE jobs SET due_ms = ?2 WHERE id = ?1")
            for index in jobs.indices {
                lease.bind(1, jobs[index].id)
                lease.bind(2, nowMillis + PushJob.leaseMillis)
                try lease.run()
                jobs[index].leasedUntilMillis = nowMillis + PushJob.leaseMillis
            }
            return jobs
        }
    }

    public func renew(_ taken: PushJob, nowMillis: Int64) throws(ParleyError) -> PushJob? {
        guard let lease = taken.leasedUntilMillis else { return nil }
        return try run { connection throws(ParleyError) -> PushJob? in
            let update = try connection.statement("UPDATE jobs SET due_ms = ?3 WHERE id = ?1 AND due_ms = ?2")
            update.bind(1, taken.id)
            update.bind(2, lease)
            update.bind(3, nowMillis + PushJob.leaseMillis)
            try update.run()
            guard connection.changes == 1 else { return nil }
            var renewed = taken
            renewed.leasedUntilMillis = nowMillis + PushJob.leaseMillis
            return renewed
        }
    }

    public func complete(_ sent: PushJob) throws(ParleyError) {
        try run { connection throws(ParleyError) in
            let delete = try connection.statement("DELETE FROM jobs WHERE id = ?1 AND last_offset <= ?2")
            delete.bind(1, sent.id)
            delete.bind(2, sent.lastOffset)
            try delete.run()
            // Messages that came while it was sent stay, due at once.
            let rest = try connection.statement("UPDATE jobs SET count = max(1, count - ?2), due_ms = 0, attempts = 0 WHERE id = ?1")
            rest.bind(1, sent.id)
            rest.bind(2, Int64(sent.count))
            try rest.run()
        }
    }

    public func reschedule(_ id: Int64, dueMillis: Int64, attempts: Int) throws(ParleyError) {
        try run { connection throws(ParleyError) in
            let update = try connection.statement("UPDATE jobs SET due_ms = ?2, attempts = ?3 WHERE id = ?1")
            update.bind(1, id)
            update.bind(2, dueMillis)
            update.bind(3, Int64(attempts))
            try update.run()
        }
    }

    public func queued() throws(ParleyError) -> Int {
        Int(try connection.withLock { connection throws(ParleyError) -> Int64 in try connection.integer("SELECT count(*) FROM jobs") })
    }
}
