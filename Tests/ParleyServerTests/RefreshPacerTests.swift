import Testing
@testable import ParleyServer

/// ``RefreshPacer``: one read out per key, at most one started per interval, and asks that
/// come meanwhile merged into one read after it.
@Suite struct RefreshPacerTests {
    @Test func asksWhileAReadIsOutMakeOneMoreAfterIt() {
        var pacer = RefreshPacer<String>(intervalMillis: 250)
        #expect(pacer.ask("r", now: 1_000) == .start)
        for now in 1_001...1_100 { #expect(pacer.ask("r", now: Int64(now)) == .merged) }
        // Another key is its own.
        #expect(pacer.ask("s", now: 1_050) == .start)
        // The read ended 100 ms after it started: one more, 150 ms later.
        #expect(pacer.ended("r", now: 1_100) == .wait(millis: 150))
        #expect(pacer.ask("r", now: 1_200) == .merged)
        #expect(pacer.due("r", now: 1_250) == .start)
        #expect(pacer.ended("r", now: 1_260) == .merged)
        #expect(pacer.due("r", now: 1_300) == .merged, "nothing was asked meanwhile")
    }

    @Test func anAskTooSoonAfterAReadWaitsForTheInterval() {
        var pacer = RefreshPacer<String>(intervalMillis: 250)
        #expect(pacer.ask("r", now: 0) == .start)
        #expect(pacer.ended("r", now: 10) == .merged)
        #expect(pacer.ask("r", now: 100) == .wait(millis: 150))
        #expect(pacer.ask("r", now: 120) == .merged, "one wait at a time")
        #expect(pacer.due("r", now: 250) == .start)
        #expect(pacer.ended("r", now: 260) == .merged)
        #expect(pacer.ask("r", now: 600) == .start, "past the interval: at once")
    }

    @Test func aFloodOfAsksStartsOneReadPerInterval() {
        var pacer = RefreshPacer<Int>(intervalMillis: 250)
        var starts = 0
        var waitingUntil: Int64?
        for now in stride(from: Int64(0), to: 1_000, by: 2) {
            if let until = waitingUntil, now >= until {
                waitingUntil = nil
                if pacer.due(1, now: now) == .start { starts += 1; _ = pacer.ended(1, now: now) }
            }
            switch pacer.ask(1, now: now) {
            case .start:
                starts += 1
                if case .wait(let millis) = pacer.ended(1, now: now) { waitingUntil = now + millis }
            case .wait(let millis): waitingUntil = now + millis
            case .merged: break
            }
        }
        #expect(starts == 4, "500 asks in a second: \(starts) reads")
    }

    @Test func aForgottenKeyDropsWhatWasAsked() {
        var pacer = RefreshPacer<String>(intervalMillis: 250)
        #expect(pacer.ask("r", now: 0) == .start)
        #expect(pacer.ask("r", now: 1) == .merged)
        pacer.forget("r")
        #expect(pacer.ended("r", now: 5) == .merged)
        #expect(pacer.due("r", now: 300) == .merged)
        #expect(pacer.ask("r", now: 6) == .start)
    }
}
