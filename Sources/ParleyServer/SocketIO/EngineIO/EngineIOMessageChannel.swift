import ParleyCore
import ParleyIO

/// A message packet's payload: what Engine.IO carries for the layer above it.
typealias EngineIOMessage = EngineIOPacket.Payload

/// The transport an Engine.IO session's packets travel on now.
enum EngineIOTransport: Sendable, Equatable {
    /// HTTP long-polling: packets wait in the session's outbox for the next GET.
    case polling
    /// One WebSocket: each packet is one frame.
    case webSocket
}

/// An Engine.IO session as the layers above see it: a channel of message packets. The
/// Socket.IO layer talks to it only through this protocol (so it can be tested with a fake);
/// an application with room events hands it its pre-encoded frames directly.
/// Loop-confined: call it on ``loop`` only.
protocol EngineIOMessageChannel: AnyObject {
    var version: EngineIOVersion { get }
    /// The loop the session lives on (answers that come from other threads hop here).
    var loop: EventLoop { get }
    var transport: EngineIOTransport { get }
    var isClosed: Bool { get }
    /// Sends message packets, in order (dropped once closed).
    func send(_ messages: [EngineIOMessage])
    /// Sends message packets encoded once for many sessions (see ``EngineIOFrames/preEncoded(_:for:)``),
    /// `frames` being the form for `transport`: the room fan-out path, which must stay cheap.
    func sendPreEncoded(_ frames: IOBuffer, as transport: EngineIOTransport)
    /// Ends the session (the peer sees a close packet or its WebSocket close).
    func close(reason: String)
    /// Publisher back-pressure: the peer just published to a room with this backlog; when it
    /// is over its high mark, the peer is slowed (not read) until it drains.
    func throttle(by backlog: RoomBacklog?)
}

/// What sits on an Engine.IO session and receives its messages: the Socket.IO layer (or,
/// for diagnostics, anything that speaks plain Engine.IO). Made once per session, on its loop.
protocol EngineIOSessionHandler: AnyObject {
    /// The session is open. Messages sent now go out with the handshake, right after the open
    /// packet.
    func engineIOSessionOpened()
    /// A message packet from the peer (heartbeats, upgrades and noops stay below).
    func engineIOSessionReceived(_ message: EngineIOMessage)
    /// The session has ended (it is already closed: nothing more can be sent). Called once.
    func engineIOSessionClosed(reason: String)
}
