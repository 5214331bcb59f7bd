import ParleyIO
import ParleyWebSocket

/// The diagnostic echo endpoint (`--ws-echo-path`, off by default) after the WebSocket
/// upgrade: every text message comes back as text, every binary message as binary.
///
/// It runs on the same ``WebSocketServerConnection`` (protocol machine, limits, deflate
/// negotiation, closing handshake) as the native door, so third-party conformance suites
/// (Autobahn|Testsuite) exercise exactly the codec the chat clients use, without the
/// Scaledrone command layer in the way.
final class EchoSession: WebSocketServerDelegate {
    private let sessionGuard: SessionGuard

    init(sessionGuard: SessionGuard) {
        self.sessionGuard = sessionGuard
    }

    /// Written from inside the receive, so a message followed by a broken frame in the same
    /// read is still echoed before our close frame.
    func webSocket(_ socket: WebSocketServerConnection, didReceive kind: WebSocketMessageKind, payload: UnsafeRawBufferPointer) {
        switch kind {
        case .text: socket.sendText(utf8: payload)
        case .binary: socket.sendBinary(payload)
        }
    }

    func webSocketDidClose(_ socket: WebSocketServerConnection, close: WebSocketServerClose) {
        sessionGuard.end(closing: socket.connection, reason: close.connection)
    }
}
