import ParleyCore
import Synchronization

/// A ``MessageStore`` in front of another whose appends fail on demand, as a full disk or a
/// lost database would make them fail, so every test can prove what happens then (no root,
/// no tmpfs). Reads, retention and recovery always reach the wrapped store.
///
/// ```swift
/// let faults = FaultInjectingMessageStore(wrapping: InMemoryMessageStore())
/// faults.failAllAppends()          // every append fails from now on…
/// faults.failNextAppends(3)        // …or only the next three
/// faults.stopFailing()             // appends reach the wrapped store again
/// ```
/// A server over it: ``ParleyServer/withInjectableFaults(_:)``.
///
/// It keeps the ``MessageStore`` contract: a failed append never reaches the wrapped store
/// (so its offsets stay 1…n and the appends already on their way behind it fail with
/// `.conflict`, as after a real failure), and every completion, failed or not, runs in call
/// order — a failure waits for the appends called before it.
public final class FaultInjectingMessageStore: MessageStore {
    /// The error injected appends fail with unless another is given: what SQLite reports
    /// for a full disk, marked as injected.
    public static let diskFull = ParleyError(.unavailable, "disk full (injected failure)")

    public typealias Completion = @Sendable (Result<Void, ParleyError>) -> Void

    private enum Plan {
        case passThrough
        case failAll(ParleyError)
        case failNext(Int, ParleyError)
    }

    private struct State {
        var plan = Plan.passThrough
        var injected = 0
        var passed = 0
        // Completions are handed out in ticket order (call order).
        var nextTicket: UInt64 = 0
        var nextToRun: UInt64 = 0
        var finished: [UInt64: (Result<Void, ParleyError>, Completion)] = [:]
        var running = false

        /// The error this append must fail with, if any, advancing the plan.
        mutating func takeFailure() -> ParleyError? {
            switch plan {
            case .passThrough:
                return nil
            case .failAll(let error):
                return error
            case .failNext(let count, let error):
                plan = count > 1 ? .failNext(count - 1, error) : .passThrough
                return error
            }
        }

        /// The finished completions that are next in call order, removed.
        mutating func takeRunnable() -> [(Result<Void, ParleyError>, Completion)] {
            var runnable: [(Result<Void, ParleyError>, Completion)] = []
            while let next = finished.removeValue(forKey: nextToRun) {
                runnable.append(next)
                nextToRun += 1
            }
            return runnable
        }
    }

    /// The store every read and every append that is let through goes to.
    public let wrapped: any MessageStore
    private let state = Mutex(State())

    public init(wrapping store: any MessageStore) {
        wrapped = store
    }

    // MARK: faults

    /// Every append from now on fails with `error`, until ``stopFailing()``.
    public func failAllAppends(with error: ParleyError = FaultInjectingMessageStore.diskFull) {
        state.withLock { $0.plan = .failAll(error) }
    }

    /// The next `count` appends fail with `error`; the ones after reach the wrapped store.
    public func failNextAppends(_ count: Int, with error: ParleyError = FaultInjectingMessageStore.diskFull) {
        precondition(count >= 0, "a count of appends cannot be negative")
        state.withLock { $0.plan = count == 0 ? .passThrough : .failNext(count, error) }
    }

    /// Appends reach the wrapped store again (space is back).
    public func stopFailing() {
        state.withLock { $0.plan = .passThrough }
    }

    /// Appends failed by injection so far.
    public var injectedFailures: Int { state.withLock { $0.injected } }

    /// Appends handed to the wrapped store so far (whatever it answered).
    public var appendsLetThrough: Int { state.withLock { $0.passed } }

    // MARK: MessageStore

    public func append(_ message: Message, clientMessageID: String?, completion: @escaping Completion) {
        let (ticket, failure) = state.withLock { state -> (UInt64, ParleyError?) in
            let ticket = state.nextTicket
            state.nextTicket += 1
            let failure = state.takeFailure()
            if failure == nil { state.passed += 1 } else { state.injected += 1 }
            return (ticket, failure)
        }
        if let failure {
            finish(ticket, .failure(failure), completion)
        } else {
            wrapped.append(message, clientMessageID: clientMessageID) { [self] result in
                finish(ticket, result, completion)
            }
        }
    }

    /// Records that append `ticket` finished and runs every completion that is now next in
    /// call order. One thread runs completions at a time, never under the lock (a completion
    /// may call back into the store).
    private func finish(_ ticket: UInt64, _ result: Result<Void, ParleyError>, _ completion: @escaping Completion) {
        var runnable = state.withLock { state -> [(Result<Void, ParleyError>, Completion)] in
            state.finished[ticket] = (result, completion)
            guard !state.running else { return [] }
            let runnable = state.takeRunnable()
            state.running = !runnable.isEmpty
            return runnable
        }
        while !runnable.isEmpty {
            for (result, completion) in runnable { completion(result) }
            runnable = state.withLock { state in
                let more = state.takeRunnable()
                if more.isEmpty { state.running = false }
                return more
            }
        }
    }

    public func messages(in room: RoomKey, after offset: Int64, limit: Int,
                         completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        wrapped.messages(in: room, after: offset, limit: limit, completion: completion)
    }

    public func messages(in room: RoomKey, after offset: Int64, limit: Int, maxBytes: Int,
                  completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        wrapped.messages(in: room, after: offset, limit: limit, maxBytes: maxBytes, completion: completion)
    }

    public func messages(in room: RoomKey, before: Int64?, limit: Int,
                         completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        wrapped.messages(in: room, before: before, limit: limit, completion: completion)
    }

    public func messages(in room: RoomKey, before: Int64?, limit: Int, maxBytes: Int,
                  completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        wrapped.messages(in: room, before: before, limit: limit, maxBytes: maxBytes, completion: completion)
    }

    public func deleteMessage(in room: RoomKey, offset: Int64,
                              completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        wrapped.deleteMessage(in: room, offset: offset, completion: completion)
    }

    public func message(withID id: String, in room: RoomKey, completion: @escaping @Sendable (Result<Message?, ParleyError>) -> Void) {
        wrapped.message(withID: id, in: room, completion: completion)
    }

    public func enforceRetention(nowMillis: Int64, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        wrapped.enforceRetention(nowMillis: nowMillis, completion: completion)
    }

    public func recover(clientMessageIDsSince: Int64) throws(ParleyError) -> StoreRecovery {
        try wrapped.recover(clientMessageIDsSince: clientMessageIDsSince)
    }

    public func loadRoom(_ room: RoomKey, clientMessageIDsSince: Int64,
                         completion: @escaping @Sendable (Result<RoomRecovery, ParleyError>) -> Void) {
        // Appends let through reach the wrapped store in call order, before this.
        wrapped.loadRoom(room, clientMessageIDsSince: clientMessageIDsSince, completion: completion)
    }
}
