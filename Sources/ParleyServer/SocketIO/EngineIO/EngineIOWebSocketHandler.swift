import ParleyCore
import ParleyIO
import ParleyWebSocket

/// A WebSocket connection of an Engine.IO door: hands the messages of its
/// ``WebSocketServerConnection`` as packet texts to the session's loop; writes the frames
/// the session sends.
final class EngineIOWebSocketHandler: WebSocketServerDelegate {
    let webSocket: WebSocketServerConnection
    let core: ServerCore
    /// Every loop's Engine.IO state (the door's).
    let loops: LoopLocal<EngineIOLoop>
    let version: EngineIOVersion
    let owner: EventLoop
    let sid: String
    /// This connection's place at the gate (its session's policy lives with the session).
    private let sessionGuard: SessionGuard

    enum Inbound: Sendable { case text(String), binary([UInt8]) }

    /// A handler on `webSocket`, which the caller then opens with it as delegate.
    init(webSocket: WebSocketServerConnection, core: ServerCore, loops: LoopLocal<EngineIOLoop>, version: EngineIOVersion,
         owner: EventLoop, sid: String, sessionGuard: SessionGuard) {
        self.webSocket = webSocket
        self.loops = loops
        self.sessionGuard = sessionGuard
        self.core = core
        self.version = version
        self.owner = owner
        self.sid = sid
    }

    private var connection: TCPConnection { webSocket.connection }
    private var link: WebSocketLink { WebSocketLink(loop: connection.loop, connectionID: connection.id, loops: loops) }

    func webSocket(_ socket: WebSocketServerConnection, didReceive kind: WebSocketMessageKind, payload: UnsafeRawBufferPointer) {
        switch kind {
        case .text: forward(.text(String(decoding: payload, as: UTF8.self)))
        case .binary: forward(.binary(Array(payload)))
        }
    }

    func webSocket(_ socket: WebSocketServerConnection, didFail code: WebSocketCloseCode) {
        guard code == .messageTooBig else { return }
        // Over maxPayload: the session ends too, as an oversized POST ends it.
        core.limits.breached(.messageSize)
        let owner = self.owner, sid = self.sid, link = self.link, loops = self.loops
        owner.executeNowOrSoon { loops[owner].sessions[sid]?.webSocketFailed(link, reason: "payload too large") }
    }

    private func forward(_ message: Inbound) {
        let owner = self.owner, sid = self.sid, link = self.link, loops = self.loops
        owner.executeNowOrSoon { loops[owner].sessions[sid]?.webSocketReceived(message, from: link) }
    }

    /// Frames encoded by the session (Engine.IO never negotiates deflate: written as they are).
    func write(_ frames: IOBuffer) {
        webSocket.sendPreEncoded(frames)
    }

    /// Sends a close frame, then waits for the client's (``WebSocketServerConnection/close(_:reason:waitForPeer:)``).
    func close(_ code: WebSocketCloseCode, reason: String) {
        webSocket.close(code, reason: reason)
    }

    /// Publisher back-pressure: this connection is not read until `backlog` drains.
    func throttle(by backlog: RoomBacklog) {
        guard connection.state == .open else { return }
        sessionGuard.throttle(by: backlog, reading: connection)
    }

    func webSocketDidClose(_ socket: WebSocketServerConnection, close: WebSocketServerClose) {
        let connection = socket.connection
        loops[connection.loop].webSockets.removeValue(forKey: connection.id)
        let owner = self.owner, sid = self.sid, link = self.link, loops = self.loops
        owner.executeNowOrSoon { loops[owner].sessions[sid]?.webSocketClosed(link) }
        sessionGuard.end(closing: connection, reason: close.connection)
    }
}
