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
    /// The Socket.IO door's shared state: every loop's Engine.IO state, counters, log.
    let shared: SocketIOShared
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
    /// The connection policy's share of this session (EngineIOSession+ConnectionPolicy.swift):
    /// the guard of the WebSocket connection that opened it, or, for a session opened by
    /// long-polling (no connection of its own), one of its own.
    let sessionGuard: SessionGuard
    /// Whether ``sessionGuard`` is the session's own (a polling open) rather than its
    /// connection's, which the connection ends when it closes.
    let ownsGuard: Bool
    /// The IP address of the connection that opened the session (bans, the admin API).
    var remoteIP: String?
    /// A long-polling session's own place at the gate and under the polling cap; given back
    /// when it ends or moves to a WebSocket (whose connection holds a place of its own).
    var admission: AdmissionTicket?
    /// Runs while a polling session has no GET waiting: a client that stops polling is gone
    /// (EngineIOSession+ConnectionPolicy.swift).
    var pollWatch: LoopTimer?
    /// Closes a probe WebSocket that does not finish the upgrade in time.
    var probeTimer: LoopTimer?
    /// A closed polling session's last packets, for the client's next GET.
    var lastPackets: [EngineIOPacket]?
    private var lingerTimer: LoopTimer?

    /// The session is gone for good: its sid is unknown from now on.
    func forget() {
        lastPackets = nil
        lingerTimer?.stop()
        lingerTimer = nil
        registry.unregister(sid)
        if shared.loops[loop].sessions[sid] === self { shared.loops[loop].sessions.removeValue(forKey: sid) }
    }

    /// The probe has answered `3probe`: the client is switching, so a GET is released with a
    /// noop (as engine.io does while an upgrade is under way), after the upgrade settle time.
    var probeAnswered = false
    /// Releases a held GET with a noop once the upgrade has had its settle time.
    var upgradeNoopTimer: LoopTimer?
    /// When the session moved to its WebSocket (`5`): a POST still in flight then is
    /// accepted for ``EngineIOSession/latePostGraceMillis``.
    var upgradedAtMillis: Int64?
    /// WebSocket packets that came during the settle time after `5`, held so that a POST
    /// still in flight is handled first (nil when not settling).
    var settling: [EngineIOPacket]?
    var settlingBytes = 0
    var settleTimer: LoopTimer?
    var pingDueAfterSettling = false
    /// Set while a POST's packets are handled: the room the last publish went to, when it
    /// asks its publishers to slow down (see ``throttle(by:)``).
    var postBacklog: RoomBacklog?
    var handlingPost = false

    var transport: EngineIOTransport { webSocket == nil ? .polling : .webSocket }

    private init(core: ServerCore, shared: SocketIOShared, loop: EventLoop, version: EngineIOVersion, webSocket: WebSocketLink?,
                 registry: EngineIOSessionRegistry, connectionGuard: SessionGuard?) {
        self.core = core
        self.shared = shared
        self.loop = loop
        self.version = version
        self.webSocket = webSocket
        self.registry = registry
        sid = core.engineIORelay.service?.sessionID(random: EngineIOSession.randomID()) ?? EngineIOSession.randomID()
        sessionGuard = connectionGuard ?? SessionGuard(DoorPolicy(.socketIO, core.configuration), loop: loop, core: core, ticket: nil)
        ownsGuard = connectionGuard == nil
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
    ///
    /// A polling session brings its `admission` (counted in `pollingSessions` already); a
    /// WebSocket-only one has none, and brings its connection's guard (on `loop`).
    static func open(core: ServerCore, shared: SocketIOShared, loop: EventLoop, version: EngineIOVersion, webSocket: WebSocketLink?,
                     registry: EngineIOSessionRegistry, admission: AdmissionTicket?, connectionGuard: SessionGuard? = nil,
                     makeHandler: (EngineIOSession) -> any EngineIOSessionHandler) -> EngineIOSession {
        let session = EngineIOSession(core: core, shared: shared, loop: loop, version: version, webSocket: webSocket, registry: registry,
                                      connectionGuard: connectionGuard)
        session.admission = admission
        shared.loops[loop].sessions[session.sid] = session
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
                // While the upgrade settles, the ping waits with the client's packets, so it
                // follows the answers to what the client sent before it.
                if self.settling != nil { self.pingDueAfterSettling = true; return }
                self.apply(self.heartbeat.pingDue())
            }
        }
        apply(heartbeat.start())
    }

    /// A ping that came due while the upgrade settled.
    func sendPingDueAfterSettling() {
        guard pingDueAfterSettling, !isClosed else { return }
        pingDueAfterSettling = false
        apply(heartbeat.pingDue())
    }

    private func apply(_ actions: [EngineIOHeartbeat.Action]) {
        for action in actions {
            switch action {
            case .sendPing: sendPackets([EngineIOPacket(.ping)])
            case .armTimeout(let millis): timeoutTimer?.start(after: millis) { [weak self] in self?.end(reason: "ping timeout") }
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
            let (packets, failures) = EngineIOFrames.packets(inPolling: frames)
            if failures > 0 { encodingFailed(failures, what: "a pre-encoded polling frame") }
            // Held while the session moved to a WebSocket: sent there, in order.
            sendPackets(packets)
        }
    }

    /// Packets that could not be encoded are not sent: counted, and logged.
    func encodingFailed(_ count: Int, what: String) {
        for _ in 0..<count { shared.counters.encodeFailed() }
        shared.log.warning("socket.io session \(sid.prefix(6))…: \(count) packet(s) of \(what) could not be encoded; not sent")
    }

    /// Back-pressure from the room just published to (see ``EngineIOMessageChannel/throttle(by:)``).
    func throttle(by backlog: RoomBacklog?) {
        guard let backlog, backlog.isOverHigh, !isClosed else { return }
        if let webSocket {
            webSocket.throttle(by: backlog)
        } else if handlingPost {
            postBacklog = backlog
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
            // As engine.io: a waiting GET ends with a noop, then the session is gone.
            if let heldPoll {
                self.heldPoll = nil
                heldPoll.send(EngineIODoor.payloadResponse(EngineIOPayload.encode([EngineIOPacket(.noop)], version: version)))
            }
            end(reason: "client close")
        case .pong, .open, .upgrade, .noop:
            break
        }
    }

    // MARK: closing

    /// Ends the session at the request of the layer above (a protocol violation, a connect
    /// timeout): what it queued still reaches a polling client (see ``end(reason:heldPollGetsError:flushing:)``).
    func close(reason: String) { end(reason: reason, flushing: true) }

    /// Ends the session. A GET waiting meanwhile gets what was queued and the close packet, or
    /// with `heldPollGetsError` a 400: clients read a failed poll as a dropped connection and
    /// reconnect, where a close packet reads as a deliberate goodbye. With `flushing`, a
    /// polling client not waiting now gets the queued packets on its next GET (within the
    /// ping timeout), as engine.io's "closing" state gives them; otherwise the sid is unknown
    /// at once (a ping timeout, say, as the protocol's suite expects).
    func end(reason: String, heldPollGetsError: Bool = false, flushing: Bool = false) {
        guard !isClosed else { return }
        isClosed = true
        stopHeartbeat()
        stopConnectionPolicy()
        let handler = self.handler
        self.handler = nil
        handler?.engineIOSessionClosed(reason: reason)
        // What waited for a poll goes out first (a CONNECT_ERROR saying why, say), then the
        // close packet.
        if let heldPoll {
            self.heldPoll = nil
            if heldPollGetsError {
                heldPoll.send(EngineIODoor.errorResponse(400, code: 1, "Session ID unknown (the session was closed: \(reason))"))
            } else {
                heldPoll.send(EngineIODoor.payloadResponse(EngineIOPayload.encode(outbox.takeAll() + [EngineIOPacket(.close)], version: version)))
            }
        }
        if flushing, webSocket == nil, heldPoll == nil, !outbox.isEmpty {
            // A polling client not waiting right now still gets what was queued for it (a
            // CONNECT_ERROR saying why, say) and the close packet, on its next GET within the
            // heartbeat's timeout, as engine.io's "closing" state gives it.
            lastPackets = outbox.takeAll() + [EngineIOPacket(.close)]
            let timer = LoopTimer(loop: loop)
            lingerTimer = timer
            timer.start(after: core.configuration.socketIOPingTimeoutMillis) { [weak self] in self?.forget() }
        } else {
            forget()
        }
        outbox = EngineIOOutbox()
        settling = nil
        settleTimer?.stop()
        upgradeNoopTimer?.stop()
        webSocket?.close(.normal, reason: reason)
        probe?.close(.normal, reason: reason)
        webSocket = nil
        probe = nil
        probeTimer?.stop()
        probeTimer = nil
        leavePolling()
    }
}

extension EngineIOPacket {
    /// A message packet carrying `message`.
    init(message: EngineIOMessage) {
        self.init(.message)
        payload = message
    }
}
