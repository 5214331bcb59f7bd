import ParleyCore

/// The reference test application of the Socket.IO protocol suite, as an event set: it
/// serves `/` and `/custom`, emits `auth` with the CONNECT payload (`{}` when none) on every
/// connect, re-emits `message` to its sender as `message-back` (binary attachments included)
/// and acknowledges `message-with-ack` with its own arguments. Not served by default.
final class SocketIOTestApplication: SocketIOApplication {
    func serves(_ namespace: String) -> Bool { namespace == "/" || namespace == "/custom" }

    func connect(_ socket: SocketIOSocket, _ request: SocketIOConnectRequest) -> SocketIOConnectDecision { .accept() }

    func connected(_ socket: SocketIOSocket, _ request: SocketIOConnectRequest) {
        socket.emit("auth", [request.auth ?? .object([:])])
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
