import ParleyIO
import ParleyWebSocket

/// The diagnostic echo endpoint (`--ws-echo-path`, off by default) after the WebSocket
/// upgrade: every text message comes back as text, every binary message as binary.
///
/// It runs the same ``WebSocketProtocolMachine``, limits and deflate negotiation as the
/// native door, so third-party conformance suites (Autobahn|Testsuite) exercise exactly the
/// codec the chat clients use, without the Scaledrone command layer in the way.
final class EchoSession: ConnectionHandler, GracefulSession {
    let connection: TCPConnection
    let core: ServerCore
    private let machine: WebSocketProtocolMachine
    private let sessionGuard: SessionGuard

    init(connection: TCPConnection, core: ServerCore, webSocket: WebSocketConfiguration,
         deflate: PerMessageDeflateParameters?, sessionGuard: SessionGuard) {
        self.connection = connection
        self.core = core
        self.sessionGuard = sessionGuard
        machine = WebSocketProtocolMachine(role: .server, configuration: webSocket, deflate: deflate)
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        // Replies are written from inside `receive`, so a message followed by a broken frame
        // in the same read is still echoed before our close frame.
        machine.receive(bytes) { action in
            guard connection.state == .open else { return }
            switch action {
            case .text(let text):
                write(machine.sendText(text))
            case .binary(let bytes):
                write(machine.sendBinary(bytes))
            case .send(let bytes):
                write(bytes)
            case .closeConnection:
                connection.close()
            case .peerClosed:
                break
            }
        }
    }

    private func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        connection.write(bytes)
    }

    func serverIsStopping() {
        for case .send(let bytes) in machine.close(code: .goingAway, reason: "server shutting down") {
            write(bytes)
        }
        connection.close()
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        sessionGuard.end(closing: connection, reason: reason)
    }
}
