import ParleyCore
import ParleyHTTP
import ParleyIO
import ParleyWebSocket

/// The HTTP door: REST routes, and the WebSocket upgrade to the native (Scaledrone v3) door
/// at `/v3/websocket`.
enum HTTPDoor {
    /// Path of the native door's WebSocket endpoint.
    static let nativePath = "/v3/websocket"

    static func listen(core: ServerCore, group: EventLoopGroup) throws(IOError) -> TCPListener {
        let routes = RESTRoutes.router()
        return try TCPListener.bind(host: core.configuration.host, port: core.configuration.httpPort, group: group) { connection in
            connection.maxQueuedBytes = core.configuration.writeQueueLimit
            if let tls = core.tls {
                do {
                    try connection.startTLS(tls)
                } catch {
                    return  // no handler: closed at once
                }
            }
            // Counted once here; whichever session owns the connection when it closes
            // (HTTPSession, or NativeSession after an upgrade) releases it.
            guard core.admit(connection, http: true) else { return }
            let session = HTTPSession(connection: connection, core: core, router: routes)
            connection.handler = session
            session.start()
        }
    }

    /// The WebSocket limits of the native door.
    static func webSocketConfiguration(_ configuration: ServerConfiguration) -> WebSocketConfiguration {
        WebSocketConfiguration(maxMessageSize: configuration.webSocketMaxMessageSize,
                               maxFrameSize: configuration.webSocketMaxMessageSize,
                               offersDeflate: false, acceptsDeflate: true)
    }
}
