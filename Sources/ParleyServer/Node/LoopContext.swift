import ParleyCore
import ParleyIO

/// Wire formats of Parley's doors: a room event is encoded once per format per loop.
extension WireFormat {
    public static let line = WireFormat(1)
    public static let native = WireFormat(2)
}

/// What one event loop knows: its sessions and their rooms. Loop-confined.
final class LoopContext {
    let localHub: LocalHub<IOBuffer>

    init() {
        localHub = LocalHub { format, room, event in RoomEventEncoding.encode(format, room, event) }
    }

    /// The context of `loop`, created on first use. Loop thread only.
    static func of(_ loop: EventLoop) -> LoopContext {
        loop.local(LoopContext.self) { LoopContext() }
    }
}

/// The hub's deliveries for one loop: queued to it, handled there in order.
final class LoopInbox: Inbox {
    let loop: EventLoop
    init(loop: EventLoop) { self.loop = loop }

    func post(_ delivery: Delivery) {
        let loop = self.loop
        loop.execute { LoopContext.of(loop).localHub.handle(delivery) }
    }
}

/// A door's connection that can say goodbye when the server stops.
protocol GracefulSession: AnyObject {
    /// Tell the peer the server is going away, then close after flushing.
    func serverIsStopping()
}

/// Encodes room events for each door, once per event per loop.
enum RoomEventEncoding {
    static func encode(_ format: WireFormat, _ room: RoomKey, _ event: RoomEvent) -> IOBuffer? {
        switch format {
        case .line: LineEncoding.encode(event)
        // Join/leave only for `observable-*` rooms here, while the line door announces them
        // in its lobby whatever its name: the decision is per format.
        case .native: NativeEncoding.encode(event, in: room)
        default: nil
        }
    }
}
