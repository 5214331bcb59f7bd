import ParleyCore
import ParleyIO

/// The SocketChat event set on `/`: `connectUser` joins the lobby (the configured room every
/// door shares), `chatMessage` and `startType` / `stopType` publish there, `exitUser` leaves;
/// the lobby's events come back as `userList`, `userConnectUpdate`, `userExitUpdate`,
/// `userTypingUpdate` and `newChatMessage`. One instance per connection, on its loop; it is
/// the connection's hub subscriber while its socket is connected.
///
/// As the classic server's `io.emit`, every connected socket hears the lobby, identified or
/// not: an app reconnects (after a drop, or when it comes back from the background) with a
/// new session and never sends `connectUser` again. While the socket is not in the lobby
/// as a member it hears it through its ``SocketChatListener`` (a hub listener, no member);
/// from its member subscription on, through that. A `chatMessage` or `startType` that names
/// a nickname from a socket that is not in the lobby joins it as that nickname first.
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
    /// The member subscription is live: room events come through it, not the listener.
    private var memberLive = false
    /// Hears the lobby while the socket is connected (see the type's comment).
    private var listener: SocketChatListener?
    /// The listener is counted in this loop's lobby mirror.
    private var listenerInLobbyMirror = false
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

    /// `rate`: the guard of the Engine.IO session (for a WebSocket-only session, its
    /// connection's), whose message-rate bucket this application asks.
    init(core: ServerCore, engineIO: any EngineIOMessageChannel, rate: SessionGuard) {
        self.core = core
        self.engineIO = engineIO
        loop = engineIO.loop
        sessionID = core.socketIO.makeSessionID(loop: loop)
        self.rate = rate
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
        startListening()
        return .accept()
    }

    /// The socket hears the lobby from now on, when its token lets it read the lobby.
    private func startListening() {
        guard listener == nil, authError(.subscribe) == nil else { return }
        let listener = SocketChatListener(app: self, sessionID: core.socketIO.makeSessionID(loop: loop))
        LoopContext.of(loop).localHub.register(listener)
        do {
            try core.hub.listen(listener.sessionID, to: lobby, inbox: core.inbox(for: loop))
            self.listener = listener
        } catch {
            LoopContext.of(loop).localHub.unregister(listener.sessionID)
            core.socketIO.log.warning("socket.io: socket \(socket?.id ?? "?") cannot hear the lobby: \(error.message)")
        }
    }

    private func stopListening() {
        guard let listener else { return }
        self.listener = nil
        core.hub.unsubscribe(listener.sessionID, from: lobby)
        LoopContext.of(loop).localHub.unregister(listener.sessionID)
        if listenerInLobbyMirror {
            listenerInLobbyMirror = false
            LoopContext.of(loop).socketChat.sessionLeft()
        }
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
        stopListening()
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
            if let member {
                if let error = authError(.subscribe) { return .refused(.refused, error) }
                guard member.displayName == nickname else { return .refused(.refused, "already connected as \(member.displayName); exitUser first") }
                flushHeld()
                emit(SocketChatEncoding.userList(core.socketIO.roster.users(connected: core.hub.members(of: lobby))), on: socket)
                pacer.sent(at: nowMillis)
                return .done
            }
            if let refusal = join(as: nickname, socket) { return .refused(.refused, refusal) }
            return .done
        case .chatMessage(let nickname, let text):
            if let error = authError(.publish) { return .refused(.refused, error) }
            let sender: Member
            switch implicitMember(nickname, socket) {
            case .success(let member): sender = member
            case .failure(let error): return .refused(.refused, error.message)
            }
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
            // startType joins as its nickname; a stopType alone only clears the flag.
            let sender: Member
            if flag {
                switch implicitMember(nickname, socket) {
                case .success(let member): sender = member
                case .failure(let error): return .refused(.refused, error.message)
                }
            } else {
                guard let member = member ?? anonymous(nickname, socket) else { return .refused(.refused, "connectUser first") }
                sender = member
            }
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
                // The leaver hears its own exit through its listener, as everybody does; a
                // socket that may not read the lobby has none and hears it from us.
                if listener == nil { emit(SocketChatEncoding.userExitUpdate(member.displayName), on: socket) }
            } else if let nickname {
                core.socketIO.roster.exited(nickname: nickname)
            }
            return .done
        }
    }

    /// Joins the lobby as `nickname` (`connectUser`, or a `chatMessage` / `startType` from a
    /// socket that is not in it); nil when it went, else why not.
    private func join(as nickname: String, _ socket: SocketIOSocket) -> String? {
        if let error = authError(.subscribe) { return error }
        // A banned name never joins the lobby (the socket stays, refused each time).
        if core.bans.ban(ip: remoteIP, name: nickname, nowMillis: core.hub.clock.nowMillis()) != nil {
            return "banned from this server"
        }
        let member = Member(id: socket.id, clientData: ["name": .string(nickname), "color": .string(NameColor.color(for: nickname))],
                            authData: auth.claims?.data)
        do {
            try core.hub.subscribe(sessionID, as: member, to: lobby, inbox: core.inbox(for: loop))
        } catch {
            return error.message
        }
        core.socketIO.roster.connected(nickname: nickname)
        core.directory.rename(socket.id, to: nickname)
        self.member = member
        return nil
    }

    /// The sender of a `chatMessage` or `startType`: the member, or, for a socket not in
    /// the lobby (an app that reconnected and never sends `connectUser` again), the member
    /// it becomes by joining as the event's nickname.
    private func implicitMember(_ nickname: String?, _ socket: SocketIOSocket) -> Result<Member, ParleyError> {
        if let member { return .success(member) }
        guard let nickname, SocketChatRoster.isValidNickname(nickname) else {
            return .failure(ParleyError(.badRequest, "connectUser first"))
        }
        if let refusal = join(as: nickname, socket) { return .failure(ParleyError(.forbidden, refusal)) }
        return member.map { .success($0) } ?? .failure(ParleyError(.forbidden, "connectUser first"))
    }

    /// A sender for a socket that only stops typing without being in the lobby.
    private func anonymous(_ nickname: String?, _ socket: SocketIOSocket) -> Member? {
        guard let nickname, SocketChatRoster.isValidNickname(nickname) else { return nil }
        return Member(id: socket.id, clientData: ["name": .string(nickname), "color": .string(NameColor.color(for: nickname))],
                      authData: auth.claims?.data)
    }

    private func leaveLobby(exit: Bool) {
        guard let member else { return }
        self.member = nil
        memberLive = false
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
        guard memberLive else { return }
        deliver(event, frame: frame)
    }

    /// A lobby event through the listener: shown while the member subscription is not live
    /// (before it, or after leaving), so each event reaches the socket once.
    fileprivate func listenerReceived(_ event: RoomEvent, in room: RoomKey, frame: IOBuffer?) {
        guard !memberLive, socket != nil, room == lobby else { return }
        switch event {
        case .roomClosed: return
        // Its own join, before its subscription is live: the subscription's snapshot shows
        // it (userList, then userConnectUpdate), once.
        case .memberJoined(let joined) where joined.id == member?.id: return
        default: deliver(event, frame: frame)
        }
    }

    fileprivate func listenerSubscribed(_ snapshot: SubscribeSnapshot) {
        guard listener != nil, snapshot.failure == nil, snapshot.room == lobby, !listenerInLobbyMirror else { return }
        listenerInLobbyMirror = true
        LoopContext.of(loop).socketChat.sessionJoined(snapshot, core: core)
    }

    private func deliver(_ event: RoomEvent, frame: IOBuffer?) {
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
        if let failure = snapshot.failure {
            // The join did not go through: the socket is back to hearing the lobby only.
            self.member = nil
            core.socketIO.roster.disconnected(id: member.id, nickname: member.displayName)
            ignored(.refused, "connectUser failed: \(failure.message)")
            return
        }
        memberLive = true
        if !inLobbyMirror {
            inLobbyMirror = true
            LoopContext.of(loop).socketChat.sessionJoined(snapshot, core: core)
        }
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
    // `rate_abuse_disconnect`. The bucket is the Engine.IO session's guard's, which applies
    // the rest of the policy (EngineIOSession+ConnectionPolicy.swift).

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
        // The lobby may have become unreadable for this socket, or readable again.
        if authError(.subscribe) == nil { startListening() } else { stopListening() }
    }
}

/// A SocketChat socket's ear on the lobby while it is not in it as a member: a hub listener
/// with a session id of its own, handing what it hears to its application, which shows it
/// only while its member subscription is not live. Loop-confined like its application.
final class SocketChatListener: RoomSubscriber {
    let sessionID: SessionID
    /// Unowned: the application outlives its listener's registration. It stays registered in
    /// the same local hub itself until `disconnected`, which unregisters this listener first.
    private unowned let app: SocketChatApplication

    init(app: SocketChatApplication, sessionID: SessionID) {
        self.app = app
        self.sessionID = sessionID
    }

    var wireFormat: WireFormat { app.wireFormat }
    func receive(_ event: RoomEvent, in room: RoomKey, frame: IOBuffer?) { app.listenerReceived(event, in: room, frame: frame) }
    func didSubscribe(_ snapshot: SubscribeSnapshot) { app.listenerSubscribed(snapshot) }
    func didUnsubscribe(from room: RoomKey) {}
}
