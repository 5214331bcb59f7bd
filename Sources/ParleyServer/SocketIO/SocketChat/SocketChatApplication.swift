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
    let context: DoorContext
    /// The Socket.IO door's shared state (roster, counters, log, session ids).
    let shared: SocketIOShared
    /// This loop's SocketChat lobby mirror and encoder (the door's).
    private let fanOut: SocketChatFanOut
    /// The connection's Engine.IO session: room events, encoded once per loop for every
    /// socket on the same transport, go straight to it (see ``receive(_:in:frame:)``).
    let engineIO: any EngineIOMessageChannel
    let loop: EventLoop
    let sessionID: SessionID
    /// The socket on `/`, while connected.
    private var socket: SocketIOSocket?
    /// The chat rules: the lobby's channel, the token, the member, bans, rates.
    private let chat: ChatSession
    /// In the lobby (after `connectUser`).
    private var member: Member? { chat.member }
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
    /// Whether the socket asked for the opt-in action events (`subscribeActions`).
    private var wantsActions = false
    /// Whether this connection has had an ignored event logged (once per connection).
    private var loggedIgnored = false

    /// The lobby (restart-only: fixed for the connection's life).
    private let lobby: RoomKey

    /// `rate`: the guard of the Engine.IO session (for a WebSocket-only session, its
    /// connection's), whose message-rate bucket this application asks.
    init(context: DoorContext, shared: SocketIOShared, fanOut: SocketChatFanOut, engineIO: any EngineIOMessageChannel, rate: SessionGuard) {
        self.context = context
        self.shared = shared
        self.fanOut = fanOut
        self.engineIO = engineIO
        loop = engineIO.loop
        sessionID = shared.makeSessionID(loop: loop)
        lobby = context.configuration.lobby
        chat = ChatSession(door: .socketIO, context: context, sessionGuard: rate, sessionID: sessionID,
                           inbox: context.inbox(loop), channel: lobby.channel, clientIP: nil, remote: nil)
    }

    // MARK: Socket.IO

    func serves(_ namespace: String) -> Bool { namespace == "/" }

    func connect(_ socket: SocketIOSocket, _ request: SocketIOConnectRequest) -> SocketIOConnectDecision {
        // Engine.IO 3 sessions are connected to `/` at once, as by Socket.IO v2 servers; such a
        // client brings its token with a CONNECT of its own.
        chat.clientIP = remoteIP
        chat.remote = remoteIP
        if !request.isImplicit, let refusal = connectRefusal(request.auth) {
            return .refuse(refusal)
        }
        if let refusal = chat.enter(lobby.channel, as: socket.id, control: SessionControl(self, on: loop)) {
            return .refuse(refusal.message)
        }
        self.socket = socket
        context.loopHub(loop).register(self)
        fanOut.register(self)
        startListening()
        return .accept()
    }

    /// The socket hears the lobby from now on, when its token lets it read the lobby.
    private func startListening() {
        guard listener == nil, authError(.subscribe) == nil else { return }
        let listener = SocketChatListener(app: self, sessionID: shared.makeSessionID(loop: loop))
        context.loopHub(loop).register(listener)
        do {
            try context.hub.listen(listener.sessionID, to: lobby, inbox: context.inbox(loop))
            self.listener = listener
        } catch {
            context.loopHub(loop).unregister(listener.sessionID)
            shared.log.warning("socket.io: socket \(socket?.id ?? "?") cannot hear the lobby: \(error.message)")
        }
    }

    private func stopListening() {
        guard let listener else { return }
        self.listener = nil
        context.hub.unsubscribe(listener.sessionID, from: lobby)
        context.loopHub(loop).unregister(listener.sessionID)
        if listenerInLobbyMirror {
            listenerInLobbyMirror = false
            fanOut.sessionLeft()
        }
    }

    func received(_ event: SocketIOEvent, on socket: SocketIOSocket) {
        guard !event.nameIsNumber, SocketChatCommand.knows(event.name) else {
            return refuse(event, .unknownEvent, "unknown event \"\(DoorWording.quoted(event.name))\"; this server speaks \(SocketChatCommand.spoken)")
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
        if let member, shared.rosterSync != nil {
            // Cluster mode: the departure is in the cluster's roster before the lobby hears
            // the leave, so every node lists the user as disconnected with the leave.
            self.socket = nil
            let me = LoopBound(self, on: loop)
            shared.departed(id: member.id, nickname: member.displayName) { me.run { $0.finishDisconnect(departureRecorded: true) } }
            return
        }
        finishDisconnect(departureRecorded: false)
    }

    private func finishDisconnect(departureRecorded: Bool) {
        leaveLobby(exit: false, departureRecorded: departureRecorded)
        chat.end()
        stopListening()
        context.loopHub(loop).unregister(sessionID)
        fanOut.unregister(self)
        self.socket = nil
    }

    /// An event that is not done: with an ack id the ack says why (`[{"error": ...}]`);
    /// without one it is dropped, counted, and logged once per connection. A refused event
    /// is never answered with an event named `error`: older servers reserve that name, and
    /// Socket.IO-Client-Swift hands it to the app as a connection error (it is sent only
    /// right before the server ends the connection: an administrator's disconnect, a reload
    /// that no longer lets the socket in).
    private func refuse(_ event: SocketIOEvent, _ reason: SocketIOCounters.IgnoredEvent, _ message: String) {
        if let ack = event.ack {
            ack.send([["error": .string(message)]])
        } else {
            ignored(reason, message)
        }
    }

    private func ignored(_ reason: SocketIOCounters.IgnoredEvent, _ message: String) {
        shared.counters.ignoredEvent(reason)
        guard !loggedIgnored else { return }
        loggedIgnored = true
        let who = socket.map { "socket \($0.id)" } ?? "a socket"
        shared.log.warning("socket.io: \(who) sent an event that was dropped (\(reason.rawValue)): \(message); further drops on this connection are only counted")
    }

    private func emit(_ event: SocketChatEvent, on socket: SocketIOSocket) {
        socket.emit(event.name, event.arguments)
    }

    // MARK: auth

    /// Why a CONNECT is refused: the lobby channel is closed, needs a token and none came, or
    /// the token does not verify. Tokens must say `client: "*"` or leave it out (the socket id
    /// is only known after CONNECT).
    private func connectRefusal(_ data: JSONValue?) -> String? {
        if let refusal = chat.channelRefusal(lobby.channel) {
            context.logAuthFailure(door: .socketIO, remote: remoteIP, channel: lobby.channel, reason: refusal.message)
            return refusal.message
        }
        if let raw = data?["token"], !raw.isNull {
            guard let token = raw.stringValue else { return "authentication failed: auth.token must be a string" }
            if let refusal = chat.authenticate(token) { return "authentication failed: \(refusal.message)" }
            return nil
        }
        if chat.needsToken {
            context.logAuthFailure(door: .socketIO, remote: remoteIP, channel: lobby.channel, reason: Self.authRequired)
            return Self.authRequired
        }
        return nil
    }

    private static let authRequired = "this lobby requires authentication: connect with auth: {token: \"<JWT>\"}"

    /// Nil when the lobby lets this socket publish, else the error text (a refusal is
    /// counted, as on every door).
    private func publishError() -> String? {
        if let refusal = chat.channelRefusal(lobby.channel) { return refusal.message }
        guard let refusal = chat.permitPublish(to: lobby.room) else { return nil }
        return refusal.code == .authRequired ? Self.authRequired : refusal.message
    }

    /// Nil when the lobby allows `action` for this socket, else the error text.
    private func authError(_ action: AuthAction) -> String? {
        if let refusal = chat.channelRefusal(lobby.channel) { return refusal.message }
        guard case .failure(let refusal) = chat.check(action, room: lobby.room) else { return nil }
        return refusal.code == .authRequired ? Self.authRequired : refusal.message
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
        case .subscribeActions:
            wantsActions = true
            return .done
        case .connectUser(let nickname):
            if let member {
                if let error = authError(.subscribe) { return .refused(.refused, error) }
                guard member.displayName == nickname else { return .refused(.refused, "already connected as \(member.displayName); exitUser first") }
                // The whole list again, at the client's word: paced like a message, and the
                // loop's list as encoded once per change, not built again for each ask.
                if let refusal = rateRefusal(socket, isPublish: false) { return .refused(.rateLimited, refusal) }
                flushHeld()
                sendUserListNow()
                return .done
            }
            if let refusal = join(as: nickname, socket) { return .refused(refusal.reason, refusal.message) }
            return .done
        case .chatMessage(let nickname, let text):
            if let error = publishError() { return .refused(.refused, error) }
            let sender: Member
            switch implicitMember(nickname, socket) {
            case .success(let member): sender = member
            case .failure(let refusal): return .refused(refusal.reason, refusal.message)
            }
            if let refusal = rateRefusal(socket) { return .refused(.rateLimited, refusal + "; message dropped") }
            // The ack says the message is stored (durable): it is answered when the store has
            // it, or with the error when it could not be stored (and then nobody got it).
            let ack = event.ack
            let me = LoopBound(self, on: loop)
            switch chat.publishAdmitted(.string(text), to: lobby.room, as: sender, whenStored: { result in
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
            }) {
            case .success(let backlog): engineIO.throttle(by: backlog)
            case .failure(let refusal): return .refused(.refused, refusal.message)
            }
            return .answeredLater
        case .typing(let nickname, let flag):
            if let error = publishError() { return .refused(.refused, error) }
            // startType joins as its nickname; a stopType alone only clears the flag.
            let sender: Member
            if flag {
                switch implicitMember(nickname, socket) {
                case .success(let member): sender = member
                case .failure(let refusal): return .refused(refusal.reason, refusal.message)
                }
            } else {
                guard let member = member ?? anonymous(nickname, socket) else { return .refused(.refused, "connectUser first") }
                sender = member
            }
            if let refusal = rateRefusal(socket) { return .refused(.rateLimited, refusal) }
            switch chat.publishAdmitted(.object(["typing": .bool(flag)]), to: lobby.room, as: sender) {
            case .success(let backlog): engineIO.throttle(by: backlog)
            case .failure(let refusal): return .refused(.refused, refusal.message)
            }
            return .done
        case .exitUser(let nickname):
            if let member {
                shared.returned(nickname: member.displayName)
                leaveLobby(exit: true)
                // The leaver hears its own exit through its listener, as everybody does; a
                // socket that may not read the lobby has none and hears it from us.
                if listener == nil { emit(SocketChatEncoding.userExitUpdate(member.displayName), on: socket) }
            } else if let nickname {
                // Not in the lobby: it only forgets a departed user of that name (in a
                // cluster a write to Redis), so the name must be one and the ask is paced
                // like a message.
                guard SocketChatRoster.isValidNickname(nickname) else { return .refused(.refused, "exitUser needs a valid nickname") }
                if let refusal = rateRefusal(socket, isPublish: false) { return .refused(.rateLimited, refusal) }
                shared.returned(nickname: nickname)
            }
            return .done
        }
    }

    /// Joins the lobby as `nickname` (`connectUser`, or a `chatMessage` / `startType` from a
    /// socket that is not in it); nil when it went, else why not. A banned name never joins
    /// the lobby (the socket stays, refused each time).
    private func join(as nickname: String, _ socket: SocketIOSocket) -> JoinRefusal? {
        if let error = authError(.subscribe) { return JoinRefusal(reason: .refused, message: error) }
        if case .failure(let refusal) = chat.identify(as: socket.id, name: nickname) {
            return JoinRefusal(reason: .refused, message: refusal.message)
        }
        if case .failure(let refusal) = chat.join(lobby.room) {
            chat.forgetIdentity()
            switch refusal.code {
            case .rateAbuse:
                // Sustained abuse of the join rate closes, after the refusal is answered.
                LoopBound(socket, on: loop).execute { $0.closeConnection(reason: "rate limit exceeded") }
                return JoinRefusal(reason: .rateLimited, message: refusal.message)
            case .joinRateLimited:
                return JoinRefusal(reason: .rateLimited, message: refusal.message)
            default:
                return JoinRefusal(reason: .refused, message: refusal.message)
            }
        }
        shared.returned(nickname: nickname)
        return nil
    }

    /// The sender of a `chatMessage` or `startType`: the member, or, for a socket not in
    /// the lobby (an app that reconnected and never sends `connectUser` again), the member
    /// it becomes by joining as the event's nickname.
    private func implicitMember(_ nickname: String?, _ socket: SocketIOSocket) -> Result<Member, JoinRefusal> {
        if let member { return .success(member) }
        guard let nickname, SocketChatRoster.isValidNickname(nickname) else {
            return .failure(JoinRefusal(reason: .refused, message: "connectUser first"))
        }
        if let refusal = join(as: nickname, socket) { return .failure(refusal) }
        return member.map { .success($0) } ?? .failure(JoinRefusal(reason: .refused, message: "connectUser first"))
    }

    /// Why joining the lobby was refused, and how a dropped event is counted: over the join
    /// rate as `rate_limited`, anything else as `refused`.
    struct JoinRefusal: Error {
        let reason: SocketIOCounters.IgnoredEvent
        let message: String
    }

    /// A sender for a socket that only stops typing without being in the lobby.
    private func anonymous(_ nickname: String?, _ socket: SocketIOSocket) -> Member? {
        guard let nickname, SocketChatRoster.isValidNickname(nickname) else { return nil }
        return Member(id: socket.id, clientData: ["name": .string(nickname), "color": .string(NameColor.color(for: nickname))],
                      authData: chat.access?.claims?.data)
    }

    private func leaveLobby(exit: Bool, departureRecorded: Bool = false) {
        guard let member else { return }
        chat.forgetIdentity()
        memberLive = false
        // What was held goes first: an exiting socket keeps hearing the lobby, and what it
        // hears next must not overtake (or replace) it.
        if exit { flushHeld() }
        pacer.reset()
        pacerTimer?.stop()
        flushArmed = false
        if inLobbyMirror {
            inLobbyMirror = false
            fanOut.sessionLeft()
        }
        if !exit && !departureRecorded { shared.departed(id: member.id, nickname: member.displayName) }
        chat.leave(lobby)
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
        fanOut.sessionJoined(snapshot)
    }

    private func deliver(_ event: RoomEvent, frame: IOBuffer?) {
        // Packets of `/` encoded for this transport, the same bytes for every socket on it; a
        // join or leave leads with a userList that this socket paces (SocketChatUserListPacer).
        if event.changesMembers {
            if fanOut.rosterReadPending {
                // A leave in a cluster made this loop read the roster: this list (a leave's,
                // or a join's behind it) waits for the reads, so it shows the departure (at
                // most `rosterWaitMillis` from the first such hold; a flush armed earlier for
                // the window waits too).
                pacer.holdForRoster(at: nowMillis, waitMillis: Self.rosterWaitMillis)
                scheduleFlush()
            } else if pacer.userListDue(at: nowMillis) {
                sendUserListNow()
            } else {
                scheduleFlush()
            }
        }
        let transport = engineIO.transport
        if let frame {
            delivered.incrementFromOwner()
            if pacer.frame(frame, transport) { engineIO.sendPreEncoded(frame, as: transport) }
        }
        // The opt-in events come right after the classic ones, encoded once per loop too.
        if wantsActions, case .message = event, let extra = fanOut.optInFrame(wireFormat, lobby, event) {
            if pacer.frame(extra, transport) { engineIO.sendPreEncoded(extra, as: transport) }
        }
    }

    func didSubscribe(_ snapshot: SubscribeSnapshot) {
        guard let member, let socket, snapshot.room == lobby else { return }
        if let failure = snapshot.failure {
            // The join did not go through: the socket is back to hearing the lobby only.
            chat.forget(lobby)
            chat.forgetIdentity()
            shared.departed(id: member.id, nickname: member.displayName)
            ignored(.refused, "connectUser failed: \(failure.message)")
            return
        }
        memberLive = true
        if !inLobbyMirror {
            inLobbyMirror = true
            fanOut.sessionJoined(snapshot)
        }
        // Lobby events held while the socket only listened go before its own join's list.
        flushHeld()
        let users = shared.roster.users(connected: snapshot.members)
        let configuration = context.configuration
        emit(SocketChatEncoding.userList(users, limit: configuration.maxMembersListed, maxBytes: configuration.maxMembersListedBytes),
             on: socket)
        pacer.sent(at: nowMillis)
        emit(SocketChatEncoding.userConnectUpdate(SocketChatUser(id: member.id, nickname: member.displayName, isConnected: true)), on: socket)
    }

    // MARK: userList pacing

    private var nowMillis: Int64 { context.hub.clock.nowMillis() }

    /// The roster read after a lobby leave came back (``SocketChatFanOut/rosterSettled()``):
    /// what was held behind the leave's list goes now.
    func rosterSettled() {
        guard socket != nil else { return }
        flushHeld()
    }

    /// The cluster's roster changed elsewhere: send the list as it is now (paced).
    func rosterChanged() {
        // A held list goes with the new state anyway, in its place (before the leave it leads).
        guard socket != nil, !pacer.holdsList else { return }
        if pacer.userListDue(at: nowMillis) { sendUserListNow() } else { scheduleFlush() }
    }

    private func sendUserListNow() {
        let format = wireFormat
        let configuration = context.configuration
        let limit = SocketChatFanOut.ListLimit(count: configuration.maxMembersListed, bytes: configuration.maxMembersListedBytes)
        guard let list = fanOut.currentUserListFrame(format, limit: limit) else { return }
        engineIO.sendPreEncoded(list, as: format.engineIOTransport)
        pacer.sent(at: nowMillis)
    }

    /// Longest a leave's list waits for the cluster's roster.
    static let rosterWaitMillis: Int64 = 500

    /// Arms the flush of what the pacer holds for when it may go (``SocketChatUserListPacer/heldDelay(at:rosterPending:)``);
    /// when the timer fires early for it (roster reads went out meanwhile), it arms again.
    private func scheduleFlush() {
        guard !flushArmed else { return }
        let timer = pacerTimer ?? LoopTimer(loop: loop)
        pacerTimer = timer
        flushArmed = true
        timer.start(after: UInt64(max(1, heldDelay))) { [weak self] in
            guard let self else { return }
            flushArmed = false
            if heldDelay > 0 { scheduleFlush() } else { flushHeld() }
        }
    }

    private var heldDelay: Int64 { pacer.heldDelay(at: nowMillis, rosterPending: fanOut.rosterReadPending) }

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

    // MARK: - Operations: bans, the admin API, reloads

    /// The address of the connection that opened this session.
    private var remoteIP: String? { (engineIO as? EngineIOSession)?.remoteIP }
    /// This loop's count of Socket.IO deliveries.
    private lazy var delivered = context.loopMetrics(loop).delivered.counter(.socketIO)

    /// Takes a token from the rate: nil, or the refusal's text (a refusal is counted, and
    /// sustained abuse closes the connection after this refusal has been answered).
    private func rateRefusal(_ socket: SocketIOSocket, isPublish: Bool = true) -> String? {
        guard let refusal = chat.admitRate(isPublish: isPublish) else { return nil }
        if refusal.code == .rateAbuse {
            LoopBound(socket, on: loop).execute { $0.closeConnection(reason: "rate limit exceeded") }
        }
        return refusal.message
    }
}

extension SocketChatApplication: AdministeredSession {
    func disconnect(byAdministrator reason: String) {
        guard let socket else { return }
        socket.emit("error", [.string("disconnected by an administrator: \(reason)")])
        socket.closeConnection(reason: "disconnected by an administrator")
    }

    /// The one reload rule (``ChatSession/reloaded()``): a refusal is told (an `error`
    /// event) and disconnects.
    func configurationReloaded() {
        guard let socket else { return }
        if let refusal = chat.reloaded() {
            socket.emit("error", [.string("\(refusal.message); disconnecting")])
            socket.closeConnection(reason: "permissions changed")
            return
        }
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
    /// the same loop hub itself until `disconnected`, which unregisters this listener first.
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
