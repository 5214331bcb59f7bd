import ParleyIO

/// A loop-confined object that another thread (a store thread) must call back: it carries
/// the reference across threads but only ever touches it on its own loop.
///
/// `@unchecked Sendable` proof: `value` is read only inside `run`, whose body is executed by
/// `loop.execute`, i.e. on the loop thread that owns the object; no other code can reach it.
struct LoopBound<Value: AnyObject>: @unchecked Sendable {
    private let value: Value
    let loop: EventLoop

    init(_ value: Value, on loop: EventLoop) {
        self.value = value
        self.loop = loop
    }

    /// Runs `body` with the object on its loop (soon, in order with other loop work).
    func run(_ body: @escaping @Sendable (Value) -> Void) {
        let this = self
        loop.execute { body(this.value) }
    }
}
