import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ParleyCore
import Synchronization

/// Copies the WAL back into the database file on a thread of its own, so the writer's group
/// commits do not wait for it.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses its threshold: with
/// `wal_autocheckpoint = 10000` the writer copied up to 40 MiB of pages and synced the
/// database file between two commits, and every publish queued behind it waited that long
/// (the tail of the publish latency at moderate rates). Here the writer's connection reports
/// each commit's WAL size (`sqlite3_wal_hook`, which replaces the automatic checkpoint), and
///
/// - once `backgroundPages` frames are not yet copied, this thread runs a PASSIVE checkpoint
///   on its own connection: WAL mode lets it copy while the writer goes on committing;
/// - once the WAL holds `limitPages` frames, the writer runs a PASSIVE checkpoint itself,
///   which copies only what the background checkpoints have not yet (the frames of the last
///   few commits): after it every frame is in the database file, so the next commit starts
///   the WAL over from its beginning and the file stays about `limitPages` long. Under
///   constant load the background checkpoints alone never see a WAL with nothing left to
///   copy, and the WAL would grow without end.
/// - A background checkpoint in progress makes the writer's a no-op (SQLite answers BUSY),
///   and one slowed by the disk (its fsync) let the WAL grow by every commit made meanwhile.
///   So once the writer's checkpoint at the limit is kept out, the background thread makes
///   no further pass until a checkpoint of the writer's gets through: the writer's next try
///   (after its next transaction) finds the lock free once the pass under way ends. Should
///   that pass be slow enough for the WAL to reach twice `limitPages`, the writer waits for
///   it (at most ``maxWriterWaitMillis``) and copies what is left itself. A reader holding an old
///   snapshot (a backup) is not a reason to wait: the writer's checkpoint then answers, only
///   not all of the WAL can be copied until the reader ends.
final class WALCheckpointer: Sendable {
    /// WAL size (frames) at which the writer makes sure the WAL starts over.
    let limitPages: Int
    /// Frames not yet copied at which the background thread checkpoints.
    let backgroundPages: Int
    /// What the writer, its WAL hook and the background thread share.
    private final class Counters: Sendable {
        /// Frames in the WAL after the last commit.
        let frames = Atomic<Int>(0)
        /// Frames the last checkpoint left in the database file.
        let copied = Atomic<Int>(0)
        /// A background checkpoint is queued.
        let requested = Atomic<Bool>(false)
        let backgroundRuns = Atomic<Int>(0)
        let writerRuns = Atomic<Int>(0)
        /// The background thread is in a checkpoint run.
        let backgroundBusy = Atomic<Bool>(false)
        /// The writer waits for the background run to end: no further pass until a
        /// checkpoint of the writer's gets through.
        let writerWaits = Atomic<Bool>(false)
        /// The writer's last checkpoint was kept out (BUSY).
        let writerKeptOut = Atomic<Bool>(false)
        /// Times the writer waited for a background run (tests and diagnostics).
        let writerWaited = Atomic<Int>(0)
    }
    /// Longest the writer waits for a background checkpoint to end.
    static let maxWriterWaitMillis = 1_000
    /// Runs one PASSIVE checkpoint on a connection (`background`: the background thread's),
    /// answering (frames in the WAL, frames copied), or nil when kept out or failed. Tests
    /// stand in a slow disk with it.
    typealias Checkpoint = @Sendable (_ connection: SQLiteConnection, _ background: Bool) -> (Int, Int)?
    private let checkpoint: Checkpoint
    private let counters = Counters()
    private let thread: WorkerThread<Bool>
    private let connection: SQLiteConnection

    init(path: String, limitPages: Int, checkpoint: @escaping Checkpoint = { connection, _ in WALCheckpointer.passive(connection) })
        throws(ParleyError) {
        self.limitPages = max(1, limitPages)
        self.checkpoint = checkpoint
        backgroundPages = max(1, limitPages / 8)
        let connection = try SQLiteConnection(path: path)
        // A connection that has read nothing yet does not know the file is in WAL mode, and
        // its checkpoints do nothing (frames -1): read the schema once.
        _ = try connection.integer("SELECT count(*) FROM sqlite_master")
        self.connection = connection
        let counters = self.counters, backgroundPages = self.backgroundPages
        thread = WorkerThread(name: "parley-sqlite-c", idleMillis: 3_600_000, limit: 4, handle: { _ in
            counters.requested.store(false, ordering: .sequentiallyConsistent)
            counters.backgroundBusy.store(true, ordering: .sequentiallyConsistent)
            defer { counters.backgroundBusy.store(false, ordering: .sequentiallyConsistent) }
            // Each pass copies what was committed during the one before; a few passes leave
            // the writer's own checkpoint only the last commits' frames.
            for _ in 0..<4 {
                guard !counters.writerWaits.load(ordering: .sequentiallyConsistent) else { return }
                guard let (log, done) = checkpoint(connection, true) else { return }
                counters.backgroundRuns.add(1, ordering: .relaxed)
                counters.copied.store(done, ordering: .relaxed)
                if log - done < backgroundPages / 2 || counters.frames.load(ordering: .relaxed) < log { return }
            }
        })
    }

    /// Installs the WAL hook on the writer's connection (this replaces SQLite's automatic
    /// checkpoint). The checkpointer must outlive the connection's use: ``stop()`` comes first.
    func watch(_ writer: SQLiteConnection) {
        sqlite3_wal_hook(writer.handle, walHook, Unmanaged.passUnretained(self).toOpaque())
    }

    /// On the writer thread, in each commit: the WAL now holds `pages` frames.
    fileprivate func committed(pages: Int) {
        counters.frames.store(pages, ordering: .relaxed)
        var done = counters.copied.load(ordering: .relaxed)
        // The WAL started over: what was copied counts from its new beginning.
        if done > pages { done = 0; counters.copied.store(0, ordering: .relaxed) }
        if pages - done >= backgroundPages, !counters.requested.exchange(true, ordering: .sequentiallyConsistent) {
            if !thread.submit(true) { counters.requested.store(false, ordering: .sequentiallyConsistent) }
        }
    }

    /// On the writer thread, between transactions: when the WAL reached ``limitPages`` (or
    /// `force`, when the writer has nothing to do), copies what is left, so the next commit
    /// starts the WAL over. A background checkpoint in progress makes this a no-op (BUSY).
    func writerCheckpoint(_ writer: SQLiteConnection, force: Bool = false) {
        let pages = counters.frames.load(ordering: .relaxed)
        guard pages >= limitPages || (force && pages > counters.copied.load(ordering: .relaxed)) else { return }
        if pages >= 2 * limitPages, counters.writerKeptOut.load(ordering: .relaxed) { waitForBackground() }
        guard let (_, done) = checkpoint(writer, false) else {
            // Kept out (a background pass got the lock first). At its limit the WAL must start
            // over: no new background pass starts before the writer's next try (after the next
            // transaction), so that try finds the lock free once the pass under way ends.
            counters.writerKeptOut.store(true, ordering: .relaxed)
            if pages >= limitPages { counters.writerWaits.store(true, ordering: .sequentiallyConsistent) }
            return
        }
        counters.writerKeptOut.store(false, ordering: .relaxed)
        counters.writerWaits.store(false, ordering: .sequentiallyConsistent)
        counters.writerRuns.add(1, ordering: .relaxed)
        counters.copied.store(done, ordering: .relaxed)
    }

    /// The WAL is twice its limit and a background run kept the writer's checkpoint out: no
    /// further background pass, and wait (bounded) for the one under way to end.
    private func waitForBackground() {
        counters.writerWaits.store(true, ordering: .sequentiallyConsistent)
        guard counters.backgroundBusy.load(ordering: .sequentiallyConsistent) else { return }
        counters.writerWaited.add(1, ordering: .relaxed)
        let deadline = MonotonicTime.milliseconds() + Int64(Self.maxWriterWaitMillis)
        while counters.backgroundBusy.load(ordering: .sequentiallyConsistent), MonotonicTime.milliseconds() < deadline {
            usleep(500)
        }
    }

    /// Background and writer checkpoints so far, and the writer's waits for a background run
    /// (tests and diagnostics).
    var runs: (background: Int, writer: Int, writerWaited: Int) {
        (counters.backgroundRuns.load(ordering: .relaxed), counters.writerRuns.load(ordering: .relaxed),
         counters.writerWaited.load(ordering: .relaxed))
    }

    /// Ends the background thread (after any checkpoint it is running) and closes its
    /// connection.
    func stop() {
        thread.stop()
        connection.close()
    }

    /// A PASSIVE checkpoint: (frames in the WAL, frames now in the database file), or nil
    /// when another checkpoint is running or it failed (the next one catches up).
    static func passive(_ connection: SQLiteConnection) -> (Int, Int)? {
        var log: Int32 = 0, done: Int32 = 0
        let status = sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, &log, &done)
        guard status == SQLITE_OK, log >= 0, done >= 0 else { return nil }
        return (Int(log), Int(done))
    }
}

/// SQLite's WAL hook: runs on the committing (writer) thread after each commit.
private func walHook(_ context: UnsafeMutableRawPointer?, _ database: OpaquePointer?,
                     _ name: UnsafePointer<CChar>?, _ pages: Int32) -> Int32 {
    guard let context else { return SQLITE_OK }
    Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue().committed(pages: Int(pages))
    return SQLITE_OK
}
