import Foundation

/// Runs blocking work on its own thread (not the Swift concurrency pool) and hands back the
/// result with a timeout.
public final class BackgroundThread<Value: Sendable>: Sendable {
    private let box = Locked<Value?>(nil)
    private let done = DispatchSemaphore(value: 0)

    public init(_ work: @escaping @Sendable () -> Value) {
        let box = self.box, done = self.done
        let thread = Thread {
            let value = work()
            box.withLock { $0 = value }
            done.signal()
        }
        thread.start()
    }

    public func result(timeout: Double) throws -> Value {
        guard done.wait(timeout: .now() + timeout) == .success, let value = box.value else {
            throw TestSocket.Failure("background work did not finish within \(timeout) s")
        }
        return value
    }
}
