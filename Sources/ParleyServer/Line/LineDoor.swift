import ParleyCore
import ParleyIO

/// The line-protocol door (protocols.md §3): plain TCP, `iam:NAME` then `msg:TEXT`, bridged
/// into the lobby room.
enum LineDoor {
    static func listen(core: ServerCore, group: EventLoopGroup) throws(IOError) -> TCPListener {
        try TCPListener.bind(host: core.configuration.host, port: core.configuration.linePort, group: group) { connection in
            connection.maxQueuedBytes = core.configuration.writeQueueLimit
            if core.configuration.lineTLS, let tls = core.tls {
                do {
                    try connection.startTLS(tls)
                } catch {
                    return  // no handler: closed at once
                }
            }
            guard core.admit(connection, http: false) else { return }
            let session = LineSession(connection: connection, core: core)
            connection.handler = session
            LoopContext.of(connection.loop).localHub.register(session)
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
    private var quietTimer: LoopTimer?
    private var rate: TokenBucket
    private var member: Member?
    private var abuse: RateAbuseDetector
    /// Closes the connection when `iam:` does not come in time.
    private var handshakeTimer: LoopTimer?
    private var idleWatch: IdleWatch?
    /// Longest accepted name, in characters.
    static let maxNameLength = 64

    init(connection: TCPConnection, core: ServerCore) {
        self.connection = connection
        self.core = core
        decoder = LineDecoder(maximumLength: core.configuration.lineMaxLength)
        rate = TokenBucket(ratePerSecond: core.configuration.lineRatePerSecond, burst: core.configuration.lineBurst)
        abuse = RateAbuseDetector(ratePerSecond: core.configuration.lineRatePerSecond, configuration: core.configuration)
    }

    func start() {
        let timeout = core.configuration.handshakeTimeoutMillis
        let timer = LoopTimer(loop: connection.loop)
        handshakeTimer = timer
        timer.start(after: timeout) { [weak self] in
            guard let self, self.member == nil, self.connection.state == .open else { return }
            self.core.limits.breached(.handshakeTimeout)
            self.reply("error: no iam:NAME within \(Self.seconds(timeout)) s; bye")
            self.connection.close()
        }
        let idle = core.configuration.idleTimeoutMillis
        idleWatch = IdleWatch(loop: connection.loop, timeoutMillis: idle) { [weak self] in
            guard let self, self.connection.state == .open else { return }
            self.core.limits.breached(.idleTimeout)
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
        idleWatch?.touch()
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
                core.limits.breached(.messageSize)
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
            if let error = authError(.publish) { reply("error: \(error); message not sent"); return }
            let now = core.hub.clock.nowMillis()
            guard rate.take(nowMillis: now) else {
                core.limits.breached(.messageRate)
                if abuse.refused(nowMillis: now) {
                    core.limits.breached(.rateAbuseDisconnect)
                    reply("error: rate limit exceeded again and again; disconnected")
                    connection.close()
                    return
                }
                reply("error: rate limit exceeded (\(Int(rate.ratePerSecond)) messages per second); message dropped")
                return
            }
            guard !text.isEmpty else { return }
            let me = LoopBound(self, on: connection.loop)
            do {
                try core.hub.publish(.string(text), to: lobby, from: member) { result in
                    guard case .failure(let error) = result else { return }
                    me.run { $0.reply("error: \(error.message); message not sent") }
                }
            } catch {
                reply("error: \(error.message)")
            }
        case .auth(let token):
            // Tokens must say `client: "*"` or leave it out: a line connection has no id
            // before it joins.
            if member != nil {
                reply("error: authenticate before iam:NAME (already joined)")
            } else if let error = auth.authenticate(token, client: .wildcard) {
                reply("error: authentication failed: \(error)")
            } else {
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
        guard name.count <= Self.maxNameLength else {
            reply("error: name too long (limit \(Self.maxNameLength) characters)")
            return
        }
        guard !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            reply("error: name contains control characters")
            return
        }
        handshakeTimer?.stop()
        handshakeTimer = nil
        let member = Member(id: "line-\(connection.id)",
                            clientData: .object(["name": .string(name), "color": .string(NameColor.color(for: name))]),
                            authData: auth.claims?.data)
        self.member = member
        do {
            try core.hub.subscribe(sessionID, as: member, to: lobby, inbox: core.inbox(for: connection.loop),
                                   historyCount: core.configuration.joinHistory)
        } catch {
            self.member = nil
            reply("error: \(error.message)")
        }
    }

    private func reply(_ line: String) {
        connection.write(line + "\n")
    }

    // MARK: room events

    func receive(_ event: RoomEvent, in room: RoomKey, frame: IOBuffer?) {
        if let frame { connection.write(frame) }
    }

    func didSubscribe(_ snapshot: SubscribeSnapshot) {
        if let failure = snapshot.failure {
            member = nil
            reply("error: \(failure.message)")
            return
        }
        // The lobby's recent messages first, as ordinary `NAME:TEXT` lines (the protocol has
        // no way to mark them), then the joiner's own join, which ends the history.
        for message in snapshot.history + snapshot.replay {
            if let frame = LineEncoding.encode(.message(message)) { connection.write(frame) }
        }
        // The joiner sees its own join like everybody else.
        if let member, let frame = LineEncoding.encode(.memberJoined(member)) { connection.write(frame) }
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
        handshakeTimer?.stop()
        handshakeTimer = nil
        idleWatch?.stop()
        idleWatch = nil
        LoopContext.of(connection.loop).localHub.unregister(sessionID)
        if member != nil { core.hub.unsubscribe(sessionID, from: lobby) }
        core.release(connection)
    }
}
