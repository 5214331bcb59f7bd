import Testing
@testable import ParleyCore

/// Message ids sort in the order they are made, within a process: the SQLite store indexes
/// them where they are appended.
@Suite struct MessageIDGeneratorTests {
    @Test func idsSortInTheOrderTheyAreMade() {
        let generator = MessageIDGenerator()
        // Past the length changes of base 36 (36, 1,296, 46,656).
        let ids = (0..<50_000).map { _ in generator.next() }
        #expect(Set(ids).count == ids.count)
        #expect(ids == ids.sorted())
    }

    @Test func theCounterIsItsLengthThenItsBase36Digits() {
        #expect(MessageIDGenerator.id(prefix: "k7f3q9x2", counter: 1) == "k7f3q9x2-11")
        #expect(MessageIDGenerator.id(prefix: "k7f3q9x2", counter: 35) == "k7f3q9x2-1z")
        #expect(MessageIDGenerator.id(prefix: "k7f3q9x2", counter: 36) == "k7f3q9x2-210")
        #expect(MessageIDGenerator.id(prefix: "p", counter: Int.max) == "p-d1y2p0ij32e8e7")
        // Ordered across a change of length, which plain base 36 is not ("z" > "10").
        #expect(MessageIDGenerator.id(prefix: "p", counter: 35) < MessageIDGenerator.id(prefix: "p", counter: 36))
    }
}
