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
extension EngineIOSession {
    func startConnectionPolicy() {
        sessionGuard.watchIdle { [weak self] in
            guard let self, !self.isClosed else { return }
            self.close(reason: "idle timeout")
        }
    }

    /// A message packet arrived: the session is in use.
    func messageReceived() { sessionGuard.heard() }

    /// Whether the outbox has outgrown the write-queue limit.
    var outboxOverLimit: Bool { outbox.bytes > core.configuration.writeQueueLimit }

    func stopConnectionPolicy() {
        sessionGuard.end()
    }
}
