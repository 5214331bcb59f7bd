import ParleyCore
import ParleyIO

/// The reference test application of the Socket.IO protocol suite, as an event set: it
/// serves `/` and `/custom`, emits `auth` with the CONNECT payload (`{}` when none) on every
/// connect, re-emits `message` to its sender as `message-back` (binary attachments included)
/// and acknowledges `message-with-ack` with its own arguments. Not served by default.
final class SocketIOTestApplication: SocketIOApplication {
    func serves(_ namespace: String) -> Bool { namespace == "/" || namespace == "/custom" }

    func connect(_ socket: SocketIOSocket, _ request: SocketIOConnectRequest) -> SocketIOConnectDecision { .accept() }

    /// How long after the CONNECT reply `auth` goes out.
    ///
    /// The suite's client takes each message by registering a listener after it handled the
    /// previous one, so the CONNECT reply and `auth` must not reach it in one read (its
    /// WebSocket library emits every frame of a read at once, and the second is lost). The
    /// reference server never writes them together: its WebSocket transport sends the next
    /// packet only once the previous write has completed. Parley writes both in one loop turn,
    /// so the test application waits a moment instead.
    static let authDelayMillis: UInt64 = 5

    func connected(_ socket: SocketIOSocket, _ request: SocketIOConnectRequest) {
        let auth = request.auth ?? .object([:])
        let generation = socket.generation
        socket.loop.schedule(after: Self.authDelayMillis) { [weak socket] in
            guard let socket, socket.isAttached, socket.generation == generation else { return }
            socket.emit("auth", [auth])
        }
    }

    func received(_ event: SocketIOEvent, on socket: SocketIOSocket) {
        switch event.name {
        case "message":
            socket.emit("message-back", event.arguments, attachments: event.attachments)
        case "message-with-ack":
            event.ack?.send(event.arguments, attachments: event.attachments)
        default:
            break
        }
    }

    func disconnected(_ socket: SocketIOSocket, reason: SocketIODisconnectReason) {}
}
