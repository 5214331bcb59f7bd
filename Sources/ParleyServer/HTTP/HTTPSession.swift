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
    }
    /// Most requests a client may pipeline behind one being answered.
    static let maxPipelined = 16
    /// The door policy's share of this connection (admission, handshake timeout); handed on
    /// to the session that takes the connection over after an upgrade.
    let sessionGuard: SessionGuard

    init(connection: TCPConnection, core: ServerCore, router: HTTPRouter<RESTHandler>, sessionGuard: SessionGuard) {
        self.connection = connection
        self.core = core
        self.router = router
        self.sessionGuard = sessionGuard
        parser = HTTPRequestParser(limits: HTTPParserLimits(maxBodyBytes: core.configuration.httpMaxBodyBytes))
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
        let events = parser.feed(bytes)
        for event in events {
            guard connection.state == .open, !upgraded else { return }
            switch event {
            case .head(let head):
                self.head = head
                body = []
            case .body(let bytes):
                body.append(contentsOf: bytes)
            case .end:
                guard let head else { continue }
                self.head = nil
                let request = body
                body = []
                sessionGuard.handshakeCompleted()
                handle(.request(head, request))
            case .upgrade(let leftover):
                guard let head else { continue }
                self.head = nil
                sessionGuard.handshakeCompleted()
                handle(.upgrade(head, leftover))
                return
            case .error(let error):
                if error.response.status == 413 {
                    core.limits.breached(.messageSize)
                    if let head = head ?? parser.rejectedHead, SocketIODoor.requestTooLarge(head, core: core) {
                        connection.close()
                        return
                    }
                }
                handle(.error(error.response))
                return
            }
        }
        guard connection.state == .open, !upgraded else { return }
        if parser.isIdle && head == nil {
            armIdleTimer()
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

    private func timerObject() -> LoopTimer {
        if let timer { return timer }
        let timer = LoopTimer(loop: connection.loop)
        self.timer = timer
        return timer
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
        case .request(let head, let body): respond(to: head, body: body)
        case .upgrade(let head, let leftover): upgrade(head, leftover: leftover)
        case .error(let response):
            connection.write(response.encoded(keepAlive: false))
            connection.close()
        }
    }

    /// An answer produced off the loop is ready: send it, then serve what waited.
    private func answered(_ response: HTTPResponse, head: HTTPRequestHead, keepAlive: Bool) {
        answering = false
        guard connection.state == .open else { return }
        send(response, head: head, keepAlive: keepAlive && !stopping)
        guard connection.state == .open else { return }
        while !answering, !waiting.isEmpty, connection.state == .open, !upgraded {
            handle(waiting.removeFirst())
        }
        if waiting.isEmpty, connection.state == .open, !upgraded { connection.startReading() }
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
        if SocketIODoor.handles(head.path, core: core) {
            SocketIODoor.handle(head, body: body, connection: connection, keepAlive: keepAlive, core: core)
            return
        }
        var response: HTTPResponse
        if let asset = WebClient.response(for: head) {
            // The browser client; HEAD is already answered with the file's length.
            connection.write(asset.encoded(keepAlive: keepAlive))
            if !keepAlive { connection.close() }
            return
        }
        if head.path == "/metrics" && (head.method == "GET" || head.method == "HEAD") {
            response = .text(200, core.metricsText())
            response.headers.set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        } else if head.path == HTTPDoor.nativePath || isEchoPath(head.path) {
            response = .text(426, "this endpoint speaks WebSocket only\n")
            response.headers.set("Upgrade", "websocket")
        } else if !core.restRate.allow(ip: connection.remoteIP, nowMillis: core.hub.clock.nowMillis()) {
            core.limits.breached(.restRate)
            response = .text(429, "too many requests (limit \(Int(core.configuration.restRatePerSecond)) per second per address); slow down\n")
            response.headers.set("Retry-After", String(core.restRate.retryAfterSeconds))
        } else {
            // Routes answer when they have the answer (a publish once it is durable): off the
            // loop, then back on it in request order.
            answering = true
            let me = LoopBound(self, on: connection.loop)
            let (router, core) = (self.router, self.core)
            Task {
                let response = await RESTRoutes.handle(router: router, head: head, body: body, core: core)
                me.run { $0.answered(response, head: head, keepAlive: keepAlive) }
            }
            return
        }
        send(response, head: head, keepAlive: keepAlive)
    }

    private func upgrade(_ head: HTTPRequestHead, leftover: [UInt8]) {
        if SocketIODoor.handles(head.path, core: core) {
            timer?.stop()
            if SocketIODoor.upgrade(head, leftover: leftover, connection: connection, core: core, from: sessionGuard) {
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
        let configuration = HTTPDoor.webSocketConfiguration(core.configuration)
        let headers = head.headers
        let result = WebSocketHandshake.serverResponse(method: head.method, versionMinor: head.versionMinor, header: { name in
            let values = headers.values(name)
            return values.isEmpty ? nil : values.joined(separator: ", ")
        }, configuration: configuration)
        switch result {
        case .failure(let error):
            var response = HTTPResponse.text(error.status, error.message + "\n")
            for (name, value) in error.headers { response.headers.add(name, value) }
            connection.write(response.encoded(keepAlive: false))
            connection.close()
        case .success(let (responseHeaders, deflate)):
            upgraded = true
            timer?.stop()
            timer = nil
            connection.write(HTTPResponse(status: 101, headers: HTTPHeaders(responseHeaders)).encoded(keepAlive: true))
            if isEchoPath(head.path) {
                let echo = EchoSession(connection: connection, core: core, webSocket: configuration, deflate: deflate,
                                       sessionGuard: takeOver(as: .echo))
                connection.handler = echo
                if !leftover.isEmpty {
                    leftover.withUnsafeBytes { echo.connection(connection, didRead: $0) }
                }
                return
            }
            let session = NativeSession(connection: connection, core: core, webSocket: configuration, deflate: deflate,
                                        sessionGuard: takeOver(as: .native))
            connection.handler = session
            LoopContext.of(connection.loop).localHub.register(session)
            session.start()
            if !leftover.isEmpty {
                leftover.withUnsafeBytes { session.connection(connection, didRead: $0) }
            }
        }
    }

    /// The policy of the door this connection is upgraded to, with this connection's place.
    private func takeOver(as door: DoorKind) -> SessionGuard {
        let next = SessionGuard(DoorPolicy(door, core.configuration), loop: connection.loop, core: core, ticket: nil)
        next.takeTicket(from: sessionGuard)
        return next
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
        timer?.stop()
        timer = nil
        SocketIODoor.connectionClosed(connection, core: core)
        sessionGuard.end()
    }
}
