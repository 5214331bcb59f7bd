import ParleyCore
import Synchronization
import Testing

/// ``SharedAnswers``: askers at once share one making, a fresh answer is given again, makings
/// beyond the bound wait in line, and what is kept is bounded.
@Suite struct SharedAnswersTests {
    /// Counts the makings, and holds each one until the test lets it go.
    final class Maker: Sendable {
        let made = Atomic<Int>(0)
        private let gate = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

        init(open: Bool = false) {
            if open { gate.withLock { $0.open = true } }
        }

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

        var count: Int { made.load(ordering: .relaxed) }
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

    /// A clock the test moves.
    final class Clock: Sendable {
        let millis = Atomic<Int64>(1_000_000)
        func advance(_ by: Int64) { millis.add(by, ordering: .relaxed) }
        var now: @Sendable () -> Int64 { { [self] in millis.load(ordering: .relaxed) } }
    }

    /// An answer asked for in a task of its own, read without waiting for it (a test that
    /// went wrong must not hang).
    final class Asked: Sendable {
        private let result = Mutex<Int??>(nil)
        init(_ answers: SharedAnswers<Int, Int>, _ key: Int, _ make: @escaping @Sendable () async -> Int) {
            Task { [self] in
                let value = await answers.answer(key, make: make)
                result.withLock { $0 = .some(value) }
            }
        }
        var value: Int?? { result.withLock { $0 } }
    }

    /// Waits (at most 5 s) until `condition` holds.
    func eventually(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while !condition() {
            guard ContinuousClock.now < deadline else { Issue.record("timed out waiting for \(what)"); return }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    @Test func askersAtOnceShareOneMaking() async throws {
        let clock = Clock()
        let answers = SharedAnswers<String, Int>(reuseMillis: 1_000, maxRunning: 4, now: clock.now)
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
            try await eventually("the making") { maker.waiting == 1 }
            maker.open()
            try await group.waitForAll()
        }
        #expect(maker.count == 1)
        #expect(results.values.withLock { $0 } == Array(repeating: 7, count: 20))
        // Given again while fresh, without a making; made again once stale.
        clock.advance(999)
        #expect(await answers.answer("members") { await maker.make(8) } == 7)
        #expect(maker.count == 1)
        clock.advance(1)
        #expect(await answers.answer("members") { await maker.make(8) } == 8)
        #expect(maker.count == 2)
        // A clock that went back makes nothing fresh.
        clock.advance(-10_000)
        #expect(await answers.answer("members") { await maker.make(9) } == 9)
    }

    /// Past `maxRunning` makings an asker of another key waits in line and is served when a
    /// place frees; past `maxWaiting` in line it gets nil (busy).
    @Test func makingsBeyondTheBoundWaitInLine() async throws {
        let answers = SharedAnswers<Int, Int>(reuseMillis: 60_000, maxRunning: 2, maxWaiting: 1)
        let maker = Maker()
        let first = Asked(answers, 1) { await maker.make(1) }
        let second = Asked(answers, 2) { await maker.make(2) }
        try await eventually("two makings") { maker.waiting == 2 }
        // (Makings that do not wait for the gate: were they started now, the test would see them.)
        let third = Asked(answers, 3) { 3 }
        try await Task.sleep(for: .milliseconds(50))
        #expect(third.value == nil, "the third is in line, not made")
        #expect(await answers.answer(4) { 4 } == nil, "the line is full: busy")
        // The askers of keys being made or fresh are not in line.
        maker.open()
        try await eventually("the first two") { first.value != nil && second.value != nil }
        #expect(first.value == 1 && second.value == 2)
        try await eventually("the third") { third.value != nil }
        #expect(third.value == 3)
        #expect(await answers.answer(4) { 4 } == 4)
        #expect(maker.count == 2)
    }

    /// Only fresh answers are kept, at most `maxKept` of them and `maxKeptCost` together; a
    /// stale one is forgotten when a making ends, which makes room.
    @Test func whatIsKeptIsBounded() async {
        let clock = Clock()
        let byCount = SharedAnswers<Int, Int>(reuseMillis: 1_000, maxRunning: 1, maxKept: 3, now: clock.now)
        let maker = Maker(open: true)
        for key in 0..<4 { #expect(await byCount.answer(key) { await maker.make(key) } == key) }
        #expect(maker.count == 4)
        // The first three are kept (given again), the fourth was not.
        for key in 0..<3 { #expect(await byCount.answer(key) { await maker.make(-1) } == key) }
        #expect(await byCount.answer(3) { await maker.make(30) } == 30)
        #expect(maker.count == 5)

        let byCost = SharedAnswers<Int, Int>(reuseMillis: 1_000, maxRunning: 1, maxKeptCost: 10, cost: { $0 }, now: clock.now)
        #expect(await byCost.answer(1) { 10 } == 10)
        #expect(await byCost.answer(1) { 11 } == 10, "kept: its cost fits")
        #expect(await byCost.answer(2) { 5 } == 5)
        #expect(await byCost.answer(2) { 6 } == 6, "not kept: no cost left")
        clock.advance(1_000)
        #expect(await byCost.answer(3) { 7 } == 7)
        #expect(await byCost.answer(3) { 8 } == 7, "kept: the stale answer of 1 was forgotten")
    }
}
