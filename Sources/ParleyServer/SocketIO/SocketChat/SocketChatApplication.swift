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
    /// This socket's `userList` pacing (storms of joins are coalesced).
    private var pacer = SocketChatUserListPacer()
    private var pacerTimer: LoopTimer?
    private var flushArmed = false
    /// Whether this connection has had an ignored event logged (once per connection).
    private var loggedIgnored = false

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
        guard !event.nameIsNumber, SocketChatCommand.knows(event.name) else {
            let shown = event.name.count > 40 ? String(event.name.prefix(40)) + "…" : event.name
            return refuse(event, .unknownEvent, "unknown event \"\(shown)\"; this server speaks connectUser, chatMessage, startType, stopType, exitUser")
        }
        switch SocketChatCommand.parse(event) {
        case .failure(let error):
            refuse(event, .refused, error.message)
        case .success(let command):
            switch perform(command, event, on: socket) {
            case .done: event.ack?.send([])
            case .refused(let reason, let message): refuse(event, reason, message)
            case .answeredLater: break
            }
        }
    }

    func disconnected(_ socket: SocketIOSocket, reason: SocketIODisconnectReason) {
        core.directory.unregister(socket.id)
        leaveLobby(exit: false)
        LoopContext.of(loop).localHub.unregister(sessionID)
        self.socket = nil
    }

    /// An event that is not done: with an ack id the ack says why (`[{"error": ...}]`);
    /// without one it is dropped, counted, and logged once per connection. Parley never
    /// answers with an event named `error`: older servers reserve that name, and
    /// Socket.IO-Client-Swift hands it to the app as a connection error.
    private func refuse(_ event: SocketIOEvent, _ reason: SocketIOCounters.IgnoredEvent, _ message: String) {
        if let ack = event.ack {
            ack.send([["error": .string(message)]])
        } else {
            ignored(reason, message)
        }
    }

    private func ignored(_ reason: SocketIOCounters.IgnoredEvent, _ message: String) {
        core.socketIO.counters.ignoredEvent(reason)
        guard !loggedIgnored else { return }
        loggedIgnored = true
        let who = socket.map { "socket \($0.id)" } ?? "a socket"
        core.socketIO.log.warning("socket.io: \(who) sent an event that was dropped (\(reason.rawValue)): \(message); further drops on this connection are only counted")
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

    /// How a command went.
    private enum Outcome {
        /// Done: an ack (if asked for) says `[]` now.
        case done
        /// Not done, for this reason.
        case refused(SocketIOCounters.IgnoredEvent, String)
        /// The ack is answered later (a chat message once it is stored).
        case answeredLater
    }

    /// Runs a SocketChat command.
    private func perform(_ command: SocketChatCommand, _ event: SocketIOEvent, on socket: SocketIOSocket) -> Outcome {
        switch command {
        case .connectUser(let nickname):
            if let error = authError(.subscribe) { return .refused(.refused, error) }
            // A banned name never joins the lobby (the socket stays, refused each time).
            if core.bans.ban(ip: remoteIP, name: nickname, nowMillis: core.hub.clock.nowMillis()) != nil {
                return .refused(.refused, "banned from this server")
            }
            if let member {
                guard member.displayName == nickname else { return .refused(.refused, "already connected as \(member.displayName); exitUser first") }
                flushHeld()
                emit(SocketChatEncoding.userList(core.socketIO.roster.users(connected: core.hub.members(of: lobby))), on: socket)
                pacer.sent(at: nowMillis)
                return .done
            }
            let member = Member(id: socket.id, clientData: ["name": .string(nickname), "color": .string(NameColor.color(for: nickname))],
                                authData: auth.claims?.data)
            core.socketIO.roster.connected(nickname: nickname)
            core.directory.rename(socket.id, to: nickname)
            do {
                try core.hub.subscribe(sessionID, as: member, to: lobby, inbox: core.inbox(for: loop))
                self.member = member
            } catch {
                return .refused(.refused, error.message)
            }
            return .done
        case .chatMessage(let nickname, let text):
            if let error = authError(.publish) { return .refused(.refused, error) }
            guard let sender = member ?? anonymous(nickname, socket) else { return .refused(.refused, "connectUser first") }
            guard rateAllows(socket) else { return .refused(.rateLimited, "rate limit exceeded; message dropped") }
            // The ack says the message is stored (durable): it is answered when the store has
            // it, or with the error when it could not be stored (and then nobody got it).
            let ack = event.ack
            let me = LoopBound(self, on: loop)
            do {
                let backlog = try core.hub.publish(.string(text), to: lobby, from: sender) { result in
                    switch result {
                    case .success:
                        ack?.send([])
                    case .failure(let error):
                        if let ack {
                            ack.send([["error": .string("not stored: \(error.message)")]])
                        } else {
                            me.execute { $0.ignored(.refused, "chatMessage not stored: \(error.message)") }
                        }
                    }
                }
                engineIO.throttle(by: backlog)
            } catch {
                return .refused(.refused, error.message)
            }
            return .answeredLater
        case .typing(let nickname, let flag):
            if let error = authError(.publish) { return .refused(.refused, error) }
            guard let sender = member ?? anonymous(nickname, socket) else { return .refused(.refused, "connectUser first") }
            guard rateAllows(socket) else { return .refused(.rateLimited, "rate limit exceeded") }
            do {
                let backlog = try core.hub.publish(.object(["typing": .bool(flag)]), to: lobby, from: sender)
                engineIO.throttle(by: backlog)
            } catch {
                return .refused(.refused, error.message)
            }
            return .done
        case .exitUser(let nickname):
            if let member {
                core.socketIO.roster.exited(nickname: member.displayName)
                leaveLobby(exit: true)
                // The leaver is out of the room, so it hears its own exit from us.
                emit(SocketChatEncoding.userExitUpdate(member.displayName), on: socket)
            } else if let nickname {
                core.socketIO.roster.exited(nickname: nickname)
            }
            return .done
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
        pacer.reset()
        pacerTimer?.stop()
        flushArmed = false
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
        guard member != nil else { return }
        // Packets of `/` encoded for this transport, the same bytes for every socket on it; a
        // join or leave leads with a userList that this socket paces (SocketChatUserListPacer).
        if event.changesMembers {
            if pacer.userListDue(at: nowMillis) {
                sendUserListNow()
            } else {
                scheduleFlush()
            }
        }
        guard let frame else { return }
        delivered.incrementFromOwner()
        let transport = engineIO.transport
        if pacer.frame(frame, transport) { engineIO.sendPreEncoded(frame, as: transport) }
    }

    func didSubscribe(_ snapshot: SubscribeSnapshot) {
        guard let member, let socket, snapshot.room == lobby else { return }
        inLobbyMirror = true
        LoopContext.of(loop).socketChat.sessionJoined(snapshot, core: core)
        let users = core.socketIO.roster.users(connected: snapshot.members)
        emit(SocketChatEncoding.userList(users), on: socket)
        pacer.sent(at: nowMillis)
        emit(SocketChatEncoding.userConnectUpdate(SocketChatUser(id: member.id, nickname: member.displayName, isConnected: true)), on: socket)
    }

    // MARK: userList pacing

    private var nowMillis: Int64 { core.hub.clock.nowMillis() }

    private func sendUserListNow() {
        let format = wireFormat
        guard let list = LoopContext.of(loop).socketChat.currentUserListFrame(format) else { return }
        engineIO.sendPreEncoded(list, as: format.engineIOTransport)
        pacer.sent(at: nowMillis)
    }

    private func scheduleFlush() {
        guard !flushArmed else { return }
        let timer = pacerTimer ?? LoopTimer(loop: loop)
        pacerTimer = timer
        flushArmed = true
        let delay = UInt64(max(1, pacer.flushDueMillis - nowMillis))
        timer.start(after: delay) { [weak self] in
            self?.flushArmed = false
            self?.flushHeld()
        }
    }

    /// Sends what the pacer held, in order, the list as it is now.
    private func flushHeld() {
        guard pacer.isHolding else { return }
        pacerTimer?.stop()
        flushArmed = false
        for item in pacer.takeHeld() {
            switch item {
            case .frame(let frame, let transport): engineIO.sendPreEncoded(frame, as: transport)
            case .userList: sendUserListNow()
            }
        }
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
            LoopBound(socket, on: loop).execute { $0.closeConnection(reason: "rate limit exceeded") }
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
