/// A loop-confined object carried across threads and only ever touched on its own loop: a
/// store thread, a Redis reply or a timer on another loop hands work back to the connection or
/// feed that owns it.
///
/// `@unchecked Sendable` proof: `value` is read only inside `execute`/`run`/`runNow`;
/// `execute` and the deferred branch of `run` hand the body to `loop.execute` (the loop's
/// thread), `run`'s direct branch and `runNow` are taken only when `loop.inEventLoop` holds.
/// The object is created before any loop sees it and handed over whole, so no other thread
/// ever reaches it.
public struct LoopBound<Value: AnyObject>: @unchecked Sendable {
    private let value: Value
    public let loop: EventLoop

    public init(_ value: Value, on loop: EventLoop) {
        self.value = value
        self.loop = loop
    }

    /// Runs `body` with the object on its loop, always later, in order with other loop work
    /// (never re-entrantly, even when called on the loop).
    public func execute(_ body: @escaping @Sendable (Value) -> Void) {
        let this = self
        loop.execute { body(this.value) }
    }

    /// Runs `body` with the object on its loop: now when already there, else soon.
    public func run(_ body: @escaping @Sendable (Value) -> Void) {
        if loop.inEventLoop {
            body(value)
        } else {
            execute(body)
        }
    }

    /// As ``run(_:)``, but says whether `body` will run: false once the loop has stopped
    /// taking work (then it never runs, and the caller must answer whoever waits for it).
    public func tryRun(_ body: @escaping @Sendable (Value) -> Void) -> Bool {
        if loop.inEventLoop {
            body(value)
            return true
        }
        let this = self
        return loop.tryExecute { body(this.value) }
    }

    /// The object, on its own loop only.
    public func runNow<R>(_ body: (Value) -> R) -> R {
        loop.assertInEventLoop()
        return body(value)
    }
}
