import Foundation
import Synchronization
import Testing
@testable import ParleyCore
import ParleySQLite
import ParleyTestSupport

/// The fault-injecting store the end-to-end tests use to make a store fail: it fails what it
/// is told to, keeps the store contract while doing so, and lets the rest through.
@Suite struct FaultInjectingStoreTests {
    private let key = RoomKey(channel: "demo", room: "r")

    /// Appends 1…count with callbacks (not awaiting each), recording each outcome in
    /// completion order; returns the record.
    static func appendAll(_ store: any MessageStore, _ offsets: ClosedRange<Int64>,
                          into outcomes: Locked<[(Int64, Result<Void, ParleyError>)]>) {
        for offset in offsets {
            store.append(message(offset), clientMessageID: nil) { result in
                outcomes.withLock { $0.append((offset, result)) }
            }
        }
    }

    @Test func failsAllThenTheNextNThenLetsEverythingThrough() async throws {
        let store = FaultInjectingMessageStore(wrapping: InMemoryMessageStore())
        try await store.append(message(1))
        store.failAllAppends()
        for _ in 1...3 {
            await #expect(throws: FaultInjectingMessageStore.diskFull) { try await store.append(message(2)) }
        }
        store.stopFailing()
        try await store.append(message(2))
        let readOnly = ParleyError(.unavailable, "read-only file system")
        store.failNextAppends(2, with: readOnly)
        await #expect(throws: readOnly) { try await store.append(message(3)) }
        await #expect(throws: readOnly) { try await store.append(message(3)) }
        try await store.append(message(3))
        #expect(store.injectedFailures == 5)
        #expect(store.appendsLetThrough == 3)
        // Nothing failed reached the wrapped store.
        #expect(try await store.wrapped.messages(in: key, after: 0, limit: 10).map(\.offset) == [1, 2, 3])
    }

    /// A failure injected while earlier appends are still in the wrapped store waits for them:
    /// completions run in call order, as the contract says.
    @Test func anInjectedFailureCompletesAfterTheAppendsBeforeIt() throws {
        let gated = GatedStore()
        let store = FaultInjectingMessageStore(wrapping: gated)
        let outcomes = Locked<[(Int64, Result<Void, ParleyError>)]>([])
        Self.appendAll(store, 1...2, into: outcomes)
        store.failNextAppends(1)
        Self.appendAll(store, 3...4, into: outcomes)
        #expect(outcomes.withLock { $0.isEmpty }, "the failure of 3 does not overtake 1 and 2")
        gated.release(1)
        #expect(outcomes.withLock { $0.map(\.0) } == [1])
        gated.release()
        let all = outcomes.withLock { $0 }
        #expect(all.map(\.0) == [1, 2, 3, 4])
        #expect(all.map { (try? $0.1.get()) != nil } == [true, true, false, false])
        // 3 never reached the wrapped store, so 4 does not follow its last offset.
        if case .failure(let error) = all[3].1 { #expect(error.code == .conflict) }
        if case .failure(let error) = all[2].1 { #expect(error == FaultInjectingMessageStore.diskFull) }
    }

    /// Over SQLite, with a thousand appends in flight: the same, under real threads.
    @Test func overSQLiteTheOffsetsAfterAFailureConflictThenTheRoomGoesOn() async throws {
        var options = SQLiteStoreOptions()
        options.synchronousFull = false
        let sqlite = try SQLiteMessageStore(path: temporaryDatabase(), options: options)
        defer { sqlite.close() }
        let store = FaultInjectingMessageStore(wrapping: sqlite)
        let outcomes = Locked<[(Int64, Result<Void, ParleyError>)]>([])
        Self.appendAll(store, 1...500, into: outcomes)
        store.failNextAppends(1)
        Self.appendAll(store, 501...1_000, into: outcomes)
        try await eventually("every completion", timeout: 30) { outcomes.withLock { $0.count } == 1_000 }
        let all = outcomes.withLock { $0 }
        #expect(all.map(\.0) == Array(1...1_000), "completions in call order")
        #expect(all.prefix(500).allSatisfy { (try? $0.1.get()) != nil })
        #expect(all.dropFirst(500).allSatisfy { (try? $0.1.get()) == nil })
        #expect(all.dropFirst(501).allSatisfy { if case .failure(let e) = $0.1 { e.code == .conflict } else { false } })
        // The room goes on from the last stored offset.
        try await store.append(message(501))
        #expect(try await store.messages(in: key, after: 0, limit: 2_000).map(\.offset) == Array(1...501))
    }
}
