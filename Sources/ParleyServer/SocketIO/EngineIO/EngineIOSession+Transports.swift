import ParleyHTTP
import ParleyIO
import ParleyWebSocket

/// Long-polling, the WebSocket, and the upgrade from one to the other.
extension EngineIOSession {
    // MARK: polling

    /// A polling GET: answered now when packets wait, else held until some do.
    func poll(_ target: HTTPReplyTarget) {
        if isClosed, let lastPackets {
            forget()
            return target.send(EngineIODoor.payloadResponse(EngineIOPayload.encode(lastPackets, version: version)))
        }
        guard !isClosed, webSocket == nil else {
            return target.send(EngineIODoor.errorResponse(400, code: 3, "Bad request: this session is not polling"))
        }
        if heldPoll != nil {
            // A second concurrent GET is a client bug; upstream closes the session too.
            target.send(EngineIODoor.errorResponse(400, code: 3, "Bad request: overlapping polling requests"))
            end(reason: "overlapping polls")
            return
        }
        heldPoll = target
        pollArrived()
        if !outbox.isEmpty {
            scheduleFlush()
        } else if probeAnswered {
            releaseHeldPollForUpgrade()
        }
    }

    /// A polling POST: packets from the client. One that comes just after the upgrade (see
    /// ``latePostGraceMillis``) is still taken.
    func post(_ body: [UInt8], _ target: HTTPReplyTarget) {
        guard !isClosed, webSocket == nil || isWithinLatePostGrace else {
            return target.send(EngineIODoor.errorResponse(400, code: 3, "Bad request: this session is not polling"))
        }
        let packets: [EngineIOPacket]
        do {
            packets = try EngineIOPayload.decode(body, version: version)
        } catch {
            // The protocol closes the session on an invalid packet; the client reconnects.
            target.send(.text(400, "invalid payload: \(error.message); the session is closed\n"))
            end(reason: "parse error")
            return
        }
        handlingPost = true
        for packet in packets where !isClosed { receive(packet) }
        handlingPost = false
        // A POST that was in flight during the upgrade: its packets went first, now those
        // the WebSocket brought meanwhile.
        if webSocket != nil { endSettling() }
        // Publisher back-pressure: a client sends its next POST only after this one's answer,
        // so holding the answer until the room it published to has caught up slows it down
        // (its messages wait on its side) while other rooms go on.
        if let backlog = postBacklog {
            postBacklog = nil
            core.limits.breached(.publisherThrottled)
            backlog.whenBelowLowMark { target.send(.text(200, "ok")) }
        } else {
            target.send(.text(200, "ok"))
        }
    }

    func pollAborted(_ target: HTTPReplyTarget) {
        if let heldPoll, heldPoll.same(as: target) {
            self.heldPoll = nil
            pollEnded()
        }
    }

    /// Queues packets for the next poll (or, while opening, for the handshake).
    func queueAndFlush(_ packets: [EngineIOPacket]) {
        outbox.append(packets)
        if outboxOverLimit {
            end(reason: "client does not poll fast enough")
            return
        }
        if heldPoll != nil { scheduleFlush() }
    }

    /// Flushes at the end of this loop turn, so the packets of one turn share one response.
    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        let loop = self.loop, sid = self.sid
        let loops = shared.loops
        loop.execute { loops[loop].sessions[sid]?.flush() }
    }

    private func flush() {
        flushScheduled = false
        guard let target = heldPoll, !outbox.isEmpty else { return }
        heldPoll = nil
        target.send(EngineIODoor.payloadResponse(outbox.takePayload(version: version)))
        pollEnded()
    }

    // MARK: WebSocket and upgrade

    func attachProbe(_ link: WebSocketLink) {
        guard !isClosed, webSocket == nil, probe == nil else {
            return link.close(.policyViolation, reason: "cannot upgrade this session")
        }
        probe = link
        // engine.io's upgradeTimeout: a probe that does not finish the upgrade is closed.
        let timer = probeTimer ?? LoopTimer(loop: loop)
        probeTimer = timer
        timer.start(after: Self.upgradeTimeoutMillis) { [weak self] in
            guard let self, let probe = self.probe, probe.same(as: link) else { return }
            self.probe = nil
            self.probeAnswered = false
            probe.close(.policyViolation, reason: "upgrade not completed in time")
        }
    }

    /// How long a probe WebSocket may take to send `5`.
    static let upgradeTimeoutMillis: UInt64 = 10_000

    // The upgrade race. A client's polling requests and its WebSocket are separate
    // connections, perhaps on separate loops, so what the client sent in one order can be
    // handled here in another. Two clients' habits make that matter:
    // - Socket.IO-Client-Swift POSTs its first packets (`40`, its first emits) while it
    //   probes, and sends `5` without waiting for that POST's answer: the POST can arrive
    //   after the `5`, and the client ignores its failure, so the packets were lost (one
    //   connect in ten hung). Such a POST is taken for ``latePostGraceMillis`` after the `5`,
    //   and what the WebSocket brings in the first ``upgradeSettleMillis`` waits for it (a
    //   late POST ends the wait at once).
    // - A GET sent after `5` (the protocol's suite does this) can be handled before the
    //   `5`: a GET released by the probe waits ``probeNoopDelayMillis`` for a `5` and gets
    //   400 when one comes (a client that waits for its GET before sending `5`, as
    //   compliant ones do, still gets the noop, just that much later).

    /// How long after `5` a POST that carries packets is still taken.
    static let latePostGraceMillis: Int64 = 1_000
    /// How long, after `5`, the WebSocket's packets wait for a POST still in flight.
    static let upgradeSettleMillis: UInt64 = 250
    /// How long a GET released by the probe waits for a `5` handled out of order.
    static let probeNoopDelayMillis: UInt64 = 50
    /// Most WebSocket packets, and bytes (``maxSettlingBytes``), held while settling; past
    /// either they are handled at once. Without the byte bound a client could park 256
    /// messages of `maxPayload` each for the whole settle time.
    static let maxSettlingBytes = 64 << 10
    /// Most WebSocket packets held while settling.
    static let maxSettlingPackets = 256

    var isWithinLatePostGrace: Bool {
        guard let upgradedAtMillis else { return false }
        return core.hub.clock.nowMillis() - upgradedAtMillis <= Self.latePostGraceMillis
    }

    /// The held GET gets a noop after the settle time, unless the upgrade completes first.
    private func releaseHeldPollForUpgrade() {
        let timer = upgradeNoopTimer ?? LoopTimer(loop: loop)
        upgradeNoopTimer = timer
        timer.start(after: Self.probeNoopDelayMillis) { [weak self] in
            guard let self, !self.isClosed, self.webSocket == nil, self.heldPoll != nil else { return }
            self.queueAndFlush([EngineIOPacket(.noop)])
        }
    }

    /// Handles what the WebSocket brought while settling, in order; from now on its packets
    /// are handled as they come.
    private func endSettling() {
        settleTimer?.stop()
        guard let held = settling else { return }
        settling = nil
        for packet in held where !isClosed { receive(packet) }
        sendPingDueAfterSettling()
    }

    func webSocketReceived(_ message: EngineIOWebSocketHandler.Inbound, from link: WebSocketLink) {
        guard !isClosed else { return }
        if let probe, probe.same(as: link) {
            return probeReceived(message, from: link)
        }
        guard let webSocket, webSocket.same(as: link) else { return }
        do {
            let packet: EngineIOPacket, size: Int
            switch message {
            case .text(let text): (packet, size) = (try EngineIOPacket.decode(text: text), text.utf8.count)
            case .binary(let bytes): (packet, size) = (try EngineIOPacket.decode(webSocketBinary: bytes, version: version), bytes.count)
            }
            if settling != nil {
                settling!.append(packet)
                settlingBytes += size
                if settling!.count >= Self.maxSettlingPackets || settlingBytes >= Self.maxSettlingBytes { endSettling() }
            } else {
                receive(packet)
            }
        } catch {
            webSocket.close(.protocolError, reason: "invalid Engine.IO packet: \(error.message)")
            end(reason: "parse error")
        }
    }

    /// The upgrade: `2probe` → `3probe` (and a noop releases the held poll), then `5` moves
    /// the session, and whatever waited for a poll, to the WebSocket.
    private func probeReceived(_ message: EngineIOWebSocketHandler.Inbound, from link: WebSocketLink) {
        guard case .text(let text) = message else { return link.close(.protocolError, reason: "expected 2probe") }
        if text == "2probe" {
            probeAnswered = true
            link.write(EngineIOFrames.webSocket([EngineIOPacket(.pong, "probe")], version: version))
            // Make the held poll return so the client can pause polling.
            if heldPoll != nil { releaseHeldPollForUpgrade() }
        } else if text == "5" {
            probe = nil
            probeAnswered = false
            probeTimer?.stop()
            upgradeNoopTimer?.stop()
            webSocket = link
            // The WebSocket connection has a place at the gate of its own now.
            leavePolling()
            // A GET still held was sent after this `5` (a client waits for the probe's noop
            // before it sends `5`), so it is refused like any GET after the upgrade.
            if let heldPoll {
                self.heldPoll = nil
                heldPoll.send(EngineIODoor.errorResponse(400, code: 3, "Bad request: this session is not polling"))
            }
            upgradedAtMillis = core.hub.clock.nowMillis()
            settling = []
            settlingBytes = 0
            let timer = settleTimer ?? LoopTimer(loop: loop)
            settleTimer = timer
            timer.start(after: Self.upgradeSettleMillis) { [weak self] in self?.endSettling() }
            let pending = outbox.takeAll()
            if !pending.isEmpty { link.write(EngineIOFrames.webSocket(pending, version: version)) }
        } else {
            probe = nil
            probeAnswered = false
            link.close(.protocolError, reason: "expected 2probe then 5")
        }
    }

    /// The WebSocket (or a probe) broke a rule that ends the session, such as a message over
    /// `maxPayload`: the session ends with it, as it does on polling.
    func webSocketFailed(_ link: WebSocketLink, reason: String) {
        if let probe, probe.same(as: link) {
            self.probe = nil
            end(reason: reason)
        } else if let webSocket, webSocket.same(as: link) {
            end(reason: reason)
        }
    }

    func webSocketClosed(_ link: WebSocketLink) {
        if let probe, probe.same(as: link) {
            self.probe = nil
            probeAnswered = false
        }
        if let webSocket, webSocket.same(as: link) {
            self.webSocket = nil
            end(reason: "transport close")
        }
    }
}
