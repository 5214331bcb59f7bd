import Foundation
import ParleyCore
import Synchronization

/// SocketChat's roster across a cluster: this node's ``SocketChatRoster`` (what every
/// `userList` here is built from) kept equal to the cluster's, in a ``SocketChatRosterStore``
/// (Redis). Each change made here goes to the store too; the list is read again when another
/// node's change may have landed (a lobby leave arrived, or the store's version moved on the
/// poll every ``pollMillis``), and when it changed, `onChange` has every SocketChat socket of
/// this node send the new `userList`. So a user who drops without `exitUser` on one node is
/// listed `isConnected: false` by every node (within the poll at worst).
final class SocketChatRosterSync: Sendable {
    let roster: SocketChatRoster
    private let store: any SocketChatRosterStore
    private let clock: any WallClock
    private let lastVersion = Mutex<Int64?>(nil)
    /// This node's own changes: counted when made, and while their writes are on the way. A
    /// read that overlapped one is not applied (it may predate the write and bring back what
    /// this node just changed, such as a user who came back listed as departed); the read
    /// after the write applies it.
    private let localChanges = Atomic<Int>(0)
    private let writesInFlight = Atomic<Int>(0)
    private let poller = Mutex<Task<Void, Never>?>(nil)
    /// Reads of the cluster's roster run one at a time: two that overlapped could be applied
    /// in either order, and the older list stayed (until the next poll), so a departure just
    /// read could vanish from the next `userList`.
    private let reads = Mutex(ReadQueue())
    private let onChange = Mutex<Callback<@Sendable () -> Void>?>(nil)
    private let onError: @Sendable (ParleyError) -> Void
    static let pollMillis: Int64 = 1_000

    init(roster: SocketChatRoster, store: any SocketChatRosterStore, clock: any WallClock,
         onError: @escaping @Sendable (ParleyError) -> Void) {
        self.roster = roster
        self.store = store
        self.clock = clock
        self.onError = onError
    }

    /// Where to say that the list changed (the door sets it once: its sockets resend `userList`).
    func whenChanged(_ body: @escaping @Sendable () -> Void) { onChange.withLock { $0 = Callback(body) } }

    /// A Socket.IO user's socket went away without `exitUser`. `stored` runs once the
    /// cluster's roster has it (or the write failed): the lobby leave waits for it, so a node
    /// that reads the roster when the leave arrives lists the departure with it.
    func departed(id: String, nickname: String, stored: @escaping @Sendable () -> Void = {}) {
        roster.disconnected(id: id, nickname: nickname)
        let user = SocketChatUser(id: id, nickname: nickname, isConnected: false)
        let (store, now, max) = (self.store, clock.nowMillis(), roster.maxDeparted)
        write(then: stored) { () async throws(ParleyError) in try await store.departed(user, leftMillis: now, maxDeparted: max) }
    }

    /// A user identified again (`connectUser`) or exited (`exitUser`): no longer departed.
    func returned(nickname: String) {
        roster.connected(nickname: nickname)
        let store = self.store
        write { () async throws(ParleyError) in try await store.returned(nickname: nickname) }
    }

    private func write(then done: @escaping @Sendable () -> Void = {}, _ body: @escaping @Sendable () async throws(ParleyError) -> Void) {
        let onError = self.onError
        localChanges.add(1, ordering: .sequentiallyConsistent)
        writesInFlight.add(1, ordering: .sequentiallyConsistent)
        Task.detached { [self] in
            do throws(ParleyError) {
                try await body()
                writesInFlight.subtract(1, ordering: .sequentiallyConsistent)
                done()
                refreshNow()
            } catch {
                writesInFlight.subtract(1, ordering: .sequentiallyConsistent)
                done()
                onError(error)
            }
        }
    }

    private struct ReadQueue {
        var running = false
        /// A read was asked for since the running one started.
        var asked = false
        /// What to run after the next read that starts.
        var waiting: [Callback<@Sendable () -> Void>] = []
    }

    /// Reads the list again (a lobby leave arrived: the leaving node stored the departure
    /// before it left; a write of ours landed; the poll), after every read already running,
    /// then runs `done`. Asks that come while a read runs share the one after it.
    func refreshNow(then done: (@Sendable () -> Void)? = nil) {
        let start = reads.withLock { queue -> Bool in
            queue.asked = true
            if let done { queue.waiting.append(Callback(done)) }
            guard !queue.running else { return false }
            queue.running = true
            return true
        }
        guard start else { return }
        Task.detached { [self] in
            while let batch = reads.withLock({ queue -> [Callback<@Sendable () -> Void>]? in
                guard queue.asked else {
                    queue.running = false
                    return nil
                }
                queue.asked = false
                defer { queue.waiting = [] }
                return queue.waiting
            }) {
                await refreshIfChanged()
                for done in batch { done.call() }
            }
        }
    }

    /// Callbacks waiting for the next read: each loop's fan-out keeps at most one here,
    /// however many leaves it sees (tests read it).
    var waitingCallbacks: Int { reads.withLock { $0.waiting.count } }

    private func refreshIfChanged() async {
        do throws(ParleyError) {
            let version = try await store.version()
            guard lastVersion.withLock({ $0 }) != version else { return }
            let seen = localChanges.load(ordering: .sequentiallyConsistent)
            let loaded = try await store.load(nowMillis: clock.nowMillis(), lifetimeMillis: roster.departedLifetimeMillis)
            guard writesInFlight.load(ordering: .sequentiallyConsistent) == 0,
                  localChanges.load(ordering: .sequentiallyConsistent) == seen else { return }
            lastVersion.withLock { $0 = loaded.version }
            if roster.replaceDeparted(with: loaded.entries) { onChange.withLock { $0 }?.call() }
        } catch {
            onError(error)
        }
    }

    func startPolling() {
        let task = Task.detached { [self] in
            refreshNow()
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Self.pollMillis))
                if Task.isCancelled { break }
                refreshNow()
            }
        }
        poller.withLock { $0 = task }
    }

    func stop() { poller.withLock { $0?.cancel(); $0 = nil } }
}
