import Dispatch
import ParleyCore
import Synchronization

/// What `GET /readyz` asks before it says the node may take traffic: each check answers nil
/// (ready) or why not. The server registers the store's; cluster mode adds Redis with
/// ``add(_:_:)``. While the server drains before a shutdown, `/readyz` says no at once.
final class Readiness: Sendable {
    typealias Check = @Sendable () async -> String?
    private let checks = Mutex<[(name: String, check: Check)]>([])
    private let draining = Atomic<Bool>(false)
    /// How long one check may take before it counts as failed.
    let timeoutMillis: Int

    init(timeoutMillis: Int = 2_000) { self.timeoutMillis = timeoutMillis }

    /// Adds a check named `name` (shown in the answer).
    func add(_ name: String, _ check: @escaping Check) {
        checks.withLock { $0.append((name, check)) }
    }

    /// The server is going away: not ready, whatever the checks say.
    func beginDraining() { draining.store(true, ordering: .relaxed) }
    var isDraining: Bool { draining.load(ordering: .relaxed) }

    /// `/readyz` needs no token and is not rate-limited (probes), so requests share one
    /// evaluation at a time and an answer made less than ``reuseMillis`` ago, instead of a
    /// store read (and in a cluster a Redis round trip) each.
    private let shared = SharedAnswers<Bool, (ready: Bool, lines: [String])>(reuseMillis: Readiness.reuseMillis, maxRunning: 1)
    /// How long an answer is given again: well under any balancer's probe interval.
    static let reuseMillis: Int64 = 500

    /// Whether the node is ready, with one line per check: the last answer when it is fresh,
    /// else the evaluation under way, else a new one (``evaluateNow()``).
    func evaluate() async -> (ready: Bool, lines: [String]) {
        if isDraining { return (false, ["shutting down: draining connections before the server stops"]) }
        // One key: an evaluation under way is always joined, so the answer is never "busy".
        return await shared.answer(true) { await self.evaluateNow() } ?? (false, ["no evaluation"])
    }

    /// Runs every check at once (each bounded by the timeout): ready when all pass, with one
    /// line per check.
    private func evaluateNow() async -> (ready: Bool, lines: [String]) {
        let checks = self.checks.withLock { $0 }
        var lines: [String] = []
        var ready = true
        await withTaskGroup(of: (Int, String?).self) { group in
            for (index, entry) in checks.enumerated() {
                let timeout = timeoutMillis
                group.addTask { (index, await Self.bounded(entry.check, timeoutMillis: timeout, name: entry.name)) }
            }
            var results = [String?](repeating: nil, count: checks.count)
            for await (index, failure) in group { results[index] = failure }
            for (entry, failure) in zip(checks, results) {
                if failure != nil { ready = false }
                lines.append("\(entry.name): \(failure ?? "ok")")
            }
        }
        return (ready, lines)
    }

    /// The check's answer, or a failure once `timeoutMillis` pass (the check may finish
    /// later; its answer is then dropped), so a stuck dependency cannot hang `/readyz`.
    private static func bounded(_ check: @escaping Check, timeoutMillis: Int, name: String) async -> String? {
        let once = OnceAnswer()
        return await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            once.set(continuation)
            Task { once.answer(await check()) }
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(timeoutMillis)) {
                once.answer("no answer within \(timeoutMillis) ms")
            }
        }
    }
}

/// Resumes a continuation with the first answer given.
private final class OnceAnswer: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<String?, Never>?, answered: Bool)>((nil, false))

    func set(_ continuation: CheckedContinuation<String?, Never>) {
        state.withLock { $0.continuation = continuation }
    }

    func answer(_ value: String?) {
        let continuation = state.withLock { state -> CheckedContinuation<String?, Never>? in
            guard !state.answered, let continuation = state.continuation else { return nil }
            state.answered = true
            return continuation
        }
        continuation?.resume(returning: value)
    }
}
