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

/// What one event loop of a server knows: its sessions and their rooms. One per loop, owned
/// by the server (``ServerCore/loopContexts``); loop-confined.
final class LoopContext {
    let loopHub: LoopHub<IOBuffer>

    /// `encoders`: the doors' per-loop encoders for this loop (``DoorSet/encoders``).
    init(encoders: LoopEncoders) {
        loopHub = LoopHub { format, room, event in RoomEventEncoding.encode(format, room, event, encoders: encoders) }
    }
}

/// The hub's deliveries for one loop: queued to it, handled there in order. A stored
/// message's fan-out time on this loop is recorded once it has been written to every
/// subscriber here (one clock read per message per loop).
final class LoopInbox: Inbox {
    let loop: EventLoop
    let metrics: LoopMetrics
    private let contexts: LoopLocal<LoopContext>
    init(loop: EventLoop, contexts: LoopLocal<LoopContext>, metrics: LoopMetrics) {
        self.loop = loop
        self.contexts = contexts
        self.metrics = metrics
    }

    func post(_ delivery: Delivery) {
        let (loop, metrics, contexts) = (self.loop, self.metrics, self.contexts)
        loop.execute {
            contexts[loop].loopHub.handle(delivery)
            Self.record(delivery, metrics)
        }
    }

    func post(_ delivery: Delivery, completing backlog: RoomBacklog) {
        let (loop, metrics, contexts) = (self.loop, self.metrics, self.contexts)
        loop.execute {
            contexts[loop].loopHub.handle(delivery)
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
    static func encode(_ format: WireFormat, _ room: RoomKey, _ event: RoomEvent, encoders: LoopEncoders?) -> IOBuffer? {
        // Only the ``DoorFormat``s exist (each `WireFormat` constant is made from one).
        guard let door = DoorFormat(rawValue: format.rawValue) else { return nil }
        return switch door {
        case .line: LineEncoding.encode(event, transcript: encoders?.line)
        // Join/leave only for `observable-*` rooms here, while the line door announces them
        // in its lobby whatever its name: the decision is per format.
        case .native: NativeEncoding.encode(event, in: room)
        // The Socket.IO door's one application with room events: SocketChat.
        case .socketIO, .socketIOPolling: encoders?.socketChat.encode(format, room, event)
        }
    }
}
