import ParleyCore
import ParleyIO

/// The wire formats of Parley's doors: a room event is encoded once per format per loop
/// (``RoomEventEncoding``), and every subscriber names its format. The encoder switches over
/// every case with no default, so a door whose format has no encoder does not compile.
enum DoorFormat: Int, CaseIterable, Sendable {
    case line = 1
    case native = 2
    /// Socket.IO over WebSocket: ready-made text frames, one per packet (EIO3 and EIO4 alike).
    case socketIO = 30
    /// Socket.IO over long-polling: packet texts joined by `\u{1e}`, framed per session.
    case socketIOPolling = 31

    var wireFormat: WireFormat { WireFormat(rawValue) }
}

extension WireFormat {
    public static let line = DoorFormat.line.wireFormat
    public static let native = DoorFormat.native.wireFormat
    public static let socketIO = DoorFormat.socketIO.wireFormat
    public static let socketIOPolling = DoorFormat.socketIOPolling.wireFormat
}

/// What one event loop knows: its sessions and their rooms. Loop-confined.
final class LoopContext {
    let loopHub: LoopHub<IOBuffer>
    /// The SocketChat application's encoder (it reads the lobby's user list).
    let socketChat: SocketChatFanOut

    init() {
        let socketChat = SocketChatFanOut()
        self.socketChat = socketChat
        loopHub = LoopHub { format, room, event in RoomEventEncoding.encode(format, room, event, socketChat: socketChat) }
    }

    /// The context of `loop`, created on first use. Loop thread only.
    static func of(_ loop: EventLoop) -> LoopContext {
        loop.local(LoopContext.self) { LoopContext() }
    }
}

/// The hub's deliveries for one loop: queued to it, handled there in order. A stored
/// message's fan-out time on this loop is recorded once it has been written to every
/// subscriber here (one clock read per message per loop).
final class LoopInbox: Inbox {
    let loop: EventLoop
    let metrics: LoopMetrics
    init(loop: EventLoop, metrics: LoopMetrics) {
        self.loop = loop
        self.metrics = metrics
    }

    func post(_ delivery: Delivery) {
        let (loop, metrics) = (self.loop, self.metrics)
        loop.execute {
            LoopContext.of(loop).loopHub.handle(delivery)
            Self.record(delivery, metrics)
        }
    }

    func post(_ delivery: Delivery, completing backlog: RoomBacklog) {
        let (loop, metrics) = (self.loop, self.metrics)
        loop.execute {
            LoopContext.of(loop).loopHub.handle(delivery)
            Self.record(delivery, metrics)
            backlog.done()
        }
    }

    @inline(__always)
    private static func record(_ delivery: Delivery, _ metrics: LoopMetrics) {
        guard case .event(_, .message(let message)) = delivery, message.offset > 0 else { return }
        metrics.fannedOut(acceptedMillis: message.timestampMillis)
    }
}

/// A door's connection that can say goodbye when the server stops.
protocol GracefulSession: AnyObject {
    /// Tell the peer the server is going away, then close after flushing.
    func serverIsStopping()
}

/// Encodes room events for each door, once per event per loop.
enum RoomEventEncoding {
    static func encode(_ format: WireFormat, _ room: RoomKey, _ event: RoomEvent,
                       socketChat: SocketChatFanOut? = nil) -> IOBuffer? {
        // Only the ``DoorFormat``s exist (each `WireFormat` constant is made from one).
        guard let door = DoorFormat(rawValue: format.rawValue) else { return nil }
        return switch door {
        case .line: LineEncoding.encode(event)
        // Join/leave only for `observable-*` rooms here, while the line door announces them
        // in its lobby whatever its name: the decision is per format.
        case .native: NativeEncoding.encode(event, in: room)
        // The Socket.IO door's one application with room events: SocketChat.
        case .socketIO, .socketIOPolling: socketChat?.encode(format, room, event)
        }
    }
}
