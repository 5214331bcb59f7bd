import Foundation
import ParleyCore
import ParleyHTTP
import ParleyIO
import ParleyWebSocket

/// One Engine.IO session with its single Socket.IO socket on the default namespace `/`,
/// speaking the SocketChat event set. Lives on one loop (see SocketIODoor.swift); its
/// transports (held polling requests, a WebSocket) may be on other loops.
final class SocketIOSession: RoomSubscriber {
    let core: ServerCore
    let loop: EventLoop
    let version: EngineIOVersion
    /// The Engine.IO session id: it authorizes polling, so it is never shown to others.
    let sid: String
    /// The Socket.IO socket id (`40{"sid":..}`), also the member id in the lobby.
    let socketID: String
    let sessionID: SessionID
    private(set) var wireFormat: WireFormat

    private var webSocket: WebSocketLink?
    private var probe: WebSocketLink?
    private var heldPoll: HTTPReplyTarget?
    private var queue: [EngineIOPacket] = []
    private var queuedBytes = 0
    private var flushScheduled = false
    private var closed = false

    /// Joined the namespace `/` (CONNECT done).
    private var connected = false
    private var member: Member?
    private var assembler = SocketIOBinaryAssembler()
    /// The door policy's share of this session: idle watch and event rate.
    private let sessionGuard: SessionGuard
    private var pingTimer: LoopTimer?
    private var timeoutTimer: LoopTimer?
    private var awaitingPong = false
    /// Counted in this loop's lobby mirror (between the subscribe snapshot and leaving).
    private var inLobbyMirror = false

    private var lobby: RoomKey { core.configuration.lobby }
    /// The lobby channel's auth rules and this socket's token (CONNECT `auth: {token}`).
    private lazy var auth = ChannelAccess(channel: lobby.channel, core: core)

    private init(core: ServerCore, loop: EventLoop, version: EngineIOVersion, webSocket: WebSocketLink?) {
        self.core = core
        self.loop = loop
        self.version = version
        self.webSocket = webSocket
        sid = SocketIOSession.randomID()
        socketID = SocketIOSession.randomID()
        sessionID = core.socketIO.makeSessionID(loop: loop)
        wireFormat = webSocket == nil ? .socketIOPolling : .socketIO
        sessionGuard = SessionGuard(DoorPolicy(.socketIO, core.configuration), loop: loop, core: core, ticket: nil)
    }

    static func randomID() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
        return String((0..<20).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }

    /// Creates a session on `loop` (the current one) and registers it everywhere.
    static func open(core: ServerCore, loop: EventLoop, version: EngineIOVersion, webSocket: WebSocketLink?) -> SocketIOSession {
        let session = SocketIOSession(core: core, loop: loop, version: version, webSocket: webSocket)
        SocketIOLoop.of(loop).sessions[session.sid] = session
        core.socketIO.register(session.sid, on: loop)
        let context = LoopContext.of(loop)
        context.socketIO.core = core
        context.localHub.register(session)
        session.startHeartbeat()
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

    /// The open packet, plus `40` on EIO3 (Socket.IO v2 servers connect `/` at once).
    private var openingPackets: [EngineIOPacket] {
        if version == .v3 {
            connected = true
            return [openPacket, EngineIOPacket(.message, "0")]
        }
        return [openPacket]
    }

    /// The handshake response body of a polling open.
    func takeOpeningPayload() -> [UInt8] { EngineIOPayload.encode(openingPackets, version: version) }

    /// The handshake of a WebSocket-only session.
    func sendOpening() { send(openingPackets) }

    // MARK: heartbeat

    private func startHeartbeat() {
        let interval = core.configuration.socketIOPingIntervalMillis, timeout = core.configuration.socketIOPingTimeoutMillis
        let timeoutTimer = LoopTimer(loop: loop)
        self.timeoutTimer = timeoutTimer
        switch version {
        case .v4:
            // The server pings; the client must pong within pingTimeout.
            let pingTimer = LoopTimer(loop: loop)
            self.pingTimer = pingTimer
            pingTimer.start(after: interval, repeating: interval) { [weak self] in
                guard let self, !self.closed, !self.awaitingPong else { return }
                self.awaitingPong = true
                self.send([EngineIOPacket(.ping)])
                timeoutTimer.start(after: timeout) { [weak self] in self?.close(reason: "ping timeout") }
            }
        case .v3:
            // The client pings; silence for pingInterval + pingTimeout ends the session.
            timeoutTimer.start(after: interval + timeout) { [weak self] in self?.close(reason: "ping timeout") }
        }
        // Heartbeats keep a session alive, not in use: a session sending no message for the
        // idle timeout is closed.
        sessionGuard.watchIdle { [weak self] in
            guard let self, !self.closed else { return }
            self.close(reason: "idle timeout")
        }
    }

    private func heardFromClient() {
        guard version == .v3, !closed else { return }
        timeoutTimer?.restart(after: core.configuration.socketIOPingIntervalMillis + core.configuration.socketIOPingTimeoutMillis)
    }

    // MARK: transports

    /// A polling GET: answered now when packets wait, else held until some do.
    func poll(_ target: HTTPReplyTarget) {
        guard !closed, webSocket == nil else {
            return target.send(SocketIODoor.errorResponse(400, code: 3, "Bad request: this session is not polling"))
        }
        if heldPoll != nil {
            // A second concurrent GET is a client bug; upstream closes the session too.
            target.send(SocketIODoor.errorResponse(400, code: 3, "Bad request: overlapping polling requests"))
            close(reason: "overlapping polls")
            return
        }
        heldPoll = target
        if !queue.isEmpty { scheduleFlush() }
    }

    /// A polling POST: packets from the client.
    func post(_ body: [UInt8], _ target: HTTPReplyTarget) {
        guard !closed, webSocket == nil else {
            return target.send(SocketIODoor.errorResponse(400, code: 3, "Bad request: this session is not polling"))
        }
        let packets: [EngineIOPacket]
        do {
            packets = try EngineIOPayload.decode(body, version: version)
        } catch {
            return target.send(.text(400, "invalid payload: \(error.message)\n"))
        }
        target.send(.text(200, "ok"))
        for packet in packets where !closed { receive(packet) }
    }

    func pollAborted(_ target: HTTPReplyTarget) {
        if let heldPoll, heldPoll.same(as: target) { self.heldPoll = nil }
    }

    func attachProbe(_ link: WebSocketLink) {
        guard !closed, webSocket == nil, probe == nil else {
            return link.close(.policyViolation, reason: "cannot upgrade this session")
        }
        probe = link
    }

    func webSocketReceived(_ message: SocketIOWebSocketHandler.Inbound, from link: WebSocketLink) {
        guard !closed else { return }
        if let probe, probe.same(as: link) {
            guard case .text(let text) = message else { return link.close(.protocolError, reason: "expected 2probe") }
            if text == "2probe" {
                link.write(frames(for: [EngineIOPacket(.pong, "probe")]))
                // Make the held poll return so the client can pause polling.
                if heldPoll != nil { queueAndFlush([EngineIOPacket(.noop)]) }
            } else if text == "5" {
                self.probe = nil
                webSocket = link
                wireFormat = .socketIO
                if let heldPoll {
                    self.heldPoll = nil
                    heldPoll.send(SocketIODoor.payloadResponse(EngineIOPayload.encode([EngineIOPacket(.noop)], version: version)))
                }
                let pending = queue
                queue = []
                queuedBytes = 0
                if !pending.isEmpty { link.write(frames(for: pending)) }
            } else {
                self.probe = nil
                link.close(.protocolError, reason: "expected 2probe then 5")
            }
            return
        }
        guard let webSocket, webSocket.same(as: link) else { return }
        do {
            switch message {
            case .text(let text): receive(try EngineIOPacket.decode(text: text))
            case .binary(let bytes): receive(try EngineIOPacket.decode(webSocketBinary: bytes, version: version))
            }
        } catch {
            webSocket.close(.protocolError, reason: "invalid Engine.IO packet: \(error.message)")
            close(reason: "transport error")
        }
    }

    func webSocketClosed(_ link: WebSocketLink) {
        if let probe, probe.same(as: link) { self.probe = nil }
        if let webSocket, webSocket.same(as: link) {
            self.webSocket = nil
            close(reason: "transport close")
        }
    }

    // MARK: sending

    private func frames(for packets: [EngineIOPacket]) -> IOBuffer {
        var bytes: [UInt8] = []
        for packet in packets where !packet.isBinary {
            bytes += WebSocketProtocolMachine.serverTextFrame(Array(packet.encodedText.utf8))
        }
        return IOBuffer(bytes)
    }

    private func send(_ packets: [EngineIOPacket]) {
        guard !closed, !packets.isEmpty else { return }
        if let webSocket {
            webSocket.write(frames(for: packets))
        } else {
            queueAndFlush(packets)
        }
    }

    private func queueAndFlush(_ packets: [EngineIOPacket]) {
        queue += packets
        for packet in packets { queuedBytes += packet.text?.utf8.count ?? 0 }
        if queuedBytes > core.configuration.writeQueueLimit {
            close(reason: "client does not poll fast enough")
            return
        }
        if heldPoll != nil { scheduleFlush() }
    }

    /// Flushes at the end of this loop turn, so the packets of one turn share one response.
    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        let loop = self.loop, sid = self.sid
        loop.execute { SocketIOLoop.of(loop).sessions[sid]?.flush() }
    }

    private func flush() {
        flushScheduled = false
        guard let target = heldPoll, !queue.isEmpty else { return }
        heldPoll = nil
        let payload = EngineIOPayload.encode(queue, version: version)
        queue = []
        queuedBytes = 0
        target.send(SocketIODoor.payloadResponse(payload))
    }

    private func sendSocketIO(_ packet: SocketIOPacket) {
        send([EngineIOPacket(.message, packet.encoded)])
    }

    // MARK: receiving

    private func receive(_ packet: EngineIOPacket) {
        heardFromClient()
        switch packet.kind {
        case .ping:
            // EIO3 heartbeat (and harmless on EIO4): pong with the same data.
            send([EngineIOPacket(.pong, packet.text ?? "")])
        case .pong:
            awaitingPong = false
            if version == .v4 { timeoutTimer?.stop() }
        case .message:
            sessionGuard.heard()
            handleMessage(packet)
        case .close:
            close(reason: "client close")
        case .open, .upgrade, .noop:
            break
        }
    }

    private func handleMessage(_ packet: EngineIOPacket) {
        let output: SocketIOBinaryAssembler.Output
        do {
            switch packet.payload {
            case .text(let text): output = try assembler.feed(text: text)
            case .binary(let bytes): output = try assembler.feed(binary: bytes)
            }
        } catch {
            return sendError(namespace: "/", "invalid packet: \(error.message)")
        }
        if case .packet(let packet) = output { handle(packet) }
    }

    /// CONNECT_ERROR, the one error packet Socket.IO has: an object on v4, a string on v2.
    private func sendError(namespace: String, _ message: String) {
        let data: JSONValue = version == .v4 ? ["message": .string(message)] : .string(message)
        sendSocketIO(SocketIOPacket(kind: .connectError, namespace: namespace, data: data))
    }

    private func handle(_ packet: SocketIOPacket) {
        guard packet.namespace == "/" else {
            return sendError(namespace: packet.namespace, "Invalid namespace")
        }
        switch packet.kind {
        case .connect:
            if let refusal = connectRefusal(packet.data) {
                connected = false
                return sendError(namespace: "/", refusal)
            }
            if version == .v4 {
                connected = true
                sendSocketIO(SocketIOPacket(kind: .connect, data: ["sid": .string(socketID)]))
            } else if !connected {
                connected = true
                sendSocketIO(SocketIOPacket(kind: .connect))
            }
        case .disconnect:
            leaveLobby(exit: false)
            connected = false
        case .event, .binaryEvent:
            guard connected else {
                return sendError(namespace: "/", "not connected: send CONNECT (40) before events")
            }
            handleEvent(packet)
        case .ack, .binaryAck, .connectError:
            break // Parley never asks for acks; a client's CONNECT_ERROR means nothing here.
        }
    }

    private func handleEvent(_ packet: SocketIOPacket) {
        switch SocketChatCommand.parse(packet.data) {
        case .failure(let error):
            if let id = packet.id {
                sendSocketIO(SocketIOPacket(kind: .ack, id: id, data: [["error": .string(error.message)]]))
            } else {
                sendSocketIO(SocketIOPacket.event("error", [.string(error.message)]))
            }
        case .success(let command):
            let error = perform(command)
            if let id = packet.id {
                sendSocketIO(SocketIOPacket(kind: .ack, id: id, data: error.map { [["error": .string($0)]] } ?? []))
            } else if let error {
                sendSocketIO(SocketIOPacket.event("error", [.string(error)]))
            }
        }
    }

    /// Why a CONNECT is refused: the lobby channel is closed, needs a token and none came, or
    /// the token does not verify. Tokens must say `client: "*"` or leave it out (the socket id
    /// is only known after CONNECT).
    private func connectRefusal(_ data: JSONValue?) -> String? {
        if let refusal = core.configuration.refusal(ofChannel: lobby.channel) { return refusal }
        if let raw = data?["token"], !raw.isNull {
            guard let token = raw.stringValue else { return "authentication failed: auth.token must be a string" }
            if let error = auth.authenticate(token, client: .wildcard) { return "authentication failed: \(error)" }
            return nil
        }
        if auth.requiresAuth && !auth.isAuthenticated {
            return "this lobby requires authentication: connect with auth: {token: \"<JWT>\"}"
        }
        return nil
    }

    /// Nil when the lobby allows `action` for this socket, else the error text.
    private func authError(_ action: AuthAction) -> String? {
        if let refusal = core.configuration.refusal(ofChannel: lobby.channel) { return refusal }
        if auth.requiresAuth && !auth.isAuthenticated {
            return "this lobby requires authentication: connect with auth: {token: \"<JWT>\"}"
        }
        return auth.check(action, room: lobby.room, nowMillis: core.hub.clock.nowMillis()).error
    }

    /// Runs a SocketChat command; returns an error text for the client.
    private func perform(_ command: SocketChatCommand) -> String? {
        switch command {
        case .connectUser(let nickname):
            if let error = authError(.subscribe) { return error }
            if let member {
                guard member.displayName == nickname else { return "already connected as \(member.displayName); exitUser first" }
                sendEncoded(SocketIOEncoding.userList(core.socketIO.roster.users(connected: core.hub.members(of: lobby))))
                return nil
            }
            let member = Member(id: socketID, clientData: ["name": .string(nickname), "color": .string(NameColor.color(for: nickname))],
                                authData: auth.claims?.data)
            core.socketIO.roster.connected(nickname: nickname)
            do {
                try core.hub.subscribe(sessionID, as: member, to: lobby, inbox: core.inbox(for: loop))
                self.member = member
            } catch {
                return error.message
            }
            return nil
        case .chatMessage(let nickname, let text):
            if let error = authError(.publish) { return error }
            guard let sender = member ?? anonymous(nickname) else { return "connectUser first" }
            guard rateAllows() else { return "rate limit exceeded; message dropped" }
            do { try core.hub.publish(.string(text), to: lobby, from: sender) } catch { return error.message }
            return nil
        case .typing(let nickname, let flag):
            if let error = authError(.publish) { return error }
            guard let sender = member ?? anonymous(nickname) else { return "connectUser first" }
            guard rateAllows() else { return "rate limit exceeded" }
            do { try core.hub.publish(.object(["typing": .bool(flag)]), to: lobby, from: sender) } catch { return error.message }
            return nil
        case .exitUser(let nickname):
            if let member {
                core.socketIO.roster.exited(nickname: member.displayName)
                leaveLobby(exit: true)
                // The leaver is out of the room, so it hears its own exit from us.
                sendEncoded(SocketIOEncoding.userExitUpdate(member.displayName))
            } else if let nickname {
                core.socketIO.roster.exited(nickname: nickname)
            }
            return nil
        }
    }

    /// A sender for a socket that chats without `connectUser` (the original server allowed it).
    private func anonymous(_ nickname: String?) -> Member? {
        guard let nickname, SocketChatRoster.isValidNickname(nickname) else { return nil }
        return Member(id: socketID, clientData: ["name": .string(nickname), "color": .string(NameColor.color(for: nickname))],
                      authData: auth.claims?.data)
    }

    /// Sends Engine.IO packet texts made by ``SocketIOEncoding``.
    private func sendEncoded(_ texts: String...) {
        send(texts.compactMap { try? EngineIOPacket.decode(text: $0) })
    }

    private func leaveLobby(exit: Bool) {
        guard let member else { return }
        self.member = nil
        if inLobbyMirror {
            inLobbyMirror = false
            LoopContext.of(loop).socketIO.sessionLeft()
        }
        if !exit { core.socketIO.roster.disconnected(id: member.id, nickname: member.displayName) }
        core.hub.unsubscribe(sessionID, from: lobby)
    }

    // MARK: room events

    func receive(_ event: RoomEvent, in room: RoomKey, frame: IOBuffer?) {
        guard let frame, !closed, member != nil else { return }
        if wireFormat == .socketIO, let webSocket {
            webSocket.write(frame)
        } else {
            let packets = frame.bytes.split(separator: EngineIOPayload.separator).compactMap {
                try? EngineIOPacket.decode(text: String(decoding: $0, as: UTF8.self))
            }
            queueAndFlush(packets)
        }
    }

    func didSubscribe(_ snapshot: SubscribeSnapshot) {
        guard let member, snapshot.room == lobby else { return }
        inLobbyMirror = true
        LoopContext.of(loop).socketIO.sessionJoined(snapshot, core: core)
        let users = core.socketIO.roster.users(connected: snapshot.members)
        sendEncoded(SocketIOEncoding.userList(users),
                    SocketIOEncoding.userConnectUpdate(SocketChatUser(id: member.id, nickname: member.displayName, isConnected: true)))
    }

    func didUnsubscribe(from room: RoomKey) {}

    // MARK: closing

    /// Takes a token; a refusal is counted, and sustained abuse closes the session (after
    /// this refusal has been answered).
    private func rateAllows() -> Bool {
        switch sessionGuard.admitMessage() {
        case .allowed:
            return true
        case .refused:
            return false
        case .abusive:
            LoopBound(self, on: loop).run { $0.close(reason: "rate limit exceeded") }
            return false
        }
    }

    func close(reason: String) {
        guard !closed else { return }
        leaveLobby(exit: false)
        closed = true
        pingTimer?.stop()
        timeoutTimer?.stop()
        pingTimer = nil
        timeoutTimer = nil
        sessionGuard.end()
        core.socketIO.unregister(sid)
        SocketIOLoop.of(loop).sessions.removeValue(forKey: sid)
        LoopContext.of(loop).localHub.unregister(sessionID)
        if let heldPoll {
            self.heldPoll = nil
            heldPoll.send(SocketIODoor.payloadResponse(EngineIOPayload.encode([EngineIOPacket(.close)], version: version)))
        }
        webSocket?.close(.normal, reason: reason)
        probe?.close(.normal, reason: reason)
        webSocket = nil
        probe = nil
    }
}
