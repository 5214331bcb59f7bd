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
        if probeAnswered && outbox.isEmpty { outbox.append([EngineIOPacket(.noop)]) }
        if !outbox.isEmpty { scheduleFlush() }
    }

    /// A polling POST: packets from the client.
    func post(_ body: [UInt8], _ target: HTTPReplyTarget) {
        guard !isClosed, webSocket == nil else {
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
        loop.execute { EngineIOLoop.of(loop).sessions[sid]?.flush() }
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

    func webSocketReceived(_ message: EngineIOWebSocketHandler.Inbound, from link: WebSocketLink) {
        guard !isClosed else { return }
        if let probe, probe.same(as: link) {
            return probeReceived(message, from: link)
        }
        guard let webSocket, webSocket.same(as: link) else { return }
        do {
            switch message {
            case .text(let text): receive(try EngineIOPacket.decode(text: text))
            case .binary(let bytes): receive(try EngineIOPacket.decode(webSocketBinary: bytes, version: version))
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
            if heldPoll != nil { queueAndFlush([EngineIOPacket(.noop)]) }
        } else if text == "5" {
            probe = nil
            probeAnswered = false
            probeTimer?.stop()
            webSocket = link
            // The WebSocket connection has a place at the gate of its own now.
            leavePolling()
            if let heldPoll {
                self.heldPoll = nil
                heldPoll.send(EngineIODoor.payloadResponse(EngineIOPayload.encode([EngineIOPacket(.noop)], version: version)))
            }
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
