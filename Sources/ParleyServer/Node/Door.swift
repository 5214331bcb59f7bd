import ParleyIO

/// One door of the server as the node sees it. The node binds, stops and measures every door
/// through this and names none of them: the doors are listed once, in ``DoorRegistry``.
/// Every requirement must be written (there are no defaults), so a new door that forgets
/// one does not compile.
protocol Door: Sendable {
    /// Names the door in logs and metrics.
    var kind: DoorKind { get }
    /// Binds the door's own port; nil for a door reached through another door's port (the
    /// Socket.IO door answers on the HTTP port's `/socket.io/`).
    func listen(_ core: ServerCore, group: EventLoopGroup) throws(IOError) -> TCPListener?
    /// On each loop as the server stops, before its connections are told: what the door
    /// keeps without a connection of its own (Engine.IO long-polling sessions).
    func serverIsStopping(_ core: ServerCore, on loop: EventLoop)
    /// The door's own lines in `/metrics`.
    func writeMetrics(_ core: ServerCore, into out: inout PrometheusText)
}
