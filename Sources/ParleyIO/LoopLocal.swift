/// One value per loop of a group, owned by whoever holds the `LoopLocal` (a door, the node)
/// rather than by the loop: each is made on its loop's first use there and only ever touched
/// on that loop. It replaces type-keyed state on the loop itself, so two servers in one
/// process, or two doors, never share what they keep per loop.
///
/// `@unchecked Sendable` proof: `slots` is immutable after `init` (one box per loop, indexed
/// by ``EventLoop/index``); the subscript asserts that the caller is on the slot's loop before
/// it reads or writes that box, so each box, and the value in it, is only ever reached from
/// its own loop's thread. `make` is `@Sendable` and runs on that loop.
public final class LoopLocal<Value: AnyObject>: @unchecked Sendable {
    private final class Slot {
        var value: Value?
    }

    private let slots: [Slot]
    private let make: @Sendable (EventLoop) -> Value

    /// A value per loop of `group`, each made by `make` on its loop when first asked for.
    public init(_ group: EventLoopGroup, make: @escaping @Sendable (EventLoop) -> Value) {
        slots = group.loops.map { _ in Slot() }
        self.make = make
    }

    /// `loop`'s value. On `loop`'s thread only.
    public subscript(loop: EventLoop) -> Value {
        loop.assertInEventLoop()
        let slot = slots[loop.index]
        if let value = slot.value { return value }
        let value = make(loop)
        slot.value = value
        return value
    }
}
