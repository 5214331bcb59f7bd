import ParleyIO

/// A loop-confined object carried across threads and only ever touched on its own loop.
///
/// `@unchecked Sendable` proof: `value` is read only inside `run`/`runNow`; `run` hands the
/// body to `loop.execute` (the loop's thread) and `runNow` asserts it is already on that
/// thread. The object is created before any loop sees it and handed over whole.
struct LoopBound<Value: AnyObject>: @unchecked Sendable {
    private let value: Value
    let loop: EventLoop

    init(_ value: Value, on loop: EventLoop) {
        self.value = value
        self.loop = loop
    }

    /// Runs `body` with the object on its loop: now when already there, else soon.
    func run(_ body: @escaping @Sendable (Value) -> Void) {
        if loop.inEventLoop {
            body(value)
        } else {
            let this = self
            loop.execute { body(this.value) }
        }
    }

    /// The object, on its own loop only.
    func runNow<R>(_ body: (Value) -> R) -> R {
        loop.assertInEventLoop()
        return body(value)
    }
}
