import ParleyCore
import ParleyIO
import ParleyWebSocket

/// A WebSocket connection of an Engine.IO door: decodes frames and hands packet texts to
/// the session's loop; writes the frames the session sends.
final class EngineIOWebSocketHandler: ConnectionHandler, GracefulSession {
    let connection: TCPConnection
    let core: ServerCore
    let version: EngineIOVersion
    let owner: EventLoop
    let sid: String
    private let machine: WebSocketProtocolMachine
    /// This connection's place at the gate (its session's policy lives with the session).
    private let sessionGuard: SessionGuard

    enum Inbound: Sendable { case text(String), binary([UInt8]) }

    init(connection: TCPConnection, core: ServerCore, configuration: WebSocketConfiguration,
         version: EngineIOVersion, owner: EventLoop, sid: String, sessionGuard: SessionGuard) {
        self.connection = connection
        self.sessionGuard = sessionGuard
        self.core = core
        self.version = version
        self.owner = owner
        self.sid = sid
        machine = WebSocketProtocolMachine(role: .server, configuration: configuration, deflate: nil)
    }

    private var link: WebSocketLink { WebSocketLink(loop: connection.loop, connectionID: connection.id) }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        for action in machine.receive(bytes) {
            guard connection.state == .open else { return }
            switch action {
            // After our close frame, what the client still sends is dropped.
            case .text(let text): if machine.state == .open { forward(.text(text)) }
            case .binary(let bytes): if machine.state == .open { forward(.binary(bytes)) }
            case .send(let bytes): connection.write(bytes)
            case .closeConnection:
                if machine.failureCode == .messageTooBig {
                    // Over maxPayload: the session ends too, as an oversized POST ends it.
                    core.limits.breached(.messageSize)
                    let owner = self.owner, sid = self.sid, link = self.link
                    owner.executeNowOrSoon { EngineIOLoop.of(owner).sessions[sid]?.webSocketFailed(link, reason: "payload too large") }
                }
                connection.close()
            case .peerClosed: break
            }
        }
    }

    private func forward(_ message: Inbound) {
        let owner = self.owner, sid = self.sid, link = self.link
        owner.executeNowOrSoon { EngineIOLoop.of(owner).sessions[sid]?.webSocketReceived(message, from: link) }
    }

    func write(_ frames: IOBuffer) {
        guard machine.state == .open else { return }
        connection.write(frames)
    }

    /// Sends a close frame, then waits for the client's (``TCPConnection/closeAfterClosingHandshake()``).
    /// When the server stops it closes at once (`waitForPeer: false`).
    func close(_ code: WebSocketCloseCode, reason: String, waitForPeer: Bool = true) {
        for case .send(let bytes) in machine.close(code: code, reason: reason) { connection.write(bytes) }
        if waitForPeer { connection.closeAfterClosingHandshake() } else { connection.close() }
    }

    func serverIsStopping() { close(.goingAway, reason: "server shutting down", waitForPeer: false) }

    /// Publisher back-pressure: this connection is not read until `backlog` drains.
    func throttle(by backlog: RoomBacklog) {
        guard connection.state == .open else { return }
        sessionGuard.throttle(by: backlog, reading: connection)
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        EngineIOLoop.of(connection.loop).webSockets.removeValue(forKey: connection.id)
        let owner = self.owner, sid = self.sid, link = self.link
        owner.executeNowOrSoon { EngineIOLoop.of(owner).sessions[sid]?.webSocketClosed(link) }
        sessionGuard.end(closing: connection, reason: reason)
    }
}
