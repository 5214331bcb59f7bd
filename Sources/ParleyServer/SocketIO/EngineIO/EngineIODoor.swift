import ParleyCore
import ParleyHTTP
import ParleyIO
import ParleyWebSocket

/// An Engine.IO 3 and 4 server over HTTP long-polling and WebSocket, at one path of the HTTP
/// door. It opens sessions and routes every later request to its session's loop; what sits
/// on each session comes from `makeHandler` (the Socket.IO door puts Socket.IO there).
struct EngineIODoor {
    let core: ServerCore
    /// The Socket.IO door's shared state: every loop's Engine.IO state, the polling caps.
    let shared: SocketIOShared
    /// This door's sessions.
    let sessions: EngineIOSessionRegistry
    /// The protocol revisions this door speaks: 3 and 4 for SocketChat (old Swift clients),
    /// 4 only for the diagnostic endpoints (their conformance suites refuse a missing `EIO`).
    var versions: Set<EngineIOVersion> = [.v3, .v4]
    /// Makes the layer above a new session, on its loop.
    let makeHandler: (EngineIOSession) -> any EngineIOSessionHandler

    static func webSocketConfiguration(_ configuration: ServerConfiguration) -> WebSocketConfiguration {
        WebSocketConfiguration(maxMessageSize: configuration.socketIOMaxPayload, maxFrameSize: configuration.socketIOMaxPayload,
                               offersDeflate: false, acceptsDeflate: false)
    }

    /// CORS for browser pages on other origins: echo the Origin, allow credentials.
    static func addCORS(_ response: inout HTTPResponse, origin: String?) {
        for (name, value) in corsHeaders(origin: origin) { response.headers.set(name, value) }
    }

    /// The CORS header fields for a request from `origin` (none without one).
    static func corsHeaders(origin: String?) -> [(name: String, value: String)] {
        guard let origin else { return [] }
        return [("Access-Control-Allow-Origin", origin), ("Access-Control-Allow-Credentials", "true"), ("Vary", "Origin")]
    }

    static func errorResponse(_ status: Int, code: Int, _ message: String) -> HTTPResponse {
        var w = JSONWriter()
        w.beginObject()
        w.key("code"); w.writeInt(code)
        w.key("message"); w.writeString(message)
        w.endObject()
        return .json(status, w.bytes)
    }

    /// Answers a client with `response` (and CORS) and closes: what a relay that failed says.
    static func refusal(origin: String?) -> @Sendable (TCPConnection, HTTPResponse) -> Void {
        { connection, response in
            var response = response
            addCORS(&response, origin: origin)
            connection.write(response.encoded(keepAlive: false))
            connection.close()
        }
    }

    static func payloadResponse(_ bytes: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: 200, headers: ["Content-Type": "text/plain; charset=UTF-8", "Cache-Control": "no-store"], body: bytes)
    }

    // MARK: polling

    /// Answers (now or later) one request on the door's path.
    func handle(_ head: HTTPRequestHead, body: [UInt8], connection: TCPConnection, keepAlive: Bool) {
        let origin = head.headers["Origin"]
        func reply(_ response: HTTPResponse) {
            var response = response
            Self.addCORS(&response, origin: origin)
            connection.write(response.encoded(keepAlive: keepAlive))
            if !keepAlive { connection.close() }
        }
        if head.method == "OPTIONS" {
            var response = HTTPResponse(status: 204)
            response.headers.set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
            response.headers.set("Access-Control-Allow-Headers", head.headers["Access-Control-Request-Headers"] ?? "Content-Type")
            response.headers.set("Access-Control-Max-Age", "86400")
            return reply(response)
        }
        // Before routing, like REST: a flood of polling requests costs a table lookup, not
        // a hop to another loop.
        let relay = core.engineIORelay.service
        // A request another node handed on was counted there.
        let fromNode = relay?.isFromNode(head) == true
        if !fromNode, let refusal = shared.pollingRate.refusal(of: connection, "polling requests", counting: .pollingRate, in: core) {
            return reply(refusal)
        }
        guard let version = version(of: head) else {
            return reply(Self.errorResponse(400, code: 5, unsupportedVersionMessage))
        }
        guard head.query("transport") == "polling" else {
            if head.query("transport") == "websocket" {
                return reply(Self.errorResponse(400, code: 3, "Bad request: websocket transport needs an Upgrade"))
            }
            return reply(Self.errorResponse(400, code: 0, "Transport unknown"))
        }
        guard head.method == "GET" || head.method == "POST" else {
            return reply(Self.errorResponse(400, code: 2, "Bad handshake method"))
        }
        guard let sid = head.query("sid") else {
            guard head.method == "GET" else { return reply(Self.errorResponse(400, code: 2, "Bad handshake method")) }
            let ticket: AdmissionTicket
            switch admitPollingSession(ip: connection.clientIP) {
            case .refused(let response): return reply(response)
            case .admitted(let admitted): ticket = admitted
            }
            let session = EngineIOSession.open(core: core, shared: shared, loop: connection.loop, version: version, webSocket: nil,
                                               registry: sessions, admission: ticket, makeHandler: makeHandler)
            session.remoteIP = connection.clientIP
            return reply(Self.payloadResponse(session.takeOpeningPayload()))
        }
        guard let owner = sessions.owner(of: sid) else {
            // Another node's session: handed on whole (an oversized POST too, so its owner
            // ends the session as it would for a client of its own).
            if let relay, !fromNode, let node = relay.foreignNode(of: sid),
               relay.handOn(head, body: body, connection: connection, to: node, nowMillis: core.hub.clock.nowMillis(),
                            refuse: Self.refusal(origin: origin)) {
                return
            }
            return reply(Self.errorResponse(400, code: 1, "Session ID unknown"))
        }
        guard body.count <= core.configuration.socketIOMaxPayload else {
            // The session ends, so the client sees it end and reconnects instead of believing
            // it is still connected (see ``oversizedPost(version:sid:owner:)``).
            core.limits.breached(.messageSize)
            if Self.oversizedPost(version: version, sid: sid, owner: owner, loops: shared.loops) {
                connection.close()
                return
            }
            return reply(.text(413, "payload too large (limit \(core.configuration.socketIOMaxPayload) bytes); the session is closed\n"))
        }
        let loops = shared.loops
        loops[connection.loop].waiting[connection.id] = EngineIOLoop.Waiter(connection, sid: sid, owner: owner)
        let target = HTTPReplyTarget(loop: connection.loop, connectionID: connection.id, keepAlive: keepAlive, origin: origin, loops: shared.loops)
        let isGet = head.method == "GET"
        owner.executeNowOrSoon {
            guard let session = loops[owner].sessions[sid], session.version == version else {
                return target.send(Self.errorResponse(400, code: 1, "Session ID unknown"))
            }
            if isGet { session.poll(target) } else { session.post(body, target) }
        }
    }

    /// The EIO revision a request asks for, if this door speaks it.
    func version(of head: HTTPRequestHead) -> EngineIOVersion? {
        // A missing EIO means 3, so a 4-only door refuses it as the conformance suites expect.
        guard let version = EngineIOVersion(query: head.query("EIO")), versions.contains(version) else { return nil }
        return version
    }

    private var unsupportedVersionMessage: String {
        versions.contains(.v3) ? "Unsupported protocol version (EIO must be 3 or 4)" : "Unsupported protocol version (EIO must be 4)"
    }

    /// A place for a new long-polling session: under the polling cap, and at the gate like a
    /// connection (the HTTP connections that carry its requests come and go). A refusal is
    /// counted and answered with 503.
    private enum PollingAdmission {
        case admitted(AdmissionTicket)
        case refused(HTTPResponse)
    }

    private func admitPollingSession(ip: String) -> PollingAdmission {
                let open = shared.pollingSessions.add(1, ordering: .relaxed).newValue
        if open > core.configuration.socketIOMaxPollingSessions {
            shared.pollingSessions.subtract(1, ordering: .relaxed)
            core.limits.breached(.pollingSessions)
            var response = Self.errorResponse(503, code: 3, "too many long-polling sessions (limit \(core.configuration.socketIOMaxPollingSessions)); use the websocket transport or try again later")
            response.headers.set("Retry-After", "5")
            return .refused(response)
        }
        switch core.gate.admit(ip: ip) {
        case .success(let ticket):
            return .admitted(ticket)
        case .failure(let refusal):
            shared.pollingSessions.subtract(1, ordering: .relaxed)
            core.limits.breached(refusal.limit)
            var response = Self.errorResponse(503, code: 3, refusal.message)
            response.headers.set("Retry-After", "5")
            return .refused(response)
        }
    }

    /// Ends session `sid` on its loop (a request about it broke a rule that ends it).
    static func endSession(_ sid: String, on owner: EventLoop, loops: LoopLocal<EngineIOLoop>, reason: String,
                           heldPollGetsError: Bool = false) {
        owner.executeNowOrSoon { loops[owner].sessions[sid]?.end(reason: reason, heldPollGetsError: heldPollGetsError) }
    }

    /// A POST over `maxPayload` ends its session so that the client sees the session end and
    /// reconnects. Returns true when the POST gets no answer (its connection is to be closed),
    /// false for a 413.
    ///
    /// - A waiting GET gets a 400, not the close packet: clients read a close packet as a
    ///   deliberate goodbye and do not reconnect (python-socketio 4 and 5 both), while a failed
    ///   poll is a dropped connection, which they report and reconnect after.
    /// - Engine.IO 4: the POST gets 413 (as engine.io answers it).
    /// - Engine.IO 3: the POST's connection is closed without an answer, as engine.io 3 did: a
    ///   v2 client (python-socketio 4, for one) gives up for good on a POST answered with an
    ///   error status, without telling the app.
    static func oversizedPost(version: EngineIOVersion, sid: String, owner: EventLoop, loops: LoopLocal<EngineIOLoop>) -> Bool {
        endSession(sid, on: owner, loops: loops, reason: "payload too large", heldPollGetsError: true)
        return version == .v3
    }

    /// The HTTP parser refused a request on the door's path as too large (over the HTTP body
    /// limit, before the door saw it): the session it names ends, as for any oversized POST.
    /// Returns true when the request is to get no answer (see ``oversizedPost(version:sid:owner:)``).
    func requestTooLarge(_ head: HTTPRequestHead) -> Bool {
        guard let sid = head.query("sid"), let owner = sessions.owner(of: sid), let version = version(of: head) else { return false }
        return Self.oversizedPost(version: version, sid: sid, owner: owner, loops: shared.loops)
    }

    /// A connection of the HTTP door closed: a held poll on it is gone.
    static func connectionClosed(_ connection: TCPConnection, loops: LoopLocal<EngineIOLoop>) {
        guard let waiter = loops[connection.loop].waiting.removeValue(forKey: connection.id) else { return }
        let target = HTTPReplyTarget(loop: connection.loop, connectionID: connection.id, keepAlive: false, origin: nil, loops: loops)
        let sid = waiter.sid, owner = waiter.owner
        owner.executeNowOrSoon { loops[owner].sessions[sid]?.pollAborted(target) }
    }

    // MARK: websocket

    /// Handles an upgrade request on the door's path. Returns true when the connection now
    /// belongs to a WebSocket handler; otherwise an error was written and the connection closed.
    func upgrade(_ head: HTTPRequestHead, leftover: [UInt8], connection: TCPConnection, from httpGuard: SessionGuard) -> Bool {
        let origin = head.headers["Origin"]
        func refuse(_ response: HTTPResponse) -> Bool {
            Self.refusal(origin: origin)(connection, response)
            return false
        }
        guard let version = version(of: head) else {
            return refuse(Self.errorResponse(400, code: 5, unsupportedVersionMessage))
        }
        guard head.query("transport") == "websocket" else { return refuse(Self.errorResponse(400, code: 0, "Transport unknown")) }
        let sid = head.query("sid")
        var owner: EventLoop?
        if let sid {
            owner = sessions.owner(of: sid)
            // The upgrade and all that follows go to the node holding the session.
            if owner == nil, let relay = core.engineIORelay.service, !relay.isFromNode(head), let node = relay.foreignNode(of: sid),
               relay.handOn(head, body: leftover, connection: connection, to: node, nowMillis: core.hub.clock.nowMillis(),
                            refuse: Self.refusal(origin: origin)) {
                return true
            }
            guard owner != nil else { return refuse(Self.errorResponse(400, code: 1, "Session ID unknown")) }
        }
        // Engine.IO has its own heartbeat: no WebSocket ping.
        let options = WebSocketServerConnection.Options(configuration: Self.webSocketConfiguration(core.configuration),
                                                        inboundBudget: core.inboundBudget)
        guard let webSocket = WebSocketServerConnection.upgrade(head, connection: connection, options: options,
                                                                responseHeaders: Self.corsHeaders(origin: origin)) else {
            return false
        }
        let loops = shared.loops
        let link = WebSocketLink(loop: connection.loop, connectionID: connection.id, loops: loops)
        // The connection's one guard goes on with it: the HTTP door's, now Socket.IO's.
        let sessionGuard = httpGuard
        var policy = DoorPolicy(.socketIO, core.configuration)
        if let sid, let owner {
            // The session (opened by polling, maybe on another loop) has its own guard, whose
            // bucket its application asks: this connection's keeps its place and its reading.
            policy.rate = nil
            sessionGuard.enter(policy)
            let handler = EngineIOWebSocketHandler(webSocket: webSocket, core: core, loops: loops, version: version, owner: owner, sid: sid,
                                                   sessionGuard: sessionGuard)
            loops[connection.loop].webSockets[connection.id] = handler
            owner.executeNowOrSoon {
                guard let session = loops[owner].sessions[sid], session.version == version else {
                    return link.close(.policyViolation, reason: "Session ID unknown")
                }
                session.attachProbe(link)
            }
            webSocket.open(delegate: handler, leftover: leftover)
        } else {
            // The WebSocket connection's own place at the gate counts this session, and its
            // guard is the session's (idle watch, message rate).
            sessionGuard.enter(policy)
            let session = EngineIOSession.open(core: core, shared: shared, loop: connection.loop, version: version, webSocket: link,
                                               registry: sessions, admission: nil, connectionGuard: sessionGuard,
                                               makeHandler: makeHandler)
            session.remoteIP = connection.clientIP
            let handler = EngineIOWebSocketHandler(webSocket: webSocket, core: core, loops: loops, version: version, owner: connection.loop,
                                                   sid: session.sid, sessionGuard: sessionGuard)
            loops[connection.loop].webSockets[connection.id] = handler
            session.sendOpening()
            webSocket.open(delegate: handler, leftover: leftover)
        }
        return true
    }
}
