import ParleyCore
import ParleyIO

/// One namespace of a Socket.IO connection, as an application uses it: emit events (with
/// optional ack callbacks), close the connection. Loop-confined (its connection's loop).
final class SocketIOSocket {
    let namespace: String
    /// The Socket.IO socket id (`sid` of a v3+ CONNECT reply), not the Engine.IO session id.
    let id: String
    let connection: SocketIOConnection
    /// CONNECT accepted and not left: events from the client are handed on. Set by the
    /// connection.
    var isConnected = false
    /// The application knows this socket: from an accepted CONNECT until it is told that the
    /// socket left.
    private(set) var isAttached = false
    /// Counts attachments, so an ack handle of an earlier connection of this namespace is
    /// not answered on a later one.
    private(set) var generation = 0
    private var pendingAcks: [Int: (SocketIOAckReply) -> Void] = [:]
    private var nextAckID = 0

    /// Most emitted events that may wait for the client's ack at once.
    static let maxPendingAcks = 256

    init(namespace: String, connection: SocketIOConnection) {
        self.namespace = namespace
        self.connection = connection
        id = EngineIOSession.randomID()
    }

    var loop: EventLoop { connection.channel.loop }
    var version: EngineIOVersion { connection.channel.version }

    /// Emits an event. With `attachments`, `arguments` hold a placeholder for each
    /// (``SocketIOBinaryAssembler/placeholder(_:)``) and the event goes as BINARY_EVENT. With
    /// `ack`, the client is asked to acknowledge, and `ack` runs on this loop when it does.
    /// Returns false, sending nothing, when too many acks are pending already.
    @discardableResult
    func emit(_ name: String, _ arguments: [JSONValue] = [], attachments: [[UInt8]] = [],
              ack: ((SocketIOAckReply) -> Void)? = nil) -> Bool {
        var id: Int?
        if let ack {
            guard pendingAcks.count < Self.maxPendingAcks else { return false }
            let ackID = nextAckID
            nextAckID = ackID == SocketIOPacket.maxAckID ? 0 : ackID + 1
            pendingAcks[ackID] = ack
            id = ackID
        }
        var packet = SocketIOPacket.event(name, arguments, namespace: namespace, id: id)
        if !attachments.isEmpty {
            packet.kind = .binaryEvent
            packet.attachments = attachments.count
        }
        connection.send(packet, attachments: attachments)
        return true
    }

    /// Ends the whole connection (every namespace).
    func closeConnection(reason: String) { connection.channel.close(reason: reason) }

    // MARK: for the connection and ack handles

    func attach() {
        guard !isAttached else { return }
        isAttached = true
        generation += 1
    }

    /// Returns whether the socket was attached.
    func detach() -> Bool {
        guard isAttached else { return false }
        isAttached = false
        pendingAcks = [:]
        return true
    }

    func ackReceived(_ id: Int, _ reply: SocketIOAckReply) {
        pendingAcks.removeValue(forKey: id)?(reply)
    }

    /// Sends ACK `id`, unless the socket has left since the event came.
    func answer(_ id: Int, generation: Int, _ arguments: [JSONValue], attachments: [[UInt8]]) {
        guard isAttached, generation == self.generation else { return }
        var packet = SocketIOPacket(kind: .ack, namespace: namespace, id: id, data: .array(arguments))
        if !attachments.isEmpty {
            packet.kind = .binaryAck
            packet.attachments = attachments.count
        }
        connection.send(packet, attachments: attachments)
    }
}
