import ParleyCore
import ParleyHTTP
import ParleyIO
import ParleyWebSocket
import Synchronization

// Cross-loop design. An Engine.IO session (one sid) lives on ONE loop for life: the loop of
// the connection that opened it. Its timers, outbox and everything above it (Socket.IO, the
// application, its hub subscription) are loop-confined there, like every other session.
// Later polling requests and the WebSocket of an upgrade arrive on connections that may live
// on another loop, and a TCPConnection cannot move. So:
//  - `EngineIOSessionRegistry` is a Mutex-protected sid → owning loop map, one per door
//    (looked up once per request; never held while doing I/O).
//  - A polling request on loop A for a session on loop B is handed to B with
//    `B.executeNowOrSoon { ... }` carrying only Sendable values: the body bytes and an
//    `HTTPReplyTarget` (loop A + connection id). B decides the response (at once for a POST,
//    later for a held GET) and sends it back with `A.executeNowOrSoon`, where A looks the
//    connection up in its loop-local table and writes it. A connection that closes meanwhile
//    tells B (`pollAborted`), so a held GET never swallows packets.
//  - A WebSocket on loop A for a session on loop B is a thin pipe: A decodes frames and
//    forwards packet texts to B; B sends ready-made frames (`IOBuffer`, Sendable and shared
//    by the room fan-out) back to A. On one loop both hops are plain calls (`executeNowOrSoon`).

/// Which loop owns each Engine.IO session of one door.
final class EngineIOSessionRegistry: Sendable {
    private let owners = Mutex<[String: EventLoop]>([:])

    func owner(of sid: String) -> EventLoop? { owners.withLock { $0[sid] } }
    func register(_ sid: String, on loop: EventLoop) { owners.withLock { $0[sid] = loop } }
    func unregister(_ sid: String) { owners.withLock { _ = $0.removeValue(forKey: sid) } }
    var count: Int { owners.withLock { $0.count } }
}

/// A connection waiting for a polling response, on the loop it lives on.
struct HTTPReplyTarget: Sendable {
    let loop: EventLoop
    let connectionID: UInt64
    let keepAlive: Bool
    let origin: String?
    /// Every loop's Engine.IO state (the door's), where the connection waits.
    let loops: LoopLocal<EngineIOLoop>

    func same(as other: HTTPReplyTarget) -> Bool { loop.index == other.loop.index && connectionID == other.connectionID }

    /// Writes `response` (with CORS headers) on the target's loop.
    func send(_ response: HTTPResponse) {
        let target = self
        loop.executeNowOrSoon {
            guard let connection = target.loops[target.loop].waiting.removeValue(forKey: target.connectionID)?.connection,
                  connection.state == .open else { return }
            var response = response
            EngineIODoor.addCORS(&response, origin: target.origin)
            connection.write(response.encoded(keepAlive: target.keepAlive))
            if !target.keepAlive { connection.close() }
        }
    }
}

/// The WebSocket of a session, on the loop it lives on.
struct WebSocketLink: Sendable {
    let loop: EventLoop
    let connectionID: UInt64
    /// Every loop's Engine.IO state (the door's), where the WebSocket is.
    let loops: LoopLocal<EngineIOLoop>

    func same(as other: WebSocketLink) -> Bool { loop.index == other.loop.index && connectionID == other.connectionID }

    func write(_ frames: IOBuffer) {
        let link = self
        loop.executeNowOrSoon { link.loops[link.loop].webSockets[link.connectionID]?.write(frames) }
    }

    func close(_ code: WebSocketCloseCode = .normal, reason: String = "") {
        let link = self
        loop.executeNowOrSoon { link.loops[link.loop].webSockets[link.connectionID]?.close(code, reason: reason) }
    }

    /// Stops reading the WebSocket until `backlog` is back under its low mark (publisher
    /// back-pressure; the connection lives on the link's loop).
    func throttle(by backlog: RoomBacklog) {
        let link = self
        loop.executeNowOrSoon { link.loops[link.loop].webSockets[link.connectionID]?.throttle(by: backlog) }
    }
}

/// Engine.IO's state on one loop, shared by the server's Engine.IO doors (sids are random,
/// and each door checks its own registry first). One per loop, owned by the Socket.IO door
/// (``SocketIOShared/loops``). Loop thread only.
final class EngineIOLoop {
    var sessions: [String: EngineIOSession] = [:]
    var webSockets: [UInt64: EngineIOWebSocketHandler] = [:]
    /// A polling request waiting for its answer: the connection, and the session's loop.
    final class Waiter {
        weak var connection: TCPConnection?
        let sid: String
        let owner: EventLoop
        init(_ connection: TCPConnection, sid: String, owner: EventLoop) {
            self.connection = connection
            self.sid = sid
            self.owner = owner
        }
    }
    var waiting: [UInt64: Waiter] = [:]

    /// Ends every session on this loop (the server is stopping: polling sessions hold places
    /// at the gate that no connection would give back).
    func closeAllSessions(reason: String) {
        for session in Array(sessions.values) { session.end(reason: reason) }
    }
}
