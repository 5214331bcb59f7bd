import ParleyCore
import ParleyIO

/// The SocketChat event set on `/`: `connectUser` joins the lobby (the configured room every
/// door shares), `chatMessage` and `startType` / `stopType` publish there, `exitUser` leaves;
/// the lobby's events come back as `userList`, `userConnectUpdate`, `userExitUpdate`,
/// `userTypingUpdate` and `newChatMessage`. One instance per connection, on its loop; it is
/// the connection's hub subscriber while its socket is connected.
final class SocketChatApplication: SocketIOApplication, RoomSubscriber {
    let core: ServerCore
    /// The connection's Engine.IO session: room events, encoded once per loop for every
    /// socket on the same transport, go straight to it (see ``receive(_:in:frame:)``).
    let engineIO: any EngineIOMessageChannel
    let loop: EventLoop
    let sessionID: SessionID
    /// The socket on `/`, while connected.
    private var socket: SocketIOSocket?
    /// In the lobby (after `connectUser`).
    private var member: Member?
    /// Counted in this loop's lobby mirror (between the subscribe snapshot and leaving).
    private var inLobbyMirror = false

    private var lobby: RoomKey { core.configuration.lobby }
    /// The lobby channel's auth rules and this socket's token (CONNECT `auth: {token}`).
    private lazy var auth = ChannelAccess(channel: lobby.channel, core: core)

    init(core: ServerCore, engineIO: any EngineIOMessageChannel) {
        self.core = core
        self.engineIO = engineIO
        loop = engineIO.loop
        sessionID = core.socketIO.makeSessionID(loop: loop)
        rate = SessionGuard(DoorPolicy(.socketIO, core.configuration), loop: engineIO.loop, core: core, ticket: nil)
        LoopContext.of(loop).socketChat.core = core
    }

    // MARK: Socket.IO

    func serves(_ namespace: String) -> Bool { namespace == "/" }

    func connect(_ socket: SocketIOSocket, _ request: SocketIOConnectRequest) -> SocketIOConnectDecision {
        // Engine.IO 3 sessions are connected to `/` at once, as by Socket.IO v2 servers; such a
        // client brings its token with a CONNECT of its own.
        if !request.isImplicit, let refusal = connectRefusal(request.auth) {
            core.logAuthFailure(door: .socketIO, remote: remoteIP, channel: lobby.channel, reason: refusal)
            return .refuse(refusal)
        }
        if core.bans.ban(ip: remoteIP, name: nil, nowMillis: core.hub.clock.nowMillis()) != nil {
            return .refuse("banned from this server")
        }
        self.socket = socket
        LoopContext.of(loop).localHub.register(self)
        core.directory.register(ConnectedClient(id: socket.id, door: .socketIO, remoteIP: remoteIP, channel: lobby.channel,
                                                name: nil, connectedAtMillis: core.hub.clock.nowMillis(),
                                                control: SessionControl(self, on: loop)))
        return .accept()
    }

    func received(_ event: SocketIOEvent, on socket: SocketIOSocket) {
        switch SocketChatCommand.parse(event) {
        case .failure(let error):
            answer(event, on: socket, error: error.message)
        case .success(let command):
            answer(event, on: socket, error: perform(command, on: socket))
        }
    }

    func disconnected(_ socket: SocketIOSocket, reason: SocketIODisconnectReason) {
        core.directory.unregister(socket.id)
        leaveLobby(exit: false)
        LoopContext.of(loop).localHub.unregister(sessionID)
        self.socket = nil
    }

    /// The ack (`[]`, or `[{"error": ...}]`), or without an ack id an `error` event when
    /// something went wrong.
    private func answer(_ event: SocketIOEvent, on socket: SocketIOSocket, error: String?) {
        if let ack = event.ack {
            ack.send(error.map { [["error": .string($0)]] } ?? [])
        } else if let error {
            socket.emit("error", [.string(error)])
        }
    }

    private func emit(_ event: SocketChatEvent, on socket: SocketIOSocket) {
        socket.emit(event.name, event.arguments)
    }

    // MARK: auth

    /// Why a CONNECT is refused: the lobby channel is closed, needs a token and none came, or
    /// the token does not verify. Tokens must say `client: "*"` or leave it out (the socket id
    /// is only known after CONNECT).
    private func connectRefusal(_ data: JSONValue?) -> String? {
        if let refusal = core.configuration.refusal(ofChannel: lobby.channel) { return refusal }
        if let raw = data?["token"], !raw.isNull {
            guard let token = raw.stringValue else { return "authentication failed: auth.token must be a string" }
            if let error = auth.authenticate(token, client: .wildcard) { return "authentication failed: \(error)" }
            self.token = token
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

    // MARK: commands

    /// Runs a SocketChat command; returns an error text for the client.
    private func perform(_ command: SocketChatCommand, on socket: SocketIOSocket) -> String? {
        switch command {
        case .connectUser(let nickname):
            if let error = authError(.subscribe) { return error }
            // A banned name never joins the lobby (the socket stays, refused each time).
            if core.bans.ban(ip: remoteIP, name: nickname, nowMillis: core.hub.clock.nowMillis()) != nil {
                return "banned from this server"
            }
            if let member {
                guard member.displayName == nickname else { return "already connected as \(member.displayName); exitUser first" }
                emit(SocketChatEncoding.userList(core.socketIO.roster.users(connected: core.hub.members(of: lobby))), on: socket)
                return nil
            }
            let member = Member(id: socket.id, clientData: ["name": .string(nickname), "color": .string(NameColor.color(for: nickname))],
                                authData: auth.claims?.data)
            core.socketIO.roster.connected(nickname: nickname)
            core.directory.rename(socket.id, to: nickname)
            do {
                try core.hub.subscribe(sessionID, as: member, to: lobby, inbox: core.inbox(for: loop))
                self.member = member
            } catch {
                return error.message
            }
            return nil
        case .chatMessage(let nickname, let text):
            if let error = authError(.publish) { return error }
            guard let sender = member ?? anonymous(nickname, socket) else { return "connectUser first" }
            guard rateAllows(socket) else { return "rate limit exceeded; message dropped" }
            do { try core.hub.publish(.string(text), to: lobby, from: sender) } catch { return error.message }
            return nil
        case .typing(let nickname, let flag):
            if let error = authError(.publish) { return error }
            guard let sender = member ?? anonymous(nickname, socket) else { return "connectUser first" }
            guard rateAllows(socket) else { return "rate limit exceeded" }
            do { try core.hub.publish(.object(["typing": .bool(flag)]), to: lobby, from: sender) } catch { return error.message }
            return nil
        case .exitUser(let nickname):
            if let member {
                core.socketIO.roster.exited(nickname: member.displayName)
                leaveLobby(exit: true)
                // The leaver is out of the room, so it hears its own exit from us.
                emit(SocketChatEncoding.userExitUpdate(member.displayName), on: socket)
            } else if let nickname {
                core.socketIO.roster.exited(nickname: nickname)
            }
            return nil
        }
    }

    /// A sender for a socket that chats without `connectUser` (the original server allowed it).
    private func anonymous(_ nickname: String?, _ socket: SocketIOSocket) -> Member? {
        guard let nickname, SocketChatRoster.isValidNickname(nickname) else { return nil }
        return Member(id: socket.id, clientData: ["name": .string(nickname), "color": .string(NameColor.color(for: nickname))],
                      authData: auth.claims?.data)
    }

    private func leaveLobby(exit: Bool) {
        guard let member else { return }
        self.member = nil
        if inLobbyMirror {
            inLobbyMirror = false
            LoopContext.of(loop).socketChat.sessionLeft()
        }
        if !exit { core.socketIO.roster.disconnected(id: member.id, nickname: member.displayName) }
        core.hub.unsubscribe(sessionID, from: lobby)
    }

    // MARK: room events

    // The fan-out path, run for every delivery: it reads only `let`s and plain values, so it
    // costs no reference counting beyond the frame's.

    var wireFormat: WireFormat { .socketIOFormat(for: engineIO.transport) }

    func receive(_ event: RoomEvent, in room: RoomKey, frame: IOBuffer?) {
        if case .roomClosed = event, member != nil {
            disconnect(byAdministrator: "the lobby was closed")
            return
        }
        guard let frame, member != nil else { return }
        delivered.incrementFromOwner()
        // Packets of `/` encoded for this transport, the same bytes for every socket on it.
        engineIO.sendPreEncoded(frame, as: engineIO.transport)
    }

    func didSubscribe(_ snapshot: SubscribeSnapshot) {
        guard let member, let socket, snapshot.room == lobby else { return }
        inLobbyMirror = true
        LoopContext.of(loop).socketChat.sessionJoined(snapshot, core: core)
        let users = core.socketIO.roster.users(connected: snapshot.members)
        emit(SocketChatEncoding.userList(users), on: socket)
        emit(SocketChatEncoding.userConnectUpdate(SocketChatUser(id: member.id, nickname: member.displayName, isConnected: true)), on: socket)
    }

    func didUnsubscribe(from room: RoomKey) {}

    // MARK: - Connection policy: message rate
    //
    // The door-wide rate limit as SocketChat applies it to `chatMessage` and typing: a token
    // bucket (`nativeRatePerSecond` / `nativeBurst`), refusals counted as `message_rate`, and
    // sustained abuse (RateAbuseDetector) closes the connection, counted as
    // `rate_abuse_disconnect`. The Engine.IO session applies the rest of the policy
    // (EngineIOSession+ConnectionPolicy.swift).

    private let rate: SessionGuard

    // MARK: - Operations: bans, the admin API, reloads

    /// The address of the connection that opened this session.
    private var remoteIP: String? { (engineIO as? EngineIOSession)?.remoteIP }
    /// The verified token, kept to verify it again after a reload (never logged).
    private var token: String?
    /// This loop's count of Socket.IO deliveries.
    private lazy var delivered = core.loopMetrics(loop).delivered.counter(.socketIO)

    /// Takes a token; a refusal is counted, and sustained abuse closes the connection (after
    /// this refusal has been answered).
    private func rateAllows(_ socket: SocketIOSocket) -> Bool {
        switch rate.admitMessage() {
        case .allowed:
            return true
        case .refused:
            return false
        case .abusive:
            LoopBound(socket, on: loop).run { $0.closeConnection(reason: "rate limit exceeded") }
            return false
        }
    }
}

extension SocketChatApplication: AdministeredSession {
    func disconnect(byAdministrator reason: String) {
        guard let socket else { return }
        socket.emit("error", [.string("disconnected by an administrator: \(reason)")])
        socket.closeConnection(reason: "disconnected by an administrator")
    }

    /// The lobby's channel must still be open, and a token (or its absence) must still let
    /// the socket in; otherwise it is told (an `error` event) and disconnected.
    func configurationReloaded() {
        guard let socket else { return }
        let channel = lobby.channel
        var fresh = ChannelAccess(channel: channel, core: core)
        var problem = core.configuration.refusal(ofChannel: channel)
        if problem == nil, fresh.requiresAuth && !auth.isAuthenticated {
            problem = "this lobby now requires authentication"
        }
        if problem == nil, auth.isAuthenticated, let token {
            if let error = fresh.authenticate(token, client: .wildcard) { problem = "your token is no longer valid: \(error)" }
        }
        if let problem {
            socket.emit("error", [.string("\(problem); disconnecting")])
            socket.closeConnection(reason: "permissions changed")
            return
        }
        if fresh.isAuthenticated { auth = fresh }
    }
}
