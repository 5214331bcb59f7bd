import ParleyCore
import ParleyIO

/// The line-protocol door (docs/protocols.md, "Line protocol"): plain TCP, `iam:NAME` then `msg:TEXT`, bridged
/// into the lobby room.
enum LineDoor {
    static func listen(core: ServerCore, group: EventLoopGroup) throws(IOError) -> TCPListener {
        return try core.listen(.line, port: core.configuration.linePort, group: group) { connection, ticket, policy in
            let session = LineSession(connection: connection, core: core,
                                      sessionGuard: SessionGuard(policy, loop: connection.loop, core: core, ticket: ticket))
            connection.handler = session
            LoopContext.of(connection.loop).loopHub.register(session)
            session.start()
        }
    }
}

/// One line-protocol connection.
final class LineSession: ConnectionHandler, RoomSubscriber, GracefulSession {
    let connection: TCPConnection
    let core: ServerCore
    var sessionID: SessionID { connection.id }
    let wireFormat = WireFormat.line
    private var decoder: LineDecoder
    /// The PROXY protocol header still expected first (a connection from a trusted proxy,
    /// with `--line-proxy-protocol`); nil once read, or for anyone else.
    private var proxyHeader: ProxyHeaderDecoder?
    private var quietTimer: LoopTimer?
    private var member: Member?
    /// The door policy's share of this connection: its place, the `iam:` deadline, the idle
    /// watch and the message rate.
    private let sessionGuard: SessionGuard
    /// The token sent with `auth:`, kept to verify it again after a reload (never logged).
    private var token: String?
    /// This loop's count of line deliveries.
    private let delivered: MetricCounter

    init(connection: TCPConnection, core: ServerCore, sessionGuard: SessionGuard) {
        self.connection = connection
        self.core = core
        self.sessionGuard = sessionGuard
        decoder = LineDecoder(maximumLength: core.configuration.lineMaxLength)
        if core.configuration.lineProxyProtocol, TrustedProxies(core.configuration.trustedProxies).trusts(connection.remoteIP) {
            proxyHeader = ProxyHeaderDecoder()
        }
        delivered = core.loopMetrics(connection.loop).delivered.counter(.line)
    }

    func start() {
        let timeout = sessionGuard.policy.handshakeTimeoutMillis
        sessionGuard.expectHandshake { [weak self] in
            guard let self, self.connection.state == .open else { return }
            self.reply("error: no iam:NAME within \(Self.seconds(timeout)) s; bye")
            self.connection.close()
        }
        let idle = sessionGuard.policy.idleTimeoutMillis
        sessionGuard.watchIdle { [weak self] in
            guard let self, self.connection.state == .open else { return }
            self.reply("idle timeout: nothing received for \(Self.seconds(idle)) s, bye")
            self.connection.close()
        }
    }

    static func seconds(_ millis: UInt64) -> String {
        millis % 1000 == 0 ? String(millis / 1000) : String(Double(millis) / 1000)
    }

    private var lobby: RoomKey { core.configuration.lobby }
    /// The lobby channel's auth rules and this connection's token (`auth:TOKEN`).
    private lazy var auth = ChannelAccess(channel: lobby.channel, core: core)

    /// Nil when the lobby allows `action` for this connection, else the error line's text.
    private func authError(_ action: AuthAction) -> String? {
        if let refusal = core.configuration.refusal(ofChannel: lobby.channel) { return refusal }
        if auth.requiresAuth && !auth.isAuthenticated {
            return "this lobby requires authentication: send auth:TOKEN first"
        }
        return auth.check(action, room: lobby.room, nowMillis: core.hub.clock.nowMillis()).error
    }

    // MARK: reading

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        sessionGuard.heard()
        if var header = proxyHeader {
            let event = header.feed(bytes)
            proxyHeader = header
            guard case .header(let found, let leftover) = event else {
                if case .invalid(let why) = event { refuseProxyHeader(why) }
                return
            }
            proxyHeader = nil
            guard acceptProxied(found) else { return }
            leftover.withUnsafeBytes { readLines($0) }
            return
        }
        readLines(bytes)
    }

    /// A trusted proxy sent garbage where its PROXY header belongs: nothing after it can be
    /// attributed to a client, so the connection ends.
    private func refuseProxyHeader(_ why: String) {
        core.logThrottle.log("proxy header", to: core.logger, .info, "line connection from a trusted proxy without a valid PROXY header",
                             metadata: ["remote": .string(connection.remoteAddress), "error": .string(why)])
        reply("error: \(why); bye")
        connection.close()
    }

    /// The header named the client: it counts per IP from now on and its bans apply. False
    /// when it was refused (and the connection closed).
    private func acceptProxied(_ header: ProxyHeader) -> Bool {
        if let source = header.source { connection.clientIP = source.description }
        if let refusal = sessionGuard.claim(ip: connection.clientIP) {
            core.limits.breached(refusal.limit, remote: connection.remoteAddress)
            reply("error: \(refusal.message)")
            connection.close()
            return false
        }
        if connection.clientIP != connection.remoteIP,
           let ban = core.bans.ban(ip: connection.clientIP, name: nil, nowMillis: core.hub.clock.nowMillis()) {
            core.logThrottle.log("banned", to: core.logger, .info, "banned address refused",
                                 metadata: ["door": "line", "remote": .string(connection.remoteAddress),
                                            "client": .string(connection.clientIP), "ban": .int(ban.id)])
            reply("error: your address is banned from this server")
            connection.close()
            return false
        }
        return true
    }

    private func readLines(_ bytes: UnsafeRawBufferPointer) {
        handle(decoder.feed(bytes))
        guard connection.state == .open else { return }
        if decoder.hasPendingBytes {
            // The original iOS client sends commands with no newline: a pause ends them.
            let timer = quietTimer ?? LoopTimer(loop: connection.loop)
            quietTimer = timer
            timer.start(after: core.configuration.lineQuietMillis) { [weak self] in
                guard let self else { return }
                self.handle(self.decoder.quietPeriodElapsed())
            }
        } else {
            quietTimer?.stop()
        }
    }

    private func handle(_ events: [LineDecoderEvent]) {
        for event in events {
            guard connection.state == .open else { return }
            switch event {
            case .tooLong:
                core.limits.breached(.messageSize, remote: connection.remoteAddress)
                reply("error: line too long (limit \(decoder.maximumLength) bytes); it was discarded")
            case .line(let bytes):
                handle(LineCommand.parse(bytes))
            }
        }
    }

    private func handle(_ command: LineCommand) {
        switch command {
        case .iam(let name):
            identify(as: name)
        case .msg(let text):
            guard let member else { reply("error: say who you are first with iam:NAME"); return }
            if let error = authError(.publish) {
                core.metrics.publishesRefused.counter(.forbidden).increment()
                reply("error: \(error); message not sent")
                return
            }
            switch sessionGuard.admitMessage() {
            case .allowed:
                break
            case .refused:
                reply("error: rate limit exceeded (\(Int(sessionGuard.ratePerSecond)) messages per second); message dropped")
                return
            case .abusive:
                reply("error: rate limit exceeded again and again; disconnected")
                connection.close()
                return
            }
            guard !text.isEmpty else { return }
            let me = LoopBound(self, on: connection.loop)
            do {
                let backlog = try core.hub.publish(.string(text), to: lobby, from: member) { result in
                    guard case .failure(let error) = result else { return }
                    me.execute { $0.reply("error: \(error.message); message not sent") }
                }
                sessionGuard.throttle(by: backlog, reading: connection)
            } catch {
                core.metrics.publishesRefused.counter(PublishRefusal(error)).increment()
                reply("error: \(error.message)")
            }
        case .auth(let token):
            // Tokens must say `client: "*"` or leave it out: a line connection has no id
            // before it joins.
            if member != nil {
                reply("error: authenticate before iam:NAME (already joined)")
            } else if let error = auth.authenticate(token, client: .wildcard) {
                core.logAuthFailure(door: .line, remote: connection.remoteAddress, channel: lobby.channel, reason: error)
                reply("error: authentication failed: \(error)")
            } else {
                self.token = token
                reply("auth ok")
            }
        case .unknown(let text):
            let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
            reply("error: unknown command \"\(LineEncoding.singleLine(shown))\"; use iam:NAME or msg:TEXT")
        }
    }

    private func identify(as name: String) {
        if let member {
            reply("error: already joined as \(member.displayName)")
            return
        }
        guard !name.isEmpty else { reply("error: iam needs a name, e.g. iam:alice"); return }
        if let error = authError(.subscribe) { reply("error: \(error)"); return }
        if let problem = MemberName.problem(with: name) {
            reply("error: \(problem.message)")
            return
        }
        if let ban = core.bans.ban(ip: connection.clientIP, name: name, nowMillis: core.hub.clock.nowMillis()) {
            core.logThrottle.log("banned", to: core.logger, .info, "banned client refused",
                                 metadata: ["door": "line", "remote": .string(connection.remoteAddress), "ban": .int(ban.id)])
            reply("error: banned from this server; bye")
            connection.close()
            return
        }
        sessionGuard.handshakeCompleted()
        let member = Member(id: "line-\(core.memberIDTag)\(connection.id)",
                            clientData: .object(["name": .string(name), "color": .string(NameColor.color(for: name))]),
                            authData: auth.claims?.data)
        self.member = member
        core.directory.register(ConnectedClient(id: member.id, door: .line, remoteIP: connection.clientIP, channel: lobby.channel,
                                                name: name, connectedAtMillis: core.hub.clock.nowMillis(),
                                                control: SessionControl(self, on: connection.loop)))
        do {
            try core.hub.subscribe(sessionID, as: member, to: lobby, inbox: core.inbox(for: connection.loop),
                                   historyCount: core.configuration.joinHistory)
        } catch {
            self.member = nil
            core.directory.unregister(member.id)
            reply("error: \(error.message)")
        }
    }

    /// Replies may quote what the client or an operator wrote (a command, a reason).
    private func reply(_ line: String) {
        connection.write(LineEncoding.singleLine(line) + "\n")
    }

    // MARK: room events

    func receive(_ event: RoomEvent, in room: RoomKey, frame: IOBuffer?) {
        if let frame {
            connection.write(frame)
            delivered.incrementFromOwner()
        }
        if case .roomClosed = event { connection.close() }
    }

    func didSubscribe(_ snapshot: SubscribeSnapshot) {
        if let failure = snapshot.failure {
            member = nil
            reply("error: \(failure.message)")
            return
        }
        // The lobby's recent messages first, as ordinary `NAME:TEXT` lines (the protocol has
        // no way to mark them), then the joiner's own join, which ends the history.
        for message in snapshot.history {
            if let frame = LineEncoding.encode(.message(message)) { connection.write(frame) }
        }
        // The joiner sees its own join like everybody else.
        if let member, let frame = LineEncoding.encode(.memberJoined(member)) { connection.write(frame) }
        // Messages published since it said `iam:` (while the join went round) come after it.
        for message in snapshot.replay {
            if let frame = LineEncoding.encode(.message(message)) { connection.write(frame) }
        }
    }

    func didUnsubscribe(from room: RoomKey) {}

    // MARK: closing

    func serverIsStopping() {
        reply("server is shutting down, bye")
        connection.close()
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        quietTimer?.stop()
        quietTimer = nil
        LoopContext.of(connection.loop).loopHub.unregister(sessionID)
        if let member {
            core.hub.unsubscribe(sessionID, from: lobby)
            core.directory.unregister(member.id)
        }
        sessionGuard.end(closing: connection, reason: reason)
    }
}

extension LineSession: AdministeredSession {
    func disconnect(byAdministrator reason: String) {
        guard connection.state == .open else { return }
        reply("disconnected by an administrator: \(LineEncoding.singleLine(reason)); bye")
        connection.close()
    }

    /// The lobby's channel must still be open, and this connection's token (or the lack of
    /// one) must still let it in; otherwise it is told and closed.
    func configurationReloaded() {
        guard connection.state == .open else { return }
        var fresh = ChannelAccess(channel: lobby.channel, core: core)
        var problem = core.configuration.refusal(ofChannel: lobby.channel)
        if problem == nil, let token {
            if let error = fresh.authenticate(token, client: .wildcard) { problem = "your token is no longer valid: \(error)" }
        } else if problem == nil, fresh.requiresAuth, member != nil {
            problem = "this lobby now requires authentication"
        }
        if let problem {
            reply("error: \(problem); bye")
            connection.close()
            return
        }
        auth = fresh
    }
}
