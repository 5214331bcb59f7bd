import ParleyCore
import ParleyTestSupport
import Synchronization
import Testing
@testable import ParleyServer

/// The cluster's SocketChat roster as a node reads it (``SocketChatRosterSync``).
@Suite struct SocketChatRosterSyncTests {
    /// A roster store whose every read sees a new version and takes a few milliseconds, and
    /// that counts how many reads overlap.
    final class SlowRosterStore: SocketChatRosterStore {
        struct Counts {
            var version: Int64 = 0
            var loading = 0
            var mostAtOnce = 0
            var loads = 0
        }
        let counts = Mutex(Counts())

        func departed(_ user: SocketChatUser, leftMillis: Int64, maxDeparted: Int) async throws(ParleyError) {}
        func returned(nickname: String) async throws(ParleyError) {}
        func version() async throws(ParleyError) -> Int64 {
            counts.withLock { counts in
                counts.version += 1
                return counts.version
            }
        }
        func load(nowMillis: Int64, lifetimeMillis: Int64) async throws(ParleyError) -> (entries: [DepartedUser], version: Int64) {
            let version = counts.withLock { counts in
                counts.loading += 1
                counts.loads += 1
                counts.mostAtOnce = max(counts.mostAtOnce, counts.loading)
                return counts.version
            }
            try? await Task.sleep(for: .milliseconds(5))
            counts.withLock { $0.loading -= 1 }
            return ([], version)
        }
    }

    /// Overlapping reads could be applied in either order, the older last (a departure just
    /// read gone again from the next `userList`): they run one at a time, and every ask is
    /// answered after a read that started after it.
    @Test func readsOfTheRosterNeverOverlapAndEveryAskIsAnswered() async throws {
        let store = SlowRosterStore()
        let sync = SocketChatRosterSync(roster: SocketChatRoster(), store: store, clock: SystemWallClock(), onError: { _ in })
        let answered = Atomic<Int>(0)
        for _ in 0..<20 { sync.refreshNow { answered.add(1, ordering: .relaxed) } }
        try await eventually("every ask answered", timeout: 10) { answered.load(ordering: .relaxed) == 20 }
        let counts = store.counts.withLock { $0 }
        #expect(counts.mostAtOnce == 1, "reads at once: \(counts.mostAtOnce)")
        #expect(counts.loads >= 1 && counts.loads < 20, "asks made while a read ran share the next: \(counts.loads) reads")
    }
}
