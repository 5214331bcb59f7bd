import ParleyCore
import ParleyHTTP
import ParleyIO

/// One door of the server as the node sees it. The node binds, stops and measures every door
/// through this and names none of them: the doors are made once per server, in
/// ``DoorRegistry``, and hold their own state (per loop too: ``LoopLocal``). Every
/// requirement must be written (there are no defaults), so a new door that forgets one does
/// not compile.
protocol Door: AnyObject, Sendable {
    /// Names the door in logs and metrics.
    var kind: DoorKind { get }
    /// Binds the door's own port; nil for a door reached through another door's port (the
    /// Socket.IO door answers on the HTTP port's `/socket.io/`).
    func listen(_ core: ServerCore, group: EventLoopGroup) throws(IOError) -> TCPListener?
    /// On each loop as the server stops, before its connections are told: what the door
    /// keeps without a connection of its own (Engine.IO long-polling sessions).
    func serverIsStopping(_ core: ServerCore, on loop: EventLoop)
    /// The door's own lines in `/metrics`.
    func writeMetrics(_ core: ServerCore, into out: inout PrometheusText)
    /// The door's own fields in the admin API's status object (`GET /admin/status`).
    func writeStatus(into w: inout JSONWriter)
    /// The server has stopped: end what the door runs on its own (a poll of Redis).
    func stop()
}

/// A door that answers on paths of the HTTP door's port (Socket.IO at `/socket.io/`). The
/// HTTP door hands it every request, upgrade and closed connection on its paths, and names
/// no such door: it asks ``DoorSet/mounted(at:core:)``.
protocol HTTPMountedDoor: Door {
    /// Whether `path` is this door's.
    func handles(_ path: String, core: ServerCore) -> Bool
    /// Answers (now or later) one request on the door's path.
    func handle(_ head: HTTPRequestHead, body: [UInt8], connection: TCPConnection, keepAlive: Bool, core: ServerCore)
    /// Returns true when the connection now belongs to the door (which takes over the HTTP
    /// connection's place at the gate, and its guard).
    func upgrade(_ head: HTTPRequestHead, leftover: [UInt8], connection: TCPConnection, core: ServerCore,
                 from httpGuard: SessionGuard) -> Bool
    /// The HTTP parser refused a request on the door's path as too large. Returns true when
    /// the request is to get no answer (the caller closes the connection instead of a 413).
    func requestTooLarge(_ head: HTTPRequestHead, core: ServerCore) -> Bool
    /// A connection of the HTTP door closed (whatever it carried).
    func connectionClosed(_ connection: TCPConnection, core: ServerCore)
}

/// What a door's sessions find per loop for the room events of their formats: the
/// per-loop encoders of the doors whose ``DoorFormat`` needs state (see
/// ``RoomEventEncoding``).
struct LoopEncoders {
    /// SocketChat's lobby mirror on this loop (the Socket.IO formats).
    let socketChat: SocketChatFanOut
    /// The line door's transcript of the lobby on this loop (the line format).
    let line: LineTranscript
}

/// The doors of one server, as ``DoorRegistry`` made them.
struct DoorSet: Sendable {
    let all: [any Door]
    /// The doors on the HTTP port's paths.
    let mounted: [any HTTPMountedDoor]
    /// The per-loop encoders, on that loop.
    let encoders: @Sendable (EventLoop) -> LoopEncoders

    /// The door that answers `path` on the HTTP port, if any.
    func mounted(at path: String, core: ServerCore) -> (any HTTPMountedDoor)? {
        mounted.first { $0.handles(path, core: core) }
    }
}
