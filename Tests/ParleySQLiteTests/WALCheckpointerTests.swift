import Foundation
import Synchronization
import Testing
@testable import ParleySQLite

/// A background checkpoint in progress keeps the writer's own out (SQLite answers BUSY), so
/// one slowed by the disk let the WAL grow by every commit made meanwhile (a contract test
/// once saw it at 2.7 times its limit). Once the WAL is twice its limit and the writer was
/// kept out, the writer stops the background after its pass, waits for it, and copies the
/// rest itself.
@Suite struct WALCheckpointerTests {
    /// SQLite's checkpoint lock as PASSIVE meets it (one checkpoint at a time, the other
    /// kept out at once), behind a disk whose sync takes 100 ms: the background's checkpoints
    /// hold the lock that long.
    final class SlowDisk: Sendable {
        private let held = Atomic<Bool>(false)
        let backgroundPasses = Atomic<Int>(0)
        let writerKeptOut = Atomic<Int>(0)
        /// With it, a background pass also does what a real slow one does to the WAL: it copies
        /// only what was committed before it started, and the WAL cannot start over until the
        /// pass ends (SQLite records what was copied after the sync). A read transaction on
        /// this connection pins that snapshot for the pass.
        private let pin: SQLiteConnection?

        init(pinning path: String? = nil) throws {
            pin = try path.map { try SQLiteConnection(path: $0) }
        }

        func checkpoint(_ connection: SQLiteConnection, background: Bool) -> (Int, Int)? {
            guard held.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged else {
                if !background { writerKeptOut.add(1, ordering: .relaxed) }
                return nil
            }
            defer { held.store(false, ordering: .sequentiallyConsistent) }
            guard background else { return WALCheckpointer.passive(connection) }
            try? pin?.exec("BEGIN")
            _ = try? pin?.integer("SELECT count(*) FROM t")
            defer { try? pin?.exec("COMMIT") }
            let result = WALCheckpointer.passive(connection)
            backgroundPasses.add(1, ordering: .relaxed)
            usleep(100_000)
            return result
        }

        func close() { pin?.close() }
    }

    /// A writer's connection on a fresh WAL database with one table.
    private func walDatabase() throws -> (path: String, writer: SQLiteConnection) {
        let path = temporaryDatabase()
        let writer = try SQLiteConnection(path: path)
        try writer.exec("PRAGMA journal_mode = WAL")
        try writer.exec("PRAGMA synchronous = NORMAL")
        try writer.exec("CREATE TABLE t (x BLOB)")
        return (path, writer)
    }

    @Test func aSlowBackgroundCheckpointDoesNotLetTheWALGrowPastTwiceItsLimit() throws {
        let (path, writer) = try walDatabase()
        defer { writer.close() }
        let disk = try SlowDisk()
        let checkpointer = try WALCheckpointer(path: path, limitPages: 50) { disk.checkpoint($0, background: $1) }
        defer { checkpointer.stop() }
        checkpointer.watch(writer)
        let row = String(repeating: "ab", count: 1_000)
        var largest = 0
        let started = Date()
        for _ in 0..<600 {
            try writer.exec("INSERT INTO t VALUES ('\(row)')")
            checkpointer.writerCheckpoint(writer)
            let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
            largest = max(largest, wal)
        }
        #expect(disk.backgroundPasses.load(ordering: .relaxed) > 0, "no background checkpoint ran")
        #expect(disk.writerKeptOut.load(ordering: .relaxed) > 0, "the writer was never kept out: the test shows nothing")
        #expect(checkpointer.runs.writerWaited > 0)
        // Twice the limit and the commit that crossed it, in 4 KiB pages with 24-byte headers.
        #expect(largest <= (2 * 50 + 8) * 4_120, "the WAL grew to \(largest) bytes (\(largest / 4_120) pages)")
        #expect(try writer.integer("SELECT count(*) FROM t") == 600)
        // The writer waits at most one background pass each time.
        #expect(Date().timeIntervalSince(started) < Double(checkpointer.runs.writerWaited) * 0.2 + 10)
    }

    /// Commits paced so that one background pass (100 ms) sees fewer than the limit's worth:
    /// once the writer's checkpoint at the limit is kept out, the background makes no further
    /// pass, so the writer's next try gets through after the pass under way, and the WAL
    /// starts over long before twice its limit (the writer never has to wait). Before, the
    /// background went on with pass after pass (each copying what the last one's commits
    /// wrote) and kept the writer out until the WAL was twice its limit.
    @Test func aWriterKeptOutAtTheLimitGetsInAfterThePassUnderWay() throws {
        let (path, writer) = try walDatabase()
        defer { writer.close() }
        let disk = try SlowDisk(pinning: path)
        defer { disk.close() }
        let checkpointer = try WALCheckpointer(path: path, limitPages: 200) { disk.checkpoint($0, background: $1) }
        defer { checkpointer.stop() }
        checkpointer.watch(writer)
        let row = String(repeating: "ab", count: 1_000)
        var largest = 0
        for _ in 0..<400 {
            try writer.exec("INSERT INTO t VALUES ('\(row)')")
            checkpointer.writerCheckpoint(writer)
            let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
            largest = max(largest, wal)
            usleep(5_000)
        }
        #expect(disk.writerKeptOut.load(ordering: .relaxed) > 0, "the writer was never kept out: the test shows nothing")
        #expect(checkpointer.runs.writer > 0)
        #expect(checkpointer.runs.writerWaited == 0, "the writer had to wait: the WAL reached twice its limit")
        // The limit and what one slow pass lets through (a 2-page commit every 5 ms or more,
        // at most about 40 pages in 100 ms), with room for a slow scheduler.
        #expect(largest <= (200 + 100) * 4_120, "the WAL grew to \(largest) bytes (\(largest / 4_120) pages)")
    }
}
