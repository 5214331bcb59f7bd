import ParleyCore
import ParleyHTTP
import ParleyIO
import Synchronization

// The Socket.IO door in three layers, each talking only to the one below:
//  - EngineIO/: Engine.IO 3 and 4 (sessions, polling and WebSocket, upgrade, heartbeats,
//    payloads); it hands message packets up to an `EngineIOSessionHandler`.
//  - Protocol/: Socket.IO (packets, namespaces, CONNECT / DISCONNECT, acks, binary
//    attachments); `SocketIOConnection` is the Engine.IO handler and hands events up to a
//    `SocketIOApplication`.
//  - SocketChat/: the SocketChat event set, the application on `/socket.io/`.
// Adding an event set is one new `SocketIOApplication`, chosen in `SocketIODoor.engineIO`.

/// What every loop's Socket.IO door shares: its Engine.IO sessions, the SocketChat roster.
final class SocketIOShared: Sendable {
    /// Which loop owns each session of `/socket.io/`.
    let sessions = EngineIOSessionRegistry()
    let roster = SocketChatRoster()
    private let nextSession = Atomic<UInt64>(0)

    /// A hub session id for a Socket.IO connection (not a TCP connection): the loop in the
    /// top bits like connection ids, bit 47 set so the two never collide.
    func makeSessionID(loop: EventLoop) -> SessionID {
        let n = nextSession.add(1, ordering: .relaxed).newValue
        return (UInt64(loop.index) << 48) | (1 << 47) | n
    }
}

/// The Socket.IO door at `/socket.io/`: Engine.IO 3 and 4 over HTTP long-polling and
/// WebSocket, Socket.IO on each session, SocketChat on Socket.IO. `HTTPSession` hands it
/// every request and upgrade on its path.
enum SocketIODoor {
    static func handles(_ path: String) -> Bool { path == "/socket.io/" || path == "/socket.io" }

    static func handle(_ head: HTTPRequestHead, body: [UInt8], connection: TCPConnection, keepAlive: Bool, core: ServerCore) {
        engineIO(core).handle(head, body: body, connection: connection, keepAlive: keepAlive)
    }

    /// Returns true when the connection now belongs to a WebSocket handler (which takes over
    /// the HTTP connection's place at the gate).
    static func upgrade(_ head: HTTPRequestHead, leftover: [UInt8], connection: TCPConnection, core: ServerCore,
                        from httpGuard: SessionGuard) -> Bool {
        engineIO(core).upgrade(head, leftover: leftover, connection: connection, from: httpGuard)
    }

    /// A connection of the HTTP door closed: a held poll on it is gone.
    static func connectionClosed(_ connection: TCPConnection, core: ServerCore) {
        EngineIODoor.connectionClosed(connection)
    }

    /// The layers on each new session: Socket.IO, and the SocketChat application on it.
    private static func engineIO(_ core: ServerCore) -> EngineIODoor {
        EngineIODoor(core: core, sessions: core.socketIO.sessions) { session in
            SocketIOConnection(channel: session, application: SocketChatApplication(core: core, engineIO: session))
        }
    }
}
