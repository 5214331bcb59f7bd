import Foundation
import Synchronization
import Testing
@testable import ParleySQLite

/// A background checkpoint in progress keeps the writer's own out (SQLite answers BUSY), so
/// one slowed by the disk let the WAL grow by every commit made meanwhile (a contract test
/// once saw it at 2.7 times its limit). Once the WAL is twice its limit the writer stops the
/// background after its pass and waits for it, a bounded time.
@Suite struct WALCheckpointerTests {
    @Test func pastTwiceItsLimitTheWriterWaitsForABackgroundRun() throws {
        let path = temporaryDatabase()
        let writer = try SQLiteConnection(path: path)
        defer { writer.close() }
        try writer.exec("PRAGMA journal_mode = WAL")
        try writer.exec("PRAGMA synchronous = NORMAL")
        try writer.exec("PRAGMA busy_timeout = 5000")
        try writer.exec("CREATE TABLE t (x BLOB)")
        // Each background pass takes 100 ms longer, as behind a stalled disk.
        let passes = Atomic<Int>(0)
        let checkpointer = try WALCheckpointer(path: path, limitPages: 50, beforeBackgroundPass: {
            passes.add(1, ordering: .relaxed)
            usleep(100_000)
        })
        defer { checkpointer.stop() }
        checkpointer.watch(writer)
        // A reader holding its snapshot keeps every checkpoint from finishing, so the WAL
        // passes twice its limit while background runs go on.
        let reader = try SQLiteConnection(path: path)
        defer { reader.close() }
        try reader.exec("BEGIN")
        _ = try reader.integer("SELECT count(*) FROM t")
        let row = String(repeating: "ab", count: 1_000)
        let started = Date()
        for _ in 0..<300 {
            try writer.exec("INSERT INTO t VALUES ('\(row)')")
            checkpointer.writerCheckpoint(writer)
        }
        let waited = checkpointer.runs.writerWaited
        #expect(waited > 0, "the writer never waited for a background run")
        // Each wait ends with the pass under way: no wait is longer than one pass and the
        // bound, and the background makes no further pass while the writer waits.
        #expect(Date().timeIntervalSince(started) < Double(waited) * 0.15 + 10)
        try reader.exec("COMMIT")
        // With the reader gone the writer's checkpoint copies everything: the WAL starts over.
        try writer.exec("INSERT INTO t VALUES ('\(row)')")
        checkpointer.writerCheckpoint(writer)
        try writer.exec("INSERT INTO t VALUES ('x')")
        #expect(try writer.integer("SELECT count(*) FROM t") == 302)
        #expect(passes.load(ordering: .relaxed) > 0)
    }
}
