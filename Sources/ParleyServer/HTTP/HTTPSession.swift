import ParleyCore
import ParleyHTTP
import ParleyIO
import ParleyWebSocket

/// One HTTP/1.1 connection: parses requests (pipelined, keep-alive), answers them through the
/// REST router, and hands the connection to a ``NativeSession`` on a WebSocket upgrade.
final class HTTPSession: ConnectionHandler, GracefulSession {
    let connection: TCPConnection
    let core: ServerCore
    let router: HTTPRouter<RESTHandler>
    private var parser: HTTPRequestParser
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var timer: LoopTimer?
    /// Whether the request timer (rather than the idle timer) is running.
    private var requestTimerRunning = false
    private var stopping = false
    private var upgraded = false
    /// A REST answer is being produced (off the loop); later requests wait, so responses go
    /// out in request order.
    private var answering = false
    /// What arrived while an answer was being produced, in order (bounded: reading stops
    /// until they are served).
    private var waiting: [Pending] = []
    private enum Pending {
        case request(HTTPRequestHead, [UInt8])
        case upgrade(HTTPRequestHead, [UInt8])
        case error(HTTPResponse)
        /// A file upload whose body was streamed to disk (Files/UploadReceiver.swift).
        case upload(HTTPRequestHead, UploadReceiver)
    }
    /// The upload whose body is being read: its bytes go to disk, not into `body`.
    private var upload: UploadReceiver?
    /// The upload asked to stop reading until the disk catches up.
    private var uploadPaused = false
    /// An upload was refused mid-body: what still arrives is dropped until the client stops
    /// sending, then the connection closes (closing at once would reset it, and the client
    /// might never read the answer).
    private var lingerUntilMillis: Int64?
    /// Most requests a client may pipeline behind one being answered.
    static let maxPipelined = 16
    /// This connection's part of the server's budget of unfinished bodies
    /// (``ServerCore/inboundBudget``): the one being read and those waiting their turn.
    private var inbound: InboundByteBudget.Share
    /// The door policy's share of this connection (admission, handshake timeout); handed on
    /// to the session that takes the connection over after an upgrade.
    let sessionGuard: SessionGuard

    init(connection: TCPConnection, core: ServerCore, router: HTTPRouter<RESTHandler>, sessionGuard: SessionGuard) {
        self.connection = connection
        self.core = core
        self.router = router
        self.sessionGuard = sessionGuard
        parser = HTTPRequestParser(limits: HTTPParserLimits(maxBodyBytes: core.configuration.httpMaxBodyBytes),
                                   bodyLimit: FileRoutes.bodyLimit(core.files))
        inbound = InboundByteBudget.Share(of: core.inboundBudget)
    }

    func start() {
        armIdleTimer()
        // Slow-loris: the first request (or upgrade) must be complete within the handshake
        // timeout, however the bytes trickle in.
        sessionGuard.expectHandshake { [weak self] in
            guard let self, self.connection.state == .open, !self.upgraded else { return }
            if self.head != nil || !self.parser.isIdle {
                self.connection.write(HTTPResponse.text(408, "request not completed within the handshake timeout\n").encoded(keepAlive: false))
            }
            self.connection.close()
        }
    }

    // MARK: reading

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        if let until = lingerUntilMillis {
            if core.hub.clock.nowMillis() >= until { connection.close() } else { timer?.restart(after: Self.lingerMillis) }
            return
        }
        let events = parser.feed(bytes)
        for event in events {
            guard connection.state == .open, !upgraded, lingerUntilMillis == nil else { return }
            switch event {
            case .head(let head):
                self.head = head
                body = []
                if head.method == "POST", FileRoutes.uploadChannel(head) != nil {
                    // Answered in turn, but its budget is taken now: its client is this head's.
                    connection.clientIP = clientIP(of: head)
                }
                upload = UploadReceiver.start(head, core: core, connection: connection) { [weak self] in self?.uploadEvent($0) }
                // An upload may take longer than a handshake: its own timers watch it.
                if upload?.isAccepted == true { sessionGuard.handshakeCompleted() }
            case .body(let bytes):
                if let upload { upload.receive(bytes) } else { body.append(contentsOf: bytes) }
            case .end:
                guard let head else { continue }
                self.head = nil
                sessionGuard.handshakeCompleted()
                if let upload {
                    self.upload = nil
                    upload.bodyComplete()
                    handle(.upload(head, upload))
                    continue
                }
                let request = body
                body = []
                handle(.request(head, request))
            case .upgrade(let leftover):
                guard let head else { continue }
                self.head = nil
                sessionGuard.handshakeCompleted()
                handle(.upgrade(head, leftover))
                return
            case .error(let error):
                if error.response.status == 413 {
                    core.limits.breached(.messageSize, remote: connection.remoteAddress)
                    if let head = head ?? parser.rejectedHead, core.doors.mounted(at: head.path, core: core)?.requestTooLarge(head, core: core) == true {
                        connection.close()
                        return
                    }
                }
                handle(.error(error.response))
                return
            }
        }
        guard connection.state == .open, !upgraded, lingerUntilMillis == nil else { return }
        guard holdBodies() else { return }
        if parser.isIdle && head == nil {
            armIdleTimer()
        } else if upload != nil {
            startUploadTimer()
        } else if !requestTimerRunning {
            // Started once per request: a client trickling bytes cannot keep it alive.
            requestTimerRunning = true
            timerObject().start(after: core.configuration.httpRequestTimeoutMillis) { [weak self] in
                guard let self, self.connection.state == .open else { return }
                self.connection.write(HTTPResponse.text(408, "request timed out\n").encoded(keepAlive: false))
                self.connection.close()
            }
        }
    }

    /// The body being read and those of the requests waiting their turn (at most
    /// ``maxPipelined``).
    private var bodyBytesHeld: Int {
        var bytes = body.count
        for case .request(_, let waiting) in waiting { bytes += waiting.count }
        return bytes
    }

    /// Counts the bodies this connection holds in the server's inbound budget; past it, one
    /// that holds more than its free share gets 503 and is closed.
    private func holdBodies() -> Bool {
        guard !inbound.hold(bodyBytesHeld) else { return true }
        var response = HTTPResponse.text(503, "the server holds too many unfinished requests; try again later\n")
        response.headers.set("Retry-After", "5")
        connection.write(response.encoded(keepAlive: false))
        connection.close()
        return false
    }

    private func timerObject() -> LoopTimer {
        if let timer { return timer }
        let timer = LoopTimer(loop: connection.loop)
        self.timer = timer
        return timer
    }

    /// While an upload's body streams in, the request timeout limits silence, not the whole
    /// upload (which has its own deadline, ``ServerConfiguration/uploadTimeoutMillis``).
    private func startUploadTimer() {
        requestTimerRunning = true
        timerObject().start(after: core.configuration.httpRequestTimeoutMillis) { [weak self] in
            guard let self, self.connection.state == .open else { return }
            self.connection.write(HTTPResponse.text(408, "request timed out\n").encoded(keepAlive: false))
            self.connection.close()
        }
    }

    private func uploadEvent(_ event: UploadReceiver.Event) {
        guard connection.state == .open else { return }
        let firstInLine = !answering && waiting.isEmpty
        switch event {
        case .pauseReading:
            uploadPaused = true
            connection.stopReading()
            timer?.stop()  // the disk is slow, not the client
        case .resumeReading:
            uploadPaused = false
            if waiting.count < Self.maxPipelined { connection.startReading() }
            if upload != nil { startUploadTimer() }
        case .sendContinue:
            if firstInLine { connection.write(HTTPResponse(status: 100).encoded(keepAlive: true)) }
        case .refused(let response):
            // First in line: answer now, without parsing a body nobody wants. Otherwise the
            // rest of the body is read and dropped, and the answer waits its turn.
            if firstInLine {
                connection.write(response.encoded(keepAlive: false))
                lingerThenClose()
            }
        }
    }

    /// How long a lingering connection waits for more bytes; how long it lingers at most.
    static let lingerMillis: UInt64 = 1_000
    static let maxLingerMillis: Int64 = 10_000

    private func lingerThenClose() {
        upload?.abort()
        upload = nil
        head = nil
        lingerUntilMillis = core.hub.clock.nowMillis() + Self.maxLingerMillis
        if uploadPaused {
            uploadPaused = false
            connection.startReading()
        }
        timerObject().start(after: Self.lingerMillis) { [weak self] in self?.connection.close() }
    }

    private func armIdleTimer() {
        requestTimerRunning = false
        timerObject().start(after: core.configuration.httpIdleTimeoutMillis) { [weak self] in
            self?.connection.close()
        }
    }

    /// Serves `pending` now, or after the answers before it.
    private func handle(_ pending: Pending) {
        guard !answering else {
            waiting.append(pending)
            if waiting.count >= Self.maxPipelined { connection.stopReading() }
            return
        }
        switch pending {
        case .request(let head, _) where refuseByOrigin(head) || refuseClient(head),
             .upgrade(let head, _) where refuseByOrigin(head) || refuseClient(head):
            return
        case .request(let head, let body): respond(to: head, body: body)
        case .upgrade(let head, let leftover): upgrade(head, leftover: leftover)
        case .error(let response):
            // The client may still be sending (a body over the limit, refused from its
            // Content-Length): closing now would reset the connection, and the client might
            // never read why. Drop what still comes, then close.
            connection.write(response.encoded(keepAlive: false))
            lingerThenClose()
        case .upload(let head, let receiver):
            answering = true
            let keepAlive = head.keepAlive && !stopping
            receiver.answer { [weak self] response, close in
                self?.answered(response, head: head, keepAlive: keepAlive && !close)
            }
        }
    }

    /// Answers a request from a page that may not use this server, or for a host it does
    /// not serve (``WebOriginPolicy``), and closes; true when it did.
    private func refuseByOrigin(_ head: HTTPRequestHead) -> Bool {
        guard let (status, text) = core.webOrigins.refusal(head) else { return false }
        core.limits.breached(.webOrigin, remote: connection.remoteAddress)
        connection.write(HTTPResponse.text(status, text).encoded(keepAlive: false))
        connection.close()
        return true
    }

    /// The client of `head`: the peer, or from a trusted proxy the address its `Forwarded`
    /// or `X-Forwarded-For` names (``TrustedProxies``).
    private func clientIP(of head: HTTPRequestHead) -> String {
        // A request another node of the cluster handed on names its client (EngineIORelay).
        if let client = head.headers[EngineIORelay.clientHeader], !client.isEmpty, client.utf8.count <= 64,
           let relay = core.engineIORelay.service, relay.isFromNode(head) {
            return client
        }
        let proxies = TrustedProxies(core.configuration.trustedProxies)
        guard !proxies.isEmpty else { return connection.remoteIP }
        return proxies.client(peer: connection.remoteIP, forwarded: head.headers.values("Forwarded"),
                              forwardedFor: head.headers.values("X-Forwarded-For"))
    }

    /// Takes `head`'s client as the connection's (a proxy's keep-alive connection carries
    /// many clients, one per request) and refuses a banned one that came through a proxy
    /// (the peer itself was checked at accept); true when it did.
    private func refuseClient(_ head: HTTPRequestHead) -> Bool {
        connection.clientIP = clientIP(of: head)
        guard connection.clientIP != connection.remoteIP,
              let ban = core.bans.ban(ip: connection.clientIP, name: nil, nowMillis: core.hub.clock.nowMillis()) else { return false }
        core.logThrottle.log("banned", to: core.logger, .info, "banned address refused",
                             metadata: ["door": "http", "remote": .string(connection.remoteAddress),
                                        "client": .string(connection.clientIP), "ban": .int(ban.id)])
        connection.write(HTTPResponse.text(403, "your address is banned from this server\n").encoded(keepAlive: false))
        connection.close()
        return true
    }

    /// A trusted proxy's connection becomes one client's (an upgrade): that client now
    /// counts against the per-IP connection limit; true when it is over and was refused.
    private func refuseOverPerIPLimit() -> Bool {
        guard let refusal = sessionGuard.claim(ip: connection.clientIP) else { return false }
        core.limits.breached(refusal.limit, remote: connection.remoteAddress)
        var response = HTTPResponse.text(503, refusal.message + "\n")
        response.headers.set("Retry-After", "5")
        connection.write(response.encoded(keepAlive: false))
        connection.close()
        return true
    }

    /// An answer produced off the loop is ready: send it, then serve what waited.
    private func answered(_ response: HTTPResponse, head: HTTPRequestHead, keepAlive: Bool) {
        answering = false
        guard connection.state == .open else { return }
        send(response, head: head, keepAlive: keepAlive && !stopping)
        serveWaiting()
    }

    /// Serves what waited behind an answer, then reads on.
    private func serveWaiting() {
        guard connection.state == .open else { return }
        while !answering, !waiting.isEmpty, connection.state == .open, !upgraded {
            handle(waiting.removeFirst())
        }
        _ = inbound.hold(bodyBytesHeld)
        if waiting.isEmpty, connection.state == .open, !upgraded, !uploadPaused { connection.startReading() }
    }

    private func send(_ response: HTTPResponse, head: HTTPRequestHead, keepAlive: Bool) {
        var response = response
        if head.method == "HEAD" {
            response.headers.set("Content-Length", String(response.body.count))
            response.body = []
        }
        connection.write(response.encoded(keepAlive: keepAlive))
        if !keepAlive { connection.close() }
    }

    private func respond(to head: HTTPRequestHead, body: [UInt8]) {
        let keepAlive = head.keepAlive && !stopping
        if let door = core.doors.mounted(at: head.path, core: core) {
            door.handle(head, body: body, connection: connection, keepAlive: keepAlive, core: core)
            return
        }
        // A file download streams from disk (Files/DownloadStreamer.swift).
        answering = true
        let started = DownloadStreamer.start(head, connection: connection, core: core, keepAlive: keepAlive,
                                             progress: { [weak self] in self?.armIdleTimer() }) { [weak self] response in
            guard let self else { return }
            if let response { return self.answered(response, head: head, keepAlive: keepAlive) }
            self.answering = false
            self.armIdleTimer()
            self.serveWaiting()
        }
        if started { return }
        answering = false
        var response: HTTPResponse
        if let asset = WebClient.response(for: head) ?? AdminDashboard.response(for: head) {
            // The browser client or the admin dashboard; HEAD is already answered with the
            // file's length.
            connection.write(asset.encoded(keepAlive: keepAlive))
            if !keepAlive { connection.close() }
            return
        }
        // `/healthz`, `/readyz`, `/metrics`, `/admin/api/…`: probes and requests carrying
        // the right token skip the REST rate limit.
        let operations = OperationsRoutes.route(head, core: core)
        if operations == nil && (head.path == HTTPDoor.nativePath || isEchoPath(head.path)) {
            response = .text(426, "this endpoint speaks WebSocket only\n")
            response.headers.set("Upgrade", "websocket")
        } else if operations?.exemptFromRateLimit != true,
                  let refusal = core.restRate.refusal(of: connection, "requests", counting: .restRate, in: core) {
            response = refusal
        } else {
            // Routes answer when they have the answer (a publish once it is durable): off the
            // loop, then back on it in request order.
            answering = true
            let me = LoopBound(self, on: connection.loop)
            let (router, core, remote, clientIP) = (self.router, self.core, connection.remoteAddress, connection.clientIP)
            Task {
                let response: HTTPResponse
                if let operations {
                    response = await operations.handler(RESTRequest(head: head, params: operations.params, body: body, remote: remote), core)
                } else {
                    response = await RESTRoutes.handle(router: router, head: head, body: body, remote: remote, clientIP: clientIP, core: core)
                }
                me.run { $0.answered(response, head: head, keepAlive: keepAlive) }
            }
            return
        }
        send(response, head: head, keepAlive: keepAlive)
    }

    private func upgrade(_ head: HTTPRequestHead, leftover: [UInt8]) {
        if refuseOverPerIPLimit() { return }
        if let door = core.doors.mounted(at: head.path, core: core) {
            timer?.stop()
            if door.upgrade(head, leftover: leftover, connection: connection, core: core, from: sessionGuard) {
                upgraded = true
                timer = nil
            }
            return
        }
        guard head.path == HTTPDoor.nativePath || isEchoPath(head.path) else {
            connection.write(HTTPResponse.text(404, "not found\n").encoded(keepAlive: false))
            connection.close()
            return
        }
        let echo = isEchoPath(head.path)
        // The echo endpoint answers what comes and pings no one.
        let options = WebSocketServerConnection.Options(configuration: HTTPDoor.webSocketConfiguration(core.configuration),
                                                        pingIntervalMilliseconds: echo ? nil : core.configuration.webSocketPingIntervalMillis,
                                                        inboundBudget: core.inboundBudget)
        guard let webSocket = WebSocketServerConnection.upgrade(head, connection: connection, options: options) else { return }
        upgraded = true
        timer?.stop()
        timer = nil
        if echo {
            webSocket.open(delegate: EchoSession(sessionGuard: takeOver(as: .echo)), leftover: leftover)
            return
        }
        let session = NativeSession(webSocket: webSocket, context: core.doorContext, files: core.files, sessionGuard: takeOver(as: .native))
        core.loopHub(connection.loop).register(session)
        session.start()
        webSocket.open(delegate: session, leftover: leftover)
    }

    /// This connection's guard, now under the policy of the door it is upgraded to.
    private func takeOver(as door: DoorKind) -> SessionGuard {
        sessionGuard.enter(DoorPolicy(door, core.configuration))
        return sessionGuard
    }

    /// The diagnostic echo endpoint (``EchoSession``), when `--ws-echo-path` enables it.
    private func isEchoPath(_ path: String) -> Bool {
        guard let echo = core.configuration.webSocketEchoPath else { return false }
        return path == echo
    }

    // MARK: closing

    func serverIsStopping() {
        stopping = true
        // Idle: close now. Mid-request: the response goes out with `Connection: close`.
        if parser.isIdle && head == nil && !answering && waiting.isEmpty { connection.close() }
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        inbound.release()
        timer?.stop()
        timer = nil
        upload?.abort()
        upload = nil
        for case .upload(_, let receiver) in waiting { receiver.abort() }
        for door in core.doors.mounted { door.connectionClosed(connection, core: core) }
        sessionGuard.end(closing: connection, reason: reason)
    }
}
