import ParleyCore
import Synchronization
import Testing

/// ``SharedAnswers``: askers at once share one making, a fresh answer is given again, and
/// every count is bounded.
@Suite struct SharedAnswersTests {
    /// Counts the makings, and holds each one until the test lets it go.
    final class Maker: Sendable {
        let made = Atomic<Int>(0)
        private let gate = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

        func make(_ value: Int) async -> Int {
            made.add(1, ordering: .relaxed)
            await withCheckedContinuation { continuation in
                let resume = gate.withLock { gate -> Bool in
                    if gate.open { return true }
                    gate.waiting.append(continuation)
                    return false
                }
                if resume { continuation.resume() }
            }
            return value
        }

        var waiting: Int { gate.withLock { $0.waiting.count } }

        func open() {
            let waiting = gate.withLock { gate -> [CheckedContinuation<Void, Never>] in
                gate.open = true
                defer { gate.waiting = [] }
                return gate.waiting
            }
            for continuation in waiting { continuation.resume() }
        }
    }

    /// Waits (at most 5 s) until `condition` holds.
    func eventually(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while !condition() {
            guard ContinuousClock.now < deadline else { Issue.record("timed out"); return }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    @Test func askersAtOnceShareOneMaking() async throws {
        let answers = SharedAnswers<String, Int>(reuseMillis: 60_000, maxRunning: 4)
        let maker = Maker()
        final class Results: Sendable { let values = Mutex<[Int?]>([]) }
        let results = Results()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    let value = await answers.answer("members") { await maker.make(7) }
                    results.values.withLock { $0.append(value) }
                }
            }
            try await eventually { maker.waiting == 1 }
            maker.open()
            try await group.waitForAll()
        }
        #expect(maker.made.load(ordering: .relaxed) == 1)
        #expect(results.values.withLock { $0 } == Array(repeating: 7, count: 20))
        // Given again while fresh, without a making.
        #expect(await answers.answer("members") { await maker.make(8) } == 7)
        #expect(maker.made.load(ordering: .relaxed) == 1)
    }

    @Test func aStaleAnswerIsMadeAgain() async {
        let answers = SharedAnswers<String, Int>(reuseMillis: 0, maxRunning: 1)
        let maker = Maker()
        maker.open()
        #expect(await answers.answer("k") { await maker.make(1) } == 1)
        #expect(await answers.answer("k") { await maker.make(2) } == 2)
        #expect(maker.made.load(ordering: .relaxed) == 2)
    }

    /// Past `maxRunning` makings of other keys an asker gets nil (busy), and the key it asked
    /// for is not started.
    @Test func makingsAtOnceAreBounded() async throws {
        let answers = SharedAnswers<Int, Int>(reuseMillis: 60_000, maxRunning: 2)
        let maker = Maker()
        async let first = answers.answer(1) { await maker.make(1) }
        async let second = answers.answer(2) { await maker.make(2) }
        try await eventually { maker.waiting == 2 }
        // (A making that does not wait for the gate: were it started, the test would see 3.)
        #expect(await answers.answer(3) { 3 } == nil)
        maker.open()
        #expect(await first == 1)
        #expect(await second == 2)
        #expect(await answers.answer(3) { await maker.make(3) } == 3)
        #expect(maker.made.load(ordering: .relaxed) == 3)
    }

    /// At most `maxKept` answers are kept: the next key's answer is made and given, not kept.
    @Test func answersKeptAreBounded() async {
        let answers = SharedAnswers<Int, Int>(reuseMillis: 60_000, maxRunning: 1, maxKept: 3)
        let maker = Maker()
        maker.open()
        for key in 0..<4 { #expect(await answers.answer(key) { await maker.make(key) } == key) }
        #expect(maker.made.load(ordering: .relaxed) == 4)
        // The first three are kept (given again), the fourth was not.
        for key in 0..<3 { #expect(await answers.answer(key) { await maker.make(-1) } == key) }
        #expect(maker.made.load(ordering: .relaxed) == 4)
        #expect(await answers.answer(3) { await maker.make(30) } == 30)
        #expect(maker.made.load(ordering: .relaxed) == 5)
    }
}
