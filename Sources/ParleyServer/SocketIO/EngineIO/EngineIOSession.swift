import Foundation
import ParleyCore
import ParleyIO

/// One Engine.IO session (one sid): the handshake, heartbeats, the outbox of a polling
/// session and the switch to WebSocket (EngineIOSession+Transports.swift). It knows nothing
/// of what its messages mean: they go up to its ``EngineIOSessionHandler``.
///
/// Lives on one loop (see EngineIOLoop.swift); its transports (held polling requests, a
/// WebSocket) may be on other loops.
final class EngineIOSession: EngineIOMessageChannel {
    let core: ServerCore
    let loop: EventLoop
    let version: EngineIOVersion
    /// The session id: it authorizes polling, so it is never shown to others.
    let sid: String
    let registry: EngineIOSessionRegistry
    /// Set once at open; dropped at close so the layers above can go.
    var handler: (any EngineIOSessionHandler)?

    // The transports (EngineIOSession+Transports.swift).
    var webSocket: WebSocketLink?
    var probe: WebSocketLink?
    var heldPoll: HTTPReplyTarget?
    var outbox = EngineIOOutbox()
    var flushScheduled = false
    /// Until the open packet is out, everything sent waits in the outbox, so that it follows
    /// the open packet on either transport.
    var opening = true
    private(set) var isClosed = false

    private var heartbeat: EngineIOHeartbeat
    private var pingTimer: LoopTimer?
    private var timeoutTimer: LoopTimer?
    /// The connection policy's share of this session (EngineIOSession+ConnectionPolicy.swift).
    let sessionGuard: SessionGuard
    /// The IP address of the connection that opened the session (bans, the admin API).
    var remoteIP: String?

    var transport: EngineIOTransport { webSocket == nil ? .polling : .webSocket }

    private init(core: ServerCore, loop: EventLoop, version: EngineIOVersion, webSocket: WebSocketLink?,
                 registry: EngineIOSessionRegistry) {
        self.core = core
        self.loop = loop
        self.version = version
        self.webSocket = webSocket
        self.registry = registry
        sid = EngineIOSession.randomID()
        sessionGuard = SessionGuard(DoorPolicy(.socketIO, core.configuration), loop: loop, core: core, ticket: nil)
        heartbeat = EngineIOHeartbeat(version: version, intervalMillis: core.configuration.socketIOPingIntervalMillis,
                                      timeoutMillis: core.configuration.socketIOPingTimeoutMillis)
    }

    /// 20 random URL-safe characters.
    static func randomID() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
        return String((0..<20).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }

    /// Creates a session on `loop` (the current one), registers it, and puts the handler
    /// `makeHandler` returns on it. Then send the handshake: ``takeOpeningPayload()`` (a
    /// polling open) or ``sendOpening()`` (a WebSocket-only session).
    static func open(core: ServerCore, loop: EventLoop, version: EngineIOVersion, webSocket: WebSocketLink?,
                     registry: EngineIOSessionRegistry,
                     makeHandler: (EngineIOSession) -> any EngineIOSessionHandler) -> EngineIOSession {
        let session = EngineIOSession(core: core, loop: loop, version: version, webSocket: webSocket, registry: registry)
        EngineIOLoop.of(loop).sessions[session.sid] = session
        registry.register(session.sid, on: loop)
        session.startHeartbeat()
        session.startConnectionPolicy()
        let handler = makeHandler(session)
        session.handler = handler
        handler.engineIOSessionOpened()
        return session
    }

    private var openPacket: EngineIOPacket {
        var w = JSONWriter()
        w.beginObject()
        w.key("sid"); w.writeString(sid)
        w.key("upgrades"); w.write(webSocket == nil ? ["websocket"] : [])
        w.key("pingInterval"); w.writeInt(Int(core.configuration.socketIOPingIntervalMillis))
        w.key("pingTimeout"); w.writeInt(Int(core.configuration.socketIOPingTimeoutMillis))
        if version == .v4 { w.key("maxPayload"); w.writeInt(core.configuration.socketIOMaxPayload) }
        w.endObject()
        return EngineIOPacket(.open, String(decoding: w.bytes, as: UTF8.self))
    }

    /// The open packet, then whatever the handler sent when the session opened.
    private func takeOpeningPackets() -> [EngineIOPacket] {
        opening = false
        return [openPacket] + outbox.takeAll()
    }

    /// The handshake response body of a polling open.
    func takeOpeningPayload() -> [UInt8] { EngineIOPayload.encode(takeOpeningPackets(), version: version) }

    /// The handshake of a WebSocket-only session.
    func sendOpening() { sendPackets(takeOpeningPackets()) }

    // MARK: heartbeat

    private func startHeartbeat() {
        timeoutTimer = LoopTimer(loop: loop)
        if let period = heartbeat.pingPeriodMillis {
            let pingTimer = LoopTimer(loop: loop)
            self.pingTimer = pingTimer
            pingTimer.start(after: period, repeating: period) { [weak self] in
                guard let self, !self.isClosed else { return }
                self.apply(self.heartbeat.pingDue())
            }
        }
        apply(heartbeat.start())
    }

    private func apply(_ actions: [EngineIOHeartbeat.Action]) {
        for action in actions {
            switch action {
            case .sendPing: sendPackets([EngineIOPacket(.ping)])
            case .armTimeout(let millis): timeoutTimer?.start(after: millis) { [weak self] in self?.close(reason: "ping timeout") }
            case .disarmTimeout: timeoutTimer?.stop()
            }
        }
    }

    private func stopHeartbeat() {
        pingTimer?.stop()
        timeoutTimer?.stop()
        pingTimer = nil
        timeoutTimer = nil
    }

    // MARK: sending

    func send(_ messages: [EngineIOMessage]) {
        sendPackets(messages.map { EngineIOPacket(message: $0) })
    }

    func sendPackets(_ packets: [EngineIOPacket]) {
        guard !isClosed, !packets.isEmpty else { return }
        if !opening, let webSocket {
            webSocket.write(EngineIOFrames.webSocket(packets, version: version))
        } else {
            queueAndFlush(packets)
        }
    }

    func sendPreEncoded(_ frames: IOBuffer, as transport: EngineIOTransport) {
        guard !isClosed else { return }
        if transport == .webSocket, let webSocket {
            webSocket.write(frames)
        } else {
            queueAndFlush(EngineIOFrames.packets(inPolling: frames))
        }
    }

    // MARK: receiving

    /// A packet from the client, on either transport.
    func receive(_ packet: EngineIOPacket) {
        apply(heartbeat.received(packet.kind))
        switch packet.kind {
        case .ping:
            // EIO3 heartbeat (and harmless on EIO4): pong with the same data.
            sendPackets([EngineIOPacket(.pong, packet.text ?? "")])
        case .message:
            messageReceived()
            handler?.engineIOSessionReceived(packet.payload)
        case .close:
            close(reason: "client close")
        case .pong, .open, .upgrade, .noop:
            break
        }
    }

    // MARK: closing

    func close(reason: String) {
        guard !isClosed else { return }
        isClosed = true
        stopHeartbeat()
        stopConnectionPolicy()
        registry.unregister(sid)
        EngineIOLoop.of(loop).sessions.removeValue(forKey: sid)
        let handler = self.handler
        self.handler = nil
        handler?.engineIOSessionClosed(reason: reason)
        if let heldPoll {
            self.heldPoll = nil
            heldPoll.send(EngineIODoor.payloadResponse(EngineIOPayload.encode([EngineIOPacket(.close)], version: version)))
        }
        webSocket?.close(.normal, reason: reason)
        probe?.close(.normal, reason: reason)
        webSocket = nil
        probe = nil
    }
}

extension EngineIOPacket {
    /// A message packet carrying `message`.
    init(message: EngineIOMessage) {
        self.init(.message)
        payload = message
    }
}
