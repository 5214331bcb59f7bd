import Synchronization

/// Answers that many may ask for at once, worked out once: while an answer for a key is
/// being made, askers of that key wait for it; once made, it is given again for
/// ``reuseMillis``. For reads anyone may ask for (a health probe, the member list of an open
/// channel), so that a crowd asking costs one read, not one each.
///
/// Every count is bounded: at most ``maxRunning`` answers are made at once (an asker of
/// another key then gets nil: busy, retry), and at most ``maxKept`` answers are kept.
public final class SharedAnswers<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Entry {
        var answer: (value: Value, madeAt: ContinuousClock.Instant)?
        var running: Task<Value, Never>?
    }

    private enum Step { case fresh(Value), wait(Task<Value, Never>), busy }

    private let entries = Mutex<[Key: Entry]>([:])
    public let reuseMillis: Int
    public let maxRunning: Int
    public let maxKept: Int

    public init(reuseMillis: Int, maxRunning: Int, maxKept: Int = 256) {
        self.reuseMillis = reuseMillis
        self.maxRunning = max(1, maxRunning)
        self.maxKept = max(1, maxKept)
    }

    /// The answer for `key`: a fresh one made before, else the one being made, else a new one
    /// from `make`; nil when ``maxRunning`` answers for other keys are being made.
    public func answer(_ key: Key, make: @escaping @Sendable () async -> Value) async -> Value? {
        let reuse = Duration.milliseconds(reuseMillis)
        let now = ContinuousClock.now
        let step = entries.withLock { entries -> Step in
            if let entry = entries[key] {
                if let running = entry.running { return .wait(running) }
                if let answer = entry.answer, now - answer.madeAt < reuse { return .fresh(answer.value) }
            }
            guard entries.values.count(where: { $0.running != nil }) < maxRunning else { return .busy }
            let running = Task { await make() }
            entries[key] = Entry(answer: nil, running: running)
            return .wait(running)
        }
        switch step {
        case .fresh(let value): return value
        case .busy: return nil
        case .wait(let task):
            let value = await task.value
            entries.withLock { entries in
                guard let entry = entries[key], entry.running == task else { return }
                let madeAt = ContinuousClock.now
                entries[key] = Entry(answer: (value, madeAt), running: nil)
                guard entries.count > maxKept else { return }
                // Forget what is no longer fresh; if still too many, this answer is not kept.
                entries = entries.filter { $0.value.running != nil || $0.value.answer.map { madeAt - $0.madeAt < reuse } == true }
                if entries.count > maxKept { entries[key] = nil }
            }
            return value
        }
    }
}
