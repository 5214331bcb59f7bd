import ParleyCore
import ParleyIO

/// The line-protocol door (docs/protocols.md, "Line protocol"): plain TCP, `iam:NAME` then `msg:TEXT`, bridged
/// into the lobby room.
final class LineDoor: Door {
    var kind: DoorKind { .line }
    /// Each loop's transcript of the lobby (``LineTranscript``), for wording actions.
    let transcripts: LoopLocal<LineTranscript>

    init(group: EventLoopGroup) {
        transcripts = LoopLocal(group) { _ in LineTranscript() }
    }

    func serverIsStopping(_ core: ServerCore, on loop: EventLoop) {}

    func writeMetrics(_ core: ServerCore, into out: inout PrometheusText) {}

    func writeStatus(into w: inout JSONWriter) {}

    func stop() {}

    func listen(_ core: ServerCore, group: EventLoopGroup) throws(IOError) -> TCPListener? {
        let transcripts = self.transcripts
        return try core.listen(.line, port: core.configuration.linePort, group: group) { connection, ticket, policy in
            let session = LineSession(connection: connection, context: core.doorContext, transcript: transcripts[connection.loop],
                                      sessionGuard: SessionGuard(policy, loop: connection.loop, core: core, ticket: ticket))
            connection.handler = session
            core.loopHub(connection.loop).register(session)
            session.start()
        }
    }
}

/// One line-protocol connection: the line codec and its wording around a ``ChatSession``.
final class LineSession: ConnectionHandler, RoomSubscriber, GracefulSession {
    let connection: TCPConnection
    let context: DoorContext
    var sessionID: SessionID { connection.id }
    let wireFormat = WireFormat.line
    private var decoder: LineDecoder
    /// The PROXY protocol header still expected first (a connection from a trusted proxy,
    /// with `--line-proxy-protocol`); nil once read, or for anyone else.
    private var proxyHeader: ProxyHeaderDecoder?
    private var quietTimer: LoopTimer?
    /// The door policy's share of this connection: its place, the `iam:` deadline, the idle
    /// watch and the message rate.
    private let sessionGuard: SessionGuard
    /// The chat rules: the lobby's channel, the token, the member, bans, rates.
    private let chat: ChatSession
    /// The lobby (restart-only: fixed for the connection's life).
    private let lobby: RoomKey
    /// This loop's count of line deliveries.
    private let delivered: MetricCounter
    /// This loop's lobby transcript: what `reply:`, `react:` and `edit:` act on.
    private let transcript: LineTranscript

    init(connection: TCPConnection, context: DoorContext, transcript: LineTranscript, sessionGuard: SessionGuard) {
        self.connection = connection
        self.transcript = transcript
        self.context = context
        self.sessionGuard = sessionGuard
        let configuration = context.configuration
        lobby = configuration.lobby
        decoder = LineDecoder(maximumLength: configuration.lineMaxLength)
        if configuration.lineProxyProtocol, TrustedProxies(configuration.trustedProxies).trusts(connection.remoteIP) {
            proxyHeader = ProxyHeaderDecoder()
        }
        delivered = context.loopMetrics(connection.loop).delivered.counter(.line)
        chat = ChatSession(door: .line, context: context, sessionGuard: sessionGuard, sessionID: connection.id,
                           inbox: context.inbox(connection.loop), channel: lobby.channel,
                           clientIP: connection.clientIP, remote: connection.remoteAddress)
    }

    func start() {
        let timeout = sessionGuard.policy.handshakeTimeoutMillis
        sessionGuard.expectHandshake { [weak self] in
            guard let self, self.connection.state == .open else { return }
            self.reply("error: no iam:NAME within \(DoorWording.seconds(timeout)) s; bye")
            self.connection.close()
        }
        let idle = sessionGuard.policy.idleTimeoutMillis
        sessionGuard.watchIdle { [weak self] in
            guard let self, self.connection.state == .open else { return }
            self.reply("idle timeout: nothing received for \(DoorWording.seconds(idle)) s, bye")
            self.connection.close()
        }
    }

    /// The line door's words for a refusal.
    private func words(_ refusal: ChatRefusal) -> String {
        switch refusal.code {
        case .authRequired: "this lobby requires authentication: send auth:TOKEN first"
        case .authFailed: "authentication failed: \(refusal.message)"
        case .rateLimited: "rate limit exceeded (\(Int(sessionGuard.ratePerSecond)) messages per second); message dropped"
        case .rateAbuse: "rate limit exceeded again and again; disconnected"
        case .banned: "banned from this server; bye"
        default: refusal.message
        }
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
        context.logThrottle.log("proxy header", to: context.logger, .info, "line connection from a trusted proxy without a valid PROXY header",
                             metadata: ["remote": .string(connection.remoteAddress), "error": .string(why)])
        reply("error: \(why); bye")
        connection.close()
    }

    /// The header named the client: it counts per IP from now on and its bans apply. False
    /// when it was refused (and the connection closed).
    private func acceptProxied(_ header: ProxyHeader) -> Bool {
        if let source = header.source { connection.clientIP = source.description }
        chat.clientIP = connection.clientIP
        if let refusal = sessionGuard.claim(ip: connection.clientIP) {
            context.limits.breached(refusal.limit, remote: connection.remoteAddress)
            reply("error: \(refusal.message)")
            connection.close()
            return false
        }
        if connection.clientIP != connection.remoteIP, chat.banned(name: nil) != nil {
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
            timer.start(after: context.configuration.lineQuietMillis) { [weak self] in
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
                context.limits.breached(.messageSize, remote: connection.remoteAddress)
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
            guard chat.member != nil else { reply("error: say who you are first with iam:NAME"); return }
            if let refusal = chat.admitPublish(to: lobby.room) {
                reply("error: \(words(refusal))" + (refusal.code == .forbidden || refusal.code == .authRequired ? "; message not sent" : ""))
                if refusal.closes { connection.close() }
                return
            }
            guard !text.isEmpty else { return }
            let me = LoopBound(self, on: connection.loop)
            switch chat.publishAdmitted(.string(text), to: lobby.room, whenStored: { result in
                guard case .failure(let error) = result else { return }
                me.execute { $0.reply("error: \(error.message); message not sent") }
            }) {
            case .success(let backlog): sessionGuard.throttle(by: backlog, reading: connection)
            case .failure(let refusal): reply("error: \(words(refusal))")
            }
        case .auth(let token):
            // Tokens must say `client: "*"` or leave it out: a line connection has no id
            // before it joins.
            if chat.member != nil {
                reply("error: authenticate before iam:NAME (already joined)")
            } else if let refusal = chat.authenticate(token) {
                reply("error: \(words(refusal))")
            } else {
                reply("auth ok")
            }
        case .reply(let text):
            guard !text.isEmpty else { reply("error: reply needs a text, e.g. reply:me too"); return }
            act("reply", on: othersNewest) { .reply(to: $0, body: .string(text), messageID: nil) }
        case .react(let emoji), .unreact(let emoji):
            let adds = if case .react = command { true } else { false }
            guard !emoji.isEmpty else { reply("error: \(adds ? "react" : "unreact") needs an emoji, e.g. react:👍"); return }
            act(adds ? "react" : "unreact", on: othersNewest) { adds ? .react($0, emoji: emoji) : .unreact($0, emoji: emoji) }
        case .edit(let text):
            guard !text.isEmpty else { reply("error: edit needs the new text, e.g. edit:hello"); return }
            act("edit", on: { $0.senderID == $1 }) { .edit($0, body: .string(text)) }
        case .unknown(let text):
            reply("error: unknown command \"\(LineEncoding.singleLine(DoorWording.quoted(text)))\"; use iam:NAME or msg:TEXT")
        }
    }

    /// The newest lobby message of someone else (what `reply:` and `react:` act on).
    private func othersNewest(_ entry: LineTranscript.Entry, _ me: String) -> Bool { entry.senderID != me }

    /// An action on the newest message of the transcript that `picks` (given this member's
    /// id): ChatSession checks it; a refusal is told, a success shows as the room's event.
    private func act(_ name: String, on picks: (LineTranscript.Entry, String) -> Bool,
                     _ request: (String) -> MessageActionRequest) {
        guard let member = chat.member else { reply("error: say who you are first with iam:NAME"); return }
        guard let target = transcript.newest(where: { picks($0, member.id) }) else {
            reply(name == "edit" ? "error: you have no message to edit here" : "error: no message to \(name == "reply" ? "reply" : "react") to")
            return
        }
        let me = LoopBound(self, on: connection.loop)
        let refusal = chat.act(request(target.id), in: lobby.room) { result in
            guard case .failure(let refusal) = result else { return }
            me.execute { $0.reply("error: \($0.words(refusal))") }
        }
        if let refusal {
            reply("error: \(words(refusal))")
            if refusal.closes { connection.close() }
        }
    }

    private func identify(as name: String) {
        if let member = chat.member {
            reply("error: already joined as \(member.displayName)")
            return
        }
        guard !name.isEmpty else { reply("error: iam needs a name, e.g. iam:alice"); return }
        if let refusal = chat.channelRefusal(lobby.channel) { reply("error: \(words(refusal))"); return }
        if case .failure(let refusal) = chat.check(.subscribe, room: lobby.room) { reply("error: \(words(refusal))"); return }
        let id = "line-\(context.memberIDTag)\(connection.id)"
        if case .failure(let refusal) = chat.identify(as: id, name: name) {
            reply("error: \(words(refusal))")
            if refusal.closes { connection.close() }
            return
        }
        sessionGuard.handshakeCompleted()
        if let refusal = chat.enter(lobby.channel, as: id, name: name, control: SessionControl(self, on: connection.loop)) {
            chat.end()
            reply("error: \(words(refusal))")
            if refusal.closes { connection.close() }
            return
        }
        // The lobby's recent lines count against the address's history bytes; an address that
        // has spent them joins without (a line client cannot ask again for them).
        let history = chat.historyBudgetSpent() == nil ? context.configuration.joinHistory : 0
        if case .failure(let refusal) = chat.join(lobby.room, historyCount: history) {
            chat.end()
            reply("error: \(words(refusal))")
            if refusal.closes { connection.close() }
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

    /// A run of the lobby's messages: their lines back to back, in one write.
    var takesRuns: Bool { true }

    func receive(run events: ArraySlice<RoomEvent>, in room: RoomKey, frames: IOBuffer) {
        connection.write(frames)
        delivered.incrementFromOwner(by: events.count)
    }

    func didSubscribe(_ snapshot: SubscribeSnapshot) {
        if let failure = snapshot.failure {
            chat.end()
            reply("error: \(failure.message)")
            return
        }
        // The lobby's recent messages first, as ordinary `NAME:TEXT` lines (the protocol has
        // no way to mark them), then the joiner's own join, which ends the history.
        chat.historyCharge(snapshot.history)
        for message in snapshot.history {
            if let frame = LineEncoding.encode(.message(message), transcript: transcript) { connection.write(frame) }
        }
        // The joiner sees its own join like everybody else.
        if let member = chat.member, let frame = LineEncoding.encode(.memberJoined(member)) { connection.write(frame) }
        // Messages published since it said `iam:` (while the join went round) come after it.
        for message in snapshot.replay {
            if let frame = LineEncoding.encode(.message(message), transcript: transcript) { connection.write(frame) }
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
        context.loopHub(connection.loop).unregister(sessionID)
        chat.end()
        sessionGuard.end(closing: connection, reason: reason)
    }
}

extension LineSession: AdministeredSession {
    func disconnect(byAdministrator reason: String) {
        guard connection.state == .open else { return }
        reply("disconnected by an administrator: \(LineEncoding.singleLine(reason)); bye")
        connection.close()
    }

    /// The one reload rule (``ChatSession/reloaded()``); a refusal is told and closes.
    func configurationReloaded() {
        guard connection.state == .open, let refusal = chat.reloaded() else { return }
        reply("error: \(refusal.message); bye")
        connection.close()
    }
}
