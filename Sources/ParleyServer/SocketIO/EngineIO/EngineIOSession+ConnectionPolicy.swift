import ParleyIO

// MARK: - Connection policy of an Engine.IO session
//
// The door-wide connection limits, as an Engine.IO session applies them. Everything the
// session does about policy is here, so it can move to a shared door policy in one place:
//  - idle timeout: a session that sends no message packet (heartbeats do not count) for
//    `idleTimeoutMillis` is closed, counted as `idle_timeout`;
//  - write-queue limit: a polling session whose outbox grows past `writeQueueLimit` (the
//    client does not come back for its packets) is closed.
// Elsewhere: the payload limit (`socketIOMaxPayload`, HTTP 413 / WebSocket 1009) is checked
// by EngineIODoor and EngineIOWebSocketHandler; admission and the handshake timeout happen
// in the HTTP door before a request reaches Engine.IO; the message rate is the
// application's (SocketChatApplication).
//  - abandoned polling sessions: a polling session with no GET waiting for
//    `pingInterval + pingTimeout` is closed (its client is gone, or only POSTs);
//  - admission: a polling session holds its own place at the gate (`admission`) and in the
//    polling count until it ends or moves to a WebSocket, whose connection has a place.
extension EngineIOSession {
    func startConnectionPolicy() {
        sessionGuard.watchIdle { [weak self] in
            guard let self, !self.isClosed else { return }
            self.end(reason: "idle timeout")
        }
        if webSocket == nil { pollEnded() }
    }

    /// A GET is waiting: the client is there.
    func pollArrived() { pollWatch?.stop() }

    /// No GET is waiting any more: it must come back within the heartbeat's allowance.
    func pollEnded() {
        guard !isClosed, webSocket == nil else { return }
        let watch = pollWatch ?? LoopTimer(loop: loop)
        pollWatch = watch
        let allowance = core.configuration.socketIOPingIntervalMillis + core.configuration.socketIOPingTimeoutMillis
        watch.start(after: allowance) { [weak self] in
            guard let self, !self.isClosed, self.webSocket == nil, self.heldPoll == nil else { return }
            self.end(reason: "polling abandoned")
        }
    }

    /// The session no longer polls (upgraded, or closed): its polling place is given back.
    func leavePolling() {
        pollWatch?.stop()
        pollWatch = nil
        guard let admission else { return }
        self.admission = nil
        admission.release()
        shared.pollingSessions.subtract(1, ordering: .relaxed)
    }

    /// A message packet arrived: the session is in use.
    func messageReceived() { sessionGuard.heard() }

    /// Whether the outbox has outgrown the write-queue limit.
    var outboxOverLimit: Bool { outbox.bytes > core.configuration.writeQueueLimit }

    /// The session is over; its connection (if the guard is the connection's) may still be
    /// closing, and gives its place back when it is closed.
    func stopConnectionPolicy() {
        if ownsGuard { sessionGuard.end() } else { sessionGuard.stopWatchingIdle() }
    }
}
