import ParleyCore
import ParleyIO
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

    /// A roster store whose reads wait until the test opens it, counting them.
    final class GatedRosterStore: SocketChatRosterStore {
        let open = Atomic<Bool>(false)
        let version = Atomic<Int64>(0)
        let loads = Atomic<Int>(0)
        let loading = Atomic<Int>(0)

        func departed(_ user: SocketChatUser, leftMillis: Int64, maxDeparted: Int) async throws(ParleyError) {}
        func returned(nickname: String) async throws(ParleyError) {}
        func version() async throws(ParleyError) -> Int64 { version.add(1, ordering: .relaxed).newValue }
        func load(nowMillis: Int64, lifetimeMillis: Int64) async throws(ParleyError) -> (entries: [DepartedUser], version: Int64) {
            loads.add(1, ordering: .relaxed)
            loading.add(1, ordering: .relaxed)
            defer { loading.subtract(1, ordering: .relaxed) }
            while !open.load(ordering: .relaxed) { try? await Task.sleep(for: .milliseconds(1)) }
            return ([], version.load(ordering: .relaxed))
        }
    }

    /// The loop's fan-out, made and touched on the loop only.
    final class OnLoop: @unchecked Sendable {
        // Safe: `fanOut` is set and read only inside `run`'s body, on the one loop of `group`.
        let group = EventLoopGroup(loopCount: 1)
        var fanOut: SocketChatFanOut!

        /// Runs `body` on the loop; the test's task waits without holding a thread.
        func run<T: Sendable>(_ body: @escaping @Sendable (OnLoop) -> T) async -> T {
            await withCheckedContinuation { continuation in
                group.loops[0].execute { continuation.resume(returning: body(self)) }
            }
        }
    }

    /// A storm of lobby leaves while the roster read is slow: the loop asks for one read, and
    /// one more after it for every leave that came meanwhile (so the lists it lets go name
    /// every departure), and the read queue holds one callback of this loop, not one per leave.
    @Test func aStormOfLeavesAsksOneReadAndOneAfterIt() async throws {
        let store = GatedRosterStore()
        let sync = SocketChatRosterSync(roster: SocketChatRoster(), store: store, clock: SystemWallClock(), onError: { _ in })
        let lobby = RoomKey(channel: "demo", room: "lobby")
        let hub = Hub(clock: ManualClock())
        let loop = OnLoop()
        defer { loop.group.shutdown() }
        await loop.run { $0.fanOut = SocketChatFanOut(hub: hub, lobby: lobby, roster: SocketChatRoster(), sync: sync, loop: $0.group.loops[0]) }
        await loop.run { _ = $0.fanOut.encode(.socketIO, lobby, .memberLeft(Member(id: "gone-0"))) }
        try await eventually("the first read started", timeout: 5) { store.loading.load(ordering: .relaxed) == 1 }
        for n in 1..<20 {
            await loop.run { _ = $0.fanOut.encode(.socketIO, lobby, .memberLeft(Member(id: "gone-\(n)"))) }
        }
        // The first leave's callback runs after the read that is out; the other 19 leaves
        // queued nothing more (one callback each used to wait here).
        #expect(sync.waitingCallbacks == 0)
        #expect(await loop.run { $0.fanOut.rosterReadPending })
        store.open.store(true, ordering: .relaxed)
        try await eventually("the chain settled", timeout: 5) { await loop.run { !$0.fanOut.rosterReadPending } }
        // The first read started before leaves 1...19; the second, after all of them.
        #expect(store.loads.load(ordering: .relaxed) == 2)
        #expect(sync.waitingCallbacks == 0)
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
