import ParleyCore
import ParleyIO
import Synchronization

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
        loopHub = LoopHub(encode: { format, room, event in RoomEventEncoding.encode(format, room, event, encoders: encoders) },
                          join: IOBuffer.init(joining:))
    }
}

/// The hub's deliveries for one loop: queued to it, handled there in order. A stored
/// message's fan-out time on this loop is recorded once it has been written to every
/// subscriber here (one clock read per message per loop).
///
/// Deliveries wait in the inbox's own queue, and one loop task takes everything queued when
/// it runs: a group commit's deliveries cost one task, not one closure each, and a busy
/// room's consecutive messages reach each subscriber in one write (``LoopHub/handle(_:)``).
/// Deliveries keep their order among themselves; a loop task submitted by other means
/// between two of them may run after both.
final class LoopInbox: Inbox {
    let loop: EventLoop
    let metrics: LoopMetrics
    private let contexts: LoopLocal<LoopContext>
    private struct Queue {
        var deliveries: [Delivery] = []
        var backlogs: [RoomBacklog?] = []
        /// A drain task is on the loop's queue: posts until it runs need none of their own.
        var scheduled = false
        /// The buffers the last drain emptied, kept for the next (a drain allocates nothing).
        var spare: ([Delivery], [RoomBacklog?]) = ([], [])
    }
    private let queue = Mutex(Queue())

    init(loop: EventLoop, contexts: LoopLocal<LoopContext>, metrics: LoopMetrics) {
        self.loop = loop
        self.contexts = contexts
        self.metrics = metrics
    }

    func post(_ delivery: Delivery) { enqueue(delivery, nil) }

    func post(_ delivery: Delivery, completing backlog: RoomBacklog) { enqueue(delivery, backlog) }

    private func enqueue(_ delivery: Delivery, _ backlog: RoomBacklog?) {
        let schedule = queue.withLock { queue -> Bool in
            queue.deliveries.append(delivery)
            queue.backlogs.append(backlog)
            if queue.scheduled { return false }
            queue.scheduled = true
            return true
        }
        // A loop that stopped takes no task: what waits is dropped (and finished, for the
        // rooms' backlogs), and the next post tries again.
        if schedule, !loop.tryExecute({ [self] in drain() }) {
            let dropped = queue.withLock { queue -> [RoomBacklog?] in
                queue.scheduled = false
                queue.deliveries.removeAll()
                defer { queue.backlogs.removeAll() }
                return queue.backlogs
            }
            for backlog in dropped { backlog?.done() }
        }
    }

    /// On the loop: everything queued, in order.
    private func drain() {
        var (deliveries, backlogs) = queue.withLock { queue -> ([Delivery], [RoomBacklog?]) in
            var taken = queue.spare
            queue.spare = ([], [])
            swap(&taken.0, &queue.deliveries)
            swap(&taken.1, &queue.backlogs)
            queue.scheduled = false
            return taken
        }
        contexts[loop].loopHub.handle(deliveries)
        for delivery in deliveries { Self.record(delivery, metrics) }
        for backlog in backlogs { backlog?.done() }
        let keep = deliveries.capacity <= Self.spareCapacity
        deliveries.removeAll(keepingCapacity: keep)
        backlogs.removeAll(keepingCapacity: keep)
        queue.withLock { queue in
            if queue.spare.0.capacity == 0 { queue.spare = (deliveries, backlogs) }
        }
    }

    /// Most deliveries a drained buffer keeps room for (a bigger one, after a burst, is freed).
    static let spareCapacity = 16_384

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
