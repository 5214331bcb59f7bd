import Synchronization

/// How much of one room's work this node has accepted and not finished: deliveries posted to
/// the event loops and not yet handled there, plus publishes on their way to the store. A
/// publisher whose room is over the high mark is slowed (its door stops reading it) until the
/// backlog is back under the low mark, so a fast publisher cannot queue without limit behind
/// the slowest loop, and other rooms are not slowed. Lock-free on the counting path.
public final class RoomBacklog: Sendable {
    /// Above this, publishers of the room wait.
    public let highMark: Int
    /// They go on once the backlog is back to this.
    public let lowMark: Int
    private let pending = Atomic<Int>(0)
    private let waiters = Mutex<[@Sendable () -> Void]>([])
    private let hasWaiters = Atomic<Bool>(false)

    public init(highMark: Int, lowMark: Int) {
        self.highMark = highMark
        self.lowMark = min(lowMark, highMark)
    }

    /// The work accepted and not finished now.
    public var count: Int { pending.load(ordering: .relaxed) }

    /// Whether a publisher should wait.
    public var isOverHigh: Bool { pending.load(ordering: .relaxed) > highMark }

    /// `n` units of work were accepted.
    @inline(__always) public func add(_ n: Int = 1) { pending.add(n, ordering: .relaxed) }

    /// One unit of work is finished.
    @inline(__always) public func done() {
        let left = pending.subtract(1, ordering: .relaxed).newValue
        if left <= lowMark, hasWaiters.load(ordering: .relaxed) { wake() }
    }

    /// Runs `resume` (on any thread) once the backlog is at or under the low mark: at once
    /// when it already is.
    public func whenBelowLowMark(_ resume: @escaping @Sendable () -> Void) {
        let now = waiters.withLock { waiters -> Bool in
            if pending.load(ordering: .relaxed) <= lowMark { return true }
            waiters.append(resume)
            hasWaiters.store(true, ordering: .relaxed)
            return false
        }
        if now { resume() }
    }

    private func wake() {
        let ready = waiters.withLock { waiters -> [@Sendable () -> Void] in
            guard pending.load(ordering: .relaxed) <= lowMark else { return [] }
            let ready = waiters
            waiters.removeAll()
            hasWaiters.store(false, ordering: .relaxed)
            return ready
        }
        for resume in ready { resume() }
    }
}
