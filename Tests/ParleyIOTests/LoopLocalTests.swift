import Foundation
import Synchronization
import Testing
import ParleyIO
import ParleyTestSupport

@Suite struct LoopLocalTests {
    final class Box { let index: Int; var uses = 0; init(_ index: Int) { self.index = index } }

    /// Runs `body` on `loop` and waits for it (at most 5 s).
    private func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) throws -> T {
        let result = Locked<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            result.withLock { $0 = body() }
            done.signal()
        }
        guard done.wait(timeout: .now() + 5) == .success, let value = result.value else {
            throw TimeoutError(what: "the loop", seconds: 5)
        }
        return value
    }

    @Test func eachLoopGetsItsOwnValueMadeOnceOnThatLoop() throws {
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let made = Atomic<Int>(0)
        let local = LoopLocal(group) { loop in
            #expect(loop.inEventLoop, "made on its own loop")
            made.add(1, ordering: .relaxed)
            return Box(loop.index)
        }
        for _ in 0..<3 {
            for loop in group.loops {
                let (index, uses) = try onLoop(loop) { () -> Pair in
                    let box = local[loop]
                    box.uses += 1
                    return Pair(box.index, box.uses)
                }.tuple
                #expect(index == loop.index)
                #expect(uses >= 1)
            }
        }
        #expect(made.load(ordering: .relaxed) == 2, "one value per loop, made on first use")
        let uses = try onLoop(group.loops[0]) { local[group.loops[0]].uses }
        #expect(uses == 3)
    }

    /// Two owners (two doors, two servers in one process) over the same loops keep apart.
    @Test func twoOwnersOfTheSameLoopsDoNotShare() throws {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let first = LoopLocal(group) { _ in Box(1) }, second = LoopLocal(group) { _ in Box(2) }
        let loop = group.loops[0]
        let seen = try onLoop(loop) { () -> Pair in
            first[loop].uses += 10
            second[loop].uses += 1
            return Pair(first[loop].uses, second[loop].uses)
        }
        #expect(seen.tuple == (10, 1))
    }

    struct Pair: Sendable {
        let a: Int, b: Int
        init(_ a: Int, _ b: Int) { self.a = a; self.b = b }
        var tuple: (Int, Int) { (a, b) }
    }
}
