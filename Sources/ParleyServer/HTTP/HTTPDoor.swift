import ParleyCore
import ParleyHTTP
import ParleyIO
import ParleyWebSocket

/// The HTTP door: REST routes, and the WebSocket upgrade to the native (Scaledrone v3) door
/// at `/v3/websocket`.
final class HTTPDoor: Door {
    /// Path of the native door's WebSocket endpoint.
    static let nativePath = "/v3/websocket"

    var kind: DoorKind { .http }

    func serverIsStopping(_ core: ServerCore, on loop: EventLoop) {}

    func writeMetrics(_ core: ServerCore, into out: inout PrometheusText) {}

    func writeStatus(into w: inout JSONWriter) {}

    func stop() {}

    func listen(_ core: ServerCore, group: EventLoopGroup) throws(IOError) -> TCPListener? {
        let routes = RESTRoutes.router()
        return try core.listen(.http, port: core.configuration.httpPort, group: group) { connection, ticket, policy in
            // The guard (and its ticket) goes with the connection: to the native, echo or
            // Socket.IO session after an upgrade (``SessionGuard/enter(_:)``), which then gives
            // the place back when the connection ends.
            let sessionGuard = SessionGuard(policy, loop: connection.loop, core: core, ticket: ticket)
            let session = HTTPSession(connection: connection, core: core, router: routes, sessionGuard: sessionGuard)
            connection.handler = session
            session.start()
        }
    }

    /// The WebSocket limits of the native door.
    static func webSocketConfiguration(_ configuration: ServerConfiguration) -> WebSocketConfiguration {
        WebSocketConfiguration(maxMessageSize: configuration.webSocketMaxMessageSize,
                               maxFrameSize: configuration.webSocketMaxMessageSize,
                               offersDeflate: false, acceptsDeflate: true,
                               compressionLimit: configuration.deflateMaxMessageSize)
    }
}
