import ParleyCore
import ParleyIO

/// Wire formats of Parley's doors: a room event is encoded once per format per loop.
extension WireFormat {
    public static let line = WireFormat(1)
    public static let native = WireFormat(2)
    /// Socket.IO over WebSocket: ready-made text frames, one per packet (EIO3 and EIO4 alike).
    public static let socketIO = WireFormat(30)
    /// Socket.IO over long-polling: packet texts joined by `\u{1e}`, framed per session.
    public static let socketIOPolling = WireFormat(31)
}

/// What one event loop knows: its sessions and their rooms. Loop-confined.
final class LoopContext {
    let localHub: LocalHub<IOBuffer>
    /// What the Socket.IO encoding reads (the lobby's user list); set by that door.
    let socketIO: SocketIOEncodingContext

    init() {
        let socketIO = SocketIOEncodingContext()
        self.socketIO = socketIO
        localHub = LocalHub { format, room, event in RoomEventEncoding.encode(format, room, event, socketIO: socketIO) }
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

    func post(_ delivery: Delivery, completing backlog: RoomBacklog) {
        let loop = self.loop
        loop.execute {
            LoopContext.of(loop).localHub.handle(delivery)
            backlog.done()
        }
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
                       socketIO: SocketIOEncodingContext? = nil) -> IOBuffer? {
        switch format {
        case .line: LineEncoding.encode(event)
        // Join/leave only for `observable-*` rooms here, while the line door announces them
        // in its lobby whatever its name: the decision is per format.
        case .native: NativeEncoding.encode(event, in: room)
        case .socketIO, .socketIOPolling: socketIO?.encode(format, room, event)
        default: nil
        }
    }
}

/// The Socket.IO door's input to a loop's encoder: the SocketChat events need the lobby's
/// members and typists, mirrored from the event stream (see ``RoomMirror``) while this loop
/// has Socket.IO sessions in the lobby. Loop-confined like its ``LoopContext``.
final class SocketIOEncodingContext {
    var core: ServerCore?
    private var mirror: RoomMirror?
    private var sessionsInLobby = 0
    /// The last event and its packets: both framings of one event share one encoding and
    /// apply it to the mirror once.
    private var last: (event: RoomEvent, packets: [String])?

    func sessionJoined(_ snapshot: SubscribeSnapshot, core: ServerCore) {
        if sessionsInLobby == 0 || mirror == nil {
            mirror = RoomMirror(members: snapshot.members, typing: core.hub.typingMembers(of: snapshot.room))
            last = nil
        }
        sessionsInLobby += 1
    }

    func sessionLeft() {
        sessionsInLobby = max(0, sessionsInLobby - 1)
        if sessionsInLobby == 0 { mirror = nil }
    }

    func encode(_ format: WireFormat, _ room: RoomKey, _ event: RoomEvent) -> IOBuffer? {
        guard let core, room == core.configuration.lobby else { return nil }
        let packets: [String]
        if let last, last.event == event {
            packets = last.packets
        } else {
            var mirror = self.mirror ?? RoomMirror(members: core.hub.members(of: room), typing: core.hub.typingMembers(of: room))
            if self.mirror != nil { mirror.apply(event) }
            self.mirror = mirror
            packets = SocketIOEncoding.packets(for: event, users: core.socketIO.roster.users(connected: mirror.members),
                                               typing: mirror.typing)
            last = (event, packets)
        }
        return SocketIOEncoding.frame(packets, as: format)
    }
}
