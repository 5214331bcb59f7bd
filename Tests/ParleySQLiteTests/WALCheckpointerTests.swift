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

        func checkpoint(_ connection: SQLiteConnection, background: Bool) -> (Int, Int)? {
            guard held.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged else {
                if !background { writerKeptOut.add(1, ordering: .relaxed) }
                return nil
            }
            defer { held.store(false, ordering: .sequentiallyConsistent) }
            let result = WALCheckpointer.passive(connection)
            if background {
                backgroundPasses.add(1, ordering: .relaxed)
                usleep(100_000)
            }
            return result
        }
    }

    @Test func aSlowBackgroundCheckpointDoesNotLetTheWALGrowPastTwiceItsLimit() throws {
        let path = temporaryDatabase()
        let writer = try SQLiteConnection(path: path)
        defer { writer.close() }
        try writer.exec("PRAGMA journal_mode = WAL")
        try writer.exec("PRAGMA synchronous = NORMAL")
        try writer.exec("PRAGMA busy_timeout = 5000")
        try writer.exec("CREATE TABLE t (x BLOB)")
        let disk = SlowDisk()
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
}
