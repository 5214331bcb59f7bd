import CLibUV
import Foundation
import Synchronization

/// A fixed set of event loops, one thread each (by default one per core).
public final class EventLoopGroup: Sendable {
    /// The loops, in index order.
    public let loops: [EventLoop]
    private let counter = Atomic<Int>(0)
    private let finished: [DispatchSemaphore]
    private let stopped = Atomic<Bool>(false)

    /// The number of cores this process may use.
    public static var coreCount: Int { ProcessInfo.processInfo.activeProcessorCount }

    /// Starts `loopCount` loops, each on its own thread.
    public init(loopCount: Int = EventLoopGroup.coreCount) {
        precondition(loopCount >= 1, "an event loop group needs at least one loop")
        signal(SIGPIPE, SIG_IGN)
        let loops = (0..<loopCount).map { EventLoop(index: $0) }
        self.loops = loops
        var finished: [DispatchSemaphore] = []
        for loop in loops {
            let started = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            finished.append(done)
            let thread = Thread {
                loop.execute { started.signal() }
                loop.run()
                done.signal()
            }
            thread.name = "parley-loop-\(loop.index)"
            thread.stackSize = 4 << 20
            thread.start()
            started.wait()
        }
        self.finished = finished
    }

    /// The next loop, round robin. Callable from any thread.
    public func next() -> EventLoop {
        let n = counter.wrappingAdd(1, ordering: .relaxed).oldValue
        return loops[n % loops.count]
    }

    /// The loop whose thread this is, if any.
    public var currentLoop: EventLoop? { loops.first { $0.inEventLoop } }

    /// Stops every loop (open connections are closed without flushing) and waits for the
    /// threads to end. Must not be called from a loop thread.
    public func shutdown() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        precondition(currentLoop == nil, "shutdown() must not be called on an event loop")
        for loop in loops { loop.execute { loop.beginStop() } }
        for done in finished { done.wait() }
    }
}
