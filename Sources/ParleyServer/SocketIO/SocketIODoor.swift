import Foundation
import ParleyCore
import ParleyHTTP
import ParleyIO
import ParleyWebSocket
import Synchronization

// Cross-loop design. An Engine.IO session (one sid) lives on ONE loop for life: the loop of
// the connection that opened it. Its hub subscription, timers and queue are loop-confined
// there, like every other session. Later polling requests and the WebSocket of an upgrade
// arrive on connections that may live on another loop, and a TCPConnection cannot move. So:
//  - `SocketIOShared.sessions` is a Mutex-protected sid → owning loop map (looked up once
//    per request; never held while doing I/O).
//  - A polling request on loop A for a session on loop B is handed to B with
//    `B.executeSoon { ... }` carrying only Sendable values: the body bytes and an
//    `HTTPReplyTarget` (loop A + connection id). B decides the response (at once for a POST,
//    later for a held GET) and sends it back with `A.executeSoon`, where A looks the
//    connection up in its loop-local table and writes it. A connection that closes meanwhile
//    tells B (`pollAborted`), so a held GET never swallows packets.
//  - A WebSocket on loop A for a session on loop B is a thin pipe: A decodes frames and
//    forwards packet texts to B; B sends ready-made frames (`IOBuffer`, Sendable and shared
//    by the room fan-out) back to A. On one loop both hops are plain calls (`executeSoon`).

/// What every loop's Socket.IO door shares: which loop owns each sid, the SocketChat roster.
final class SocketIOShared: Sendable {
    let roster = SocketChatRoster()
    private let owners = Mutex<[String: EventLoop]>([:])
    private let nextSession = Atomic<UInt64>(0)

    func owner(of sid: String) -> EventLoop? { owners.withLock { $0[sid] } }
    func register(_ sid: String, on loop: EventLoop) { owners.withLock { $0[sid] = loop } }
    func unregister(_ sid: String) { owners.withLock { _ = $0.removeValue(forKey: sid) } }
    var sessionCount: Int { owners.withLock { $0.count } }

    /// A hub session id for a Socket.IO session (not a connection): the loop in the top
    /// bits like connection ids, bit 47 set so the two never collide.
    func makeSessionID(loop: EventLoop) -> SessionID {
        let n = nextSession.add(1, ordering: .relaxed).newValue
        return (UInt64(loop.index) << 48) | (1 << 47) | n
    }
}

/// A connection waiting for a polling response, on the loop it lives on.
struct HTTPReplyTarget: Sendable {
    let loop: EventLoop
    let connectionID: UInt64
    let keepAlive: Bool
    let origin: String?

    func same(as other: HTTPReplyTarget) -> Bool { loop.index == other.loop.index && connectionID == other.connectionID }

    /// Writes `response` (with CORS headers) on the target's loop.
    func send(_ response: HTTPResponse) {
        let target = self
        loop.executeSoon {
            guard let connection = SocketIOLoop.of(target.loop).waiting.removeValue(forKey: target.connectionID)?.connection,
                  connection.state == .open else { return }
            var response = response
            SocketIODoor.addCORS(&response, origin: target.origin)
            connection.write(response.encoded(keepAlive: target.keepAlive))
            if !target.keepAlive { connection.close() }
        }
    }
}

/// The WebSocket of a session, on the loop it lives on.
struct WebSocketLink: Sendable {
    let loop: EventLoop
    let connectionID: UInt64

    func same(as other: WebSocketLink) -> Bool { loop.index == other.loop.index && connectionID == other.connectionID }

    func write(_ frames: IOBuffer) {
        let link = self
        loop.executeSoon { SocketIOLoop.of(link.loop).webSockets[link.connectionID]?.write(frames) }
    }

    func close(_ code: WebSocketCloseCode = .normal, reason: String = "") {
        let link = self
        loop.executeSoon { SocketIOLoop.of(link.loop).webSockets[link.connectionID]?.close(code, reason: reason) }
    }
}

/// The door's loop-local state. Loop thread only.
final class SocketIOLoop {
    var sessions: [String: SocketIOSession] = [:]
    var webSockets: [UInt64: SocketIOWebSocketHandler] = [:]
    final class Waiter { weak var connection: TCPConnection?; let sid: String
        init(_ connection: TCPConnection, sid: String) { self.connection = connection; self.sid = sid } }
    var waiting: [UInt64: Waiter] = [:]

    static func of(_ loop: EventLoop) -> SocketIOLoop { loop.local(SocketIOLoop.self) { SocketIOLoop() } }
}

/// The Socket.IO door (protocols.md §2) at `/socket.io/`: Engine.IO 3 and 4 over HTTP
/// long-polling and WebSocket. `HTTPSession` hands it every request and upgrade on its path.
enum SocketIODoor {
    static func handles(_ path: String) -> Bool { path == "/socket.io/" || path == "/socket.io" }

    static func webSocketConfiguration(_ configuration: ServerConfiguration) -> WebSocketConfiguration {
        WebSocketConfiguration(maxMessageSize: configuration.socketIOMaxPayload, maxFrameSize: configuration.socketIOMaxPayload,
                               offersDeflate: false, acceptsDeflate: false)
    }

    /// CORS for browser pages on other origins: echo the Origin, allow credentials.
    static func addCORS(_ response: inout HTTPResponse, origin: String?) {
        guard let origin else { return }
        response.headers.set("Access-Control-Allow-Origin", origin)
        response.headers.set("Access-Control-Allow-Credentials", "true")
        response.headers.set("Vary", "Origin")
    }

    static func errorResponse(_ status: Int, code: Int, _ message: String) -> HTTPResponse {
        var w = JSONWriter()
        w.beginObject()
        w.key("code"); w.writeInt(code)
        w.key("message"); w.writeString(message)
        w.endObject()
        return .json(status, w.bytes)
    }

    static func payloadResponse(_ bytes: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: 200, headers: ["Content-Type": "text/plain; charset=UTF-8", "Cache-Control": "no-store"], body: bytes)
    }

    // MARK: polling

    /// Answers (now or later) one request on `/socket.io/`.
    static func handle(_ head: HTTPRequestHead, body: [UInt8], connection: TCPConnection, keepAlive: Bool, core: ServerCore) {
        let origin = head.headers["Origin"]
        func reply(_ response: HTTPResponse) {
            var response = response
            addCORS(&response, origin: origin)
            connection.write(response.encoded(keepAlive: keepAlive))
            if !keepAlive { connection.close() }
        }
        if head.method == "OPTIONS" {
            var response = HTTPResponse(status: 204)
            response.headers.set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
            response.headers.set("Access-Control-Allow-Headers", head.headers["Access-Control-Request-Headers"] ?? "Content-Type")
            response.headers.set("Access-Control-Max-Age", "86400")
            return reply(response)
        }
        guard let version = EngineIOVersion(query: head.query("EIO")) else {
            return reply(errorResponse(400, code: 5, "Unsupported protocol version (EIO must be 3 or 4)"))
        }
        guard head.query("transport") == "polling" else {
            if head.query("transport") == "websocket" {
                return reply(errorResponse(400, code: 3, "Bad request: websocket transport needs an Upgrade"))
            }
            return reply(errorResponse(400, code: 0, "Transport unknown"))
        }
        guard head.method == "GET" || head.method == "POST" else {
            return reply(errorResponse(400, code: 2, "Bad handshake method"))
        }
        guard let sid = head.query("sid") else {
            guard head.method == "GET" else { return reply(errorResponse(400, code: 1, "Session ID unknown")) }
            let session = SocketIOSession.open(core: core, loop: connection.loop, version: version, webSocket: nil)
            return reply(payloadResponse(session.takeOpeningPayload()))
        }
        guard let owner = core.socketIO.owner(of: sid) else {
            return reply(errorResponse(400, code: 1, "Session ID unknown"))
        }
        guard body.count <= core.configuration.socketIOMaxPayload else {
            core.limits.breached(.messageSize)
            return reply(.text(413, "payload too large (limit \(core.configuration.socketIOMaxPayload) bytes)\n"))
        }
        SocketIOLoop.of(connection.loop).waiting[connection.id] = SocketIOLoop.Waiter(connection, sid: sid)
        let target = HTTPReplyTarget(loop: connection.loop, connectionID: connection.id, keepAlive: keepAlive, origin: origin)
        let isGet = head.method == "GET"
        owner.executeSoon {
            guard let session = SocketIOLoop.of(owner).sessions[sid], session.version == version else {
                return target.send(errorResponse(400, code: 1, "Session ID unknown"))
            }
            if isGet { session.poll(target) } else { session.post(body, target) }
        }
    }

    /// A connection of the HTTP door closed: a held poll on it is gone.
    static func connectionClosed(_ connection: TCPConnection, core: ServerCore) {
        let local = connection.loop.local(SocketIOLoop.self) { SocketIOLoop() }
        guard let waiter = local.waiting.removeValue(forKey: connection.id), let owner = core.socketIO.owner(of: waiter.sid) else { return }
        let target = HTTPReplyTarget(loop: connection.loop, connectionID: connection.id, keepAlive: false, origin: nil)
        let sid = waiter.sid
        owner.executeSoon { SocketIOLoop.of(owner).sessions[sid]?.pollAborted(target) }
    }

    // MARK: websocket

    /// Handles an upgrade request on `/socket.io/`. Returns true when the connection now
    /// belongs to a WebSocket handler; otherwise an error was written and the connection closed.
    static func upgrade(_ head: HTTPRequestHead, leftover: [UInt8], connection: TCPConnection, core: ServerCore,
                        from httpGuard: SessionGuard) -> Bool {
        let origin = head.headers["Origin"]
        func refuse(_ response: HTTPResponse) -> Bool {
            var response = response
            addCORS(&response, origin: origin)
            connection.write(response.encoded(keepAlive: false))
            connection.close()
            return false
        }
        guard let version = EngineIOVersion(query: head.query("EIO")) else {
            return refuse(errorResponse(400, code: 5, "Unsupported protocol version (EIO must be 3 or 4)"))
        }
        guard head.query("transport") == "websocket" else { return refuse(errorResponse(400, code: 0, "Transport unknown")) }
        let sid = head.query("sid")
        var owner: EventLoop?
        if let sid {
            owner = core.socketIO.owner(of: sid)
            guard owner != nil else { return refuse(errorResponse(400, code: 1, "Session ID unknown")) }
        }
        let configuration = webSocketConfiguration(core.configuration)
        let headers = head.headers
        let result = WebSocketHandshake.serverResponse(method: head.method, versionMinor: head.versionMinor, header: { name in
            let values = headers.values(name)
            return values.isEmpty ? nil : values.joined(separator: ", ")
        }, configuration: configuration)
        guard case .success(let (responseHeaders, _)) = result else {
            if case .failure(let error) = result {
                var response = HTTPResponse.text(error.status, error.message + "\n")
                for (name, value) in error.headers { response.headers.add(name, value) }
                return refuse(response)
            }
            return false
        }
        var response = HTTPResponse(status: 101, headers: HTTPHeaders(responseHeaders))
        addCORS(&response, origin: origin)
        connection.write(response.encoded(keepAlive: true))
        let link = WebSocketLink(loop: connection.loop, connectionID: connection.id)
        let sessionGuard = SessionGuard(DoorPolicy(.socketIO, core.configuration), loop: connection.loop, core: core, ticket: nil)
        sessionGuard.takeTicket(from: httpGuard)
        let handler: SocketIOWebSocketHandler
        if let sid, let owner {
            handler = SocketIOWebSocketHandler(connection: connection, core: core, configuration: configuration,
                                               version: version, owner: owner, sid: sid, sessionGuard: sessionGuard)
            connection.handler = handler
            SocketIOLoop.of(connection.loop).webSockets[connection.id] = handler
            owner.executeSoon {
                guard let session = SocketIOLoop.of(owner).sessions[sid], session.version == version else {
                    return link.close(.policyViolation, reason: "Session ID unknown")
                }
                session.attachProbe(link)
            }
        } else {
            let session = SocketIOSession.open(core: core, loop: connection.loop, version: version, webSocket: link)
            handler = SocketIOWebSocketHandler(connection: connection, core: core, configuration: configuration,
                                               version: version, owner: connection.loop, sid: session.sid,
                                               sessionGuard: sessionGuard)
            connection.handler = handler
            SocketIOLoop.of(connection.loop).webSockets[connection.id] = handler
            session.sendOpening()
        }
        if !leftover.isEmpty { leftover.withUnsafeBytes { handler.connection(connection, didRead: $0) } }
        return true
    }
}

/// A WebSocket connection of the Socket.IO door: decodes frames and hands packet texts to
/// the session's loop; writes the frames the session sends.
final class SocketIOWebSocketHandler: ConnectionHandler, GracefulSession {
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
            case .text(let text): forward(.text(text))
            case .binary(let bytes): forward(.binary(bytes))
            case .send(let bytes): connection.write(bytes)
            case .closeConnection:
                if machine.failureCode == .messageTooBig { core.limits.breached(.messageSize) }
                connection.close()
            case .peerClosed: break
            }
        }
    }

    private func forward(_ message: Inbound) {
        let owner = self.owner, sid = self.sid, link = self.link
        owner.executeSoon { SocketIOLoop.of(owner).sessions[sid]?.webSocketReceived(message, from: link) }
    }

    func write(_ frames: IOBuffer) {
        guard machine.state == .open else { return }
        connection.write(frames)
    }

    func close(_ code: WebSocketCloseCode, reason: String) {
        for case .send(let bytes) in machine.close(code: code, reason: reason) { connection.write(bytes) }
        connection.close()
    }

    func serverIsStopping() { close(.goingAway, reason: "server shutting down") }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        SocketIOLoop.of(connection.loop).webSockets.removeValue(forKey: connection.id)
        let owner = self.owner, sid = self.sid, link = self.link
        owner.executeSoon { SocketIOLoop.of(owner).sessions[sid]?.webSocketClosed(link) }
        sessionGuard.end()
    }
}
