import ParleyIO

/// The server side of a WebSocket closing handshake, for every WebSocket door.
extension TCPConnection {
    /// How long the server waits for the client's close frame after sending its own.
    static let closingHandshakeMillis: UInt64 = 2_000

    /// Call after writing our close frame. The connection stays open and read until the
    /// client's close frame arrives (the door then closes it) or ``closingHandshakeMillis``
    /// pass (RFC 6455 §7.1.1); the door drops the messages that come meanwhile. Closing at
    /// once would reset a connection the client is still writing to, and a browser whose
    /// write fails with a reset reports 1006 without reading our close code.
    func closeAfterClosingHandshake() {
        loop.schedule(after: Self.closingHandshakeMillis) { [weak self] in self?.close() }
    }
}
