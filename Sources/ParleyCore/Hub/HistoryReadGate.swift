import Synchronization

/// The server-wide bound on history being read from the store at once
/// (``HubConfiguration/maxHistoryBytesInFlight``): each read counts as the most its page may
/// hold until it is answered.
///
/// Two kinds of reads share it. An explicit read (a `history` request, REST, admin) that does
/// not fit is refused at once: the client can ask again. A read a subscription needs (its
/// `history_count` snapshot, each page of a `since` resume) is never refused for load: it
/// waits its turn, first come first served, and starts when earlier reads are answered. What
/// waits is a closure, not a page, so a crowd of resuming clients costs a queue entry each
/// until their turn, never a page each at once. One read always goes, however large.
final class HistoryReadGate: Sendable {
    private struct State {
        var inFlight = 0
        var waiting = FIFO<(bytes: Int, start: @Sendable () -> Void)>()
    }
    private let state = Mutex(State())
    let maxBytes: Int
    /// Most reads that may wait (each a subscribing session; past it a subscribe's read fails
    /// with `unavailable`, as an explicit read does at once).
    let maxWaiting: Int

    init(maxBytes: Int, maxWaiting: Int = 100_000) {
        self.maxBytes = maxBytes
        self.maxWaiting = maxWaiting
    }

    /// Bytes counted now.
    var bytesInFlight: Int { state.withLock { $0.inFlight } }
    /// Reads waiting for their turn now.
    var waitingReads: Int { state.withLock { $0.waiting.count } }

    /// Counts an explicit read of up to `bytes`: false (refuse it) when it does not fit or
    /// reads are already waiting (they go first).
    func tryReserve(_ bytes: Int) -> Bool {
        state.withLock { state in
            guard state.waiting.isEmpty, Self.fits(bytes, state.inFlight, maxBytes) else { return false }
            state.inFlight += bytes
            return true
        }
    }

    /// Runs `start` now when a read of up to `bytes` fits, otherwise once earlier reads are
    /// answered (on the thread that answered them). False, and `start` never runs, only when
    /// ``maxWaiting`` reads already wait. The read must call ``release(_:)`` with the same
    /// `bytes` once answered.
    func reserveOrWait(_ bytes: Int, start: @escaping @Sendable () -> Void) -> Bool {
        enum Outcome { case now, queued, full }
        let outcome = state.withLock { state -> Outcome in
            if state.waiting.isEmpty, Self.fits(bytes, state.inFlight, maxBytes) {
                state.inFlight += bytes
                return .now
            }
            guard state.waiting.count < maxWaiting else { return .full }
            state.waiting.append((bytes, start))
            return .queued
        }
        switch outcome {
        case .now: start()
        case .queued: break
        case .full: return false
        }
        return true
    }

    /// A read of `bytes` was answered: the reads waiting that now fit start, in order.
    func release(_ bytes: Int) {
        let ready = state.withLock { state -> [@Sendable () -> Void] in
            state.inFlight -= bytes
            var ready: [@Sendable () -> Void] = []
            while let next = state.waiting.first, Self.fits(next.bytes, state.inFlight, maxBytes) {
                state.waiting.popFirst()
                state.inFlight += next.bytes
                ready.append(next.start)
            }
            return ready
        }
        for start in ready { start() }
    }

    private static func fits(_ bytes: Int, _ inFlight: Int, _ maxBytes: Int) -> Bool {
        inFlight == 0 || inFlight + bytes <= maxBytes
    }
}
