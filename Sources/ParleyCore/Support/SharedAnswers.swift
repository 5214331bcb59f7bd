import Synchronization

/// Answers that many may ask for at once, worked out once: while an answer for a key is
/// being made, askers of that key wait for it; once made, it is given again for
/// ``reuseMillis``. For reads anyone may ask for (a health probe, the member list of an open
/// channel), so that a crowd asking costs one read, not one each.
///
/// Every count is bounded. At most ``maxRunning`` answers are made at once; an asker of
/// another key then waits in line, first come first served (a place that frees passes to the
/// first in line, so askers of many different keys cannot keep the others out), and when
/// ``maxWaiting`` already wait it gets nil: busy, retry. Only fresh answers are kept, at most
/// ``maxKept`` of them and at most ``maxKeptCost`` of their cost together (an answer over
/// what is left is given, not kept).
public final class SharedAnswers<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Entry {
        var answer: (value: Value, madeAtMillis: Int64, cost: Int)?
        var running: Task<Value, Never>?
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        /// Places taken: answers being made, and places passed to one in line.
        var running = 0
        var keptCost = 0
        var line = FIFO<CheckedContinuation<Bool, Never>>()

        /// Gives a place back: to the first in line (who then holds it), else free.
        mutating func release() -> CheckedContinuation<Bool, Never>? {
            if let next = line.popFirst() { return next }
            running -= 1
            return nil
        }
    }

    private enum Step { case fresh(Value), wait(Task<Value, Never>), queue }

    private let state = Mutex(State())
    private let now: @Sendable () -> Int64
    private let cost: @Sendable (Value) -> Int
    public let reuseMillis: Int64
    public let maxRunning: Int
    public let maxWaiting: Int
    public let maxKept: Int
    public let maxKeptCost: Int

    /// `now` gives milliseconds on a clock that does not go back; `cost` weighs an answer
    /// kept (its bytes, say) against `maxKeptCost`.
    public init(reuseMillis: Int64, maxRunning: Int, maxWaiting: Int = 256, maxKept: Int = 256,
                maxKeptCost: Int = .max, cost: @escaping @Sendable (Value) -> Int = { _ in 0 },
                now: @escaping @Sendable () -> Int64 = { MonotonicTime.milliseconds() }) {
        self.reuseMillis = reuseMillis
        self.maxRunning = max(1, maxRunning)
        self.maxWaiting = max(0, maxWaiting)
        self.maxKept = max(1, maxKept)
        self.maxKeptCost = max(0, maxKeptCost)
        self.cost = cost
        self.now = now
    }

    /// The answer for `key`: a fresh one made before, else the one being made, else a new one
    /// from `make` (after waiting in line while ``maxRunning`` are being made); nil when the
    /// line is full.
    public func answer(_ key: Key, make: @escaping @Sendable () async -> Value) async -> Value? {
        var holdsPlace = false
        while true {
            let (step, handOver) = state.withLock { state -> (Step, CheckedContinuation<Bool, Never>?) in
                if let entry = state.entries[key] {
                    if let running = entry.running { return (.wait(running), holdsPlace ? state.release() : nil) }
                    if let answer = entry.answer, isFresh(answer.madeAtMillis, now: self.now()) {
                        return (.fresh(answer.value), holdsPlace ? state.release() : nil)
                    }
                }
                if !holdsPlace {
                    guard state.running < maxRunning, state.line.isEmpty else { return (.queue, nil) }
                    state.running += 1
                }
                let running = Task { [self] in
                    let value = await make()
                    finished(key, value)
                    return value
                }
                state.entries[key, default: Entry()].running = running
                return (.wait(running), nil)
            }
            handOver?.resume(returning: true)
            switch step {
            case .fresh(let value): return value
            case .wait(let task): return await task.value
            case .queue:
                let admitted = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                    let now = state.withLock { state -> Bool? in
                        if state.running < maxRunning, state.line.isEmpty {
                            state.running += 1
                            return true
                        }
                        guard state.line.count < maxWaiting else { return false }
                        state.line.append(continuation)
                        return nil
                    }
                    if let now { continuation.resume(returning: now) }
                }
                guard admitted else { return nil }
                holdsPlace = true
            }
        }
    }

    /// Made less than ``reuseMillis`` ago (a clock that went back makes nothing fresh).
    private func isFresh(_ madeAtMillis: Int64, now: Int64) -> Bool {
        let age = now - madeAtMillis
        return age >= 0 && age < reuseMillis
    }

    /// A making ended: stale answers are forgotten, this one is kept while fresh (within the
    /// bounds), and its place passes on.
    private func finished(_ key: Key, _ value: Value) {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            let now = self.now()
            if let old = state.entries.removeValue(forKey: key)?.answer { state.keptCost -= old.cost }
            let stale = state.entries.compactMap { kept, entry in
                entry.running == nil && entry.answer.map { !isFresh($0.madeAtMillis, now: now) } != false ? kept : nil
            }
            for kept in stale { state.keptCost -= state.entries.removeValue(forKey: kept)?.answer?.cost ?? 0 }
            let weight = cost(value)
            if state.entries.count < maxKept, weight <= maxKeptCost - state.keptCost {
                state.entries[key] = Entry(answer: (value, now, weight), running: nil)
                state.keptCost += weight
            }
            return state.release()
        }
        next?.resume(returning: true)
    }
}
