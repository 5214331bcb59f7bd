import Foundation
import Testing
@testable import ParleySQLite

/// Every connection waits out a lock another connection holds for a moment, so a store opens
/// right after another process or store let go of the file (the last connection's close
/// checkpoints under an exclusive lock) instead of failing with "database is locked".
@Suite struct SQLiteConnectionTests {
    @Test func aStoreOpensWhileAnotherConnectionBrieflyHoldsItsFile() throws {
        let path = temporaryDatabase()
        let holder = try SQLiteConnection(path: path)
        try holder.exec("PRAGMA journal_mode = WAL; CREATE TABLE held (a); BEGIN EXCLUSIVE; INSERT INTO held VALUES (1);")
        let released = DispatchSemaphore(value: 0)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(200)) {
            try? holder.exec("COMMIT")
            released.signal()
        }
        // Its schema is created under a write lock the holder has for 200 ms more.
        let store = try SQLiteReadStateStore(path: path)
        store.close()
        #expect(released.wait(timeout: .now() + 5) == .success)
        holder.close()
    }
}
