import ParleyCore
import ParleyIO

/// The Socket.IO protocol on one Engine.IO session: decodes packets (reassembling binary
/// attachments), routes them to one ``SocketIOSocket`` per namespace, answers CONNECT /
/// DISCONNECT with the application's decision, and hands events and acks to the application.
/// Knows nothing of any event set. Loop-confined (the session's loop).
final class SocketIOConnection: EngineIOSessionHandler {
    /// The Engine.IO session below.
    let channel: any EngineIOMessageChannel
    /// Dropped when the session ends, so the application can go.
    private var application: (any SocketIOApplication)?
    /// One per namespace that got a CONNECT, kept for the connection's life (so a socket's id
    /// stays the same across a DISCONNECT and a new CONNECT).
    private var sockets: [SocketIOSocket] = []
    /// Keeps attachments as bytes: an application that wants them as base64 asks for that.
    private var assembler: SocketIOBinaryAssembler
    /// The protocol's connect timeout: a connection that has joined no namespace this long
    /// after it opened is closed. Nil: no timeout.
    private let connectTimeoutMillis: UInt64?
    private let onConnectTimeout: () -> Void
    private var connectTimer: LoopTimer?

    /// `onConnectTimeout` runs (to count it) before a connection is closed for sending no
    /// CONNECT within `connectTimeoutMillis`. `maxPayload` (the Engine.IO one) bounds a binary
    /// packet with its attachments, counted in their base64 form (``SocketIOBinaryAssembler``).
    init(channel: any EngineIOMessageChannel, application: any SocketIOApplication, maxPayload: Int,
         connectTimeoutMillis: UInt64? = nil, onConnectTimeout: @escaping () -> Void = {}) {
        self.channel = channel
        assembler = SocketIOBinaryAssembler(maxPayload: maxPayload, keepsAttachments: true)
        self.application = application
        self.connectTimeoutMillis = connectTimeoutMillis
        self.onConnectTimeout = onConnectTimeout
    }

    var version: EngineIOVersion { channel.version }

    /// The socket of `namespace`, if it ever got a CONNECT.
    func socket(_ namespace: String) -> SocketIOSocket? { sockets.first { $0.namespace == namespace } }

    // MARK: Engine.IO

    func engineIOSessionOpened() {
        // Socket.IO v2 servers (Engine.IO 3) connect `/` at once: `40` follows the open packet.
        if version == .v3, let application, application.serves("/") {
            connect("/", SocketIOConnectRequest(auth: nil, isImplicit: true))
        }
        guard let connectTimeoutMillis, !sockets.contains(where: \.isConnected) else { return }
        let timer = LoopTimer(loop: channel.loop)
        connectTimer = timer
        timer.start(after: connectTimeoutMillis) { [weak self] in
            guard let self, self.connectTimer != nil, !self.channel.isClosed else { return }
            self.connectTimer = nil
            guard !self.sockets.contains(where: \.isConnected) else { return }
            self.onConnectTimeout()
            self.channel.close(reason: "no namespace connected within \(connectTimeoutMillis) ms")
        }
    }

    private func stopConnectTimer() {
        connectTimer?.stop()
        connectTimer = nil
    }

    func engineIOSessionReceived(_ message: EngineIOMessage) {
        let output: SocketIOBinaryAssembler.Output
        do {
            switch message {
            case .text(let text): output = try assembler.feed(text: text)
            case .binary(let bytes): output = try assembler.feed(binary: bytes)
            }
        } catch {
            // The protocol closes the connection on an invalid packet; the CONNECT_ERROR
            // before it says why.
            return fail("/", "invalid packet: \(error.message)")
        }
        switch output {
        case .packet(let packet): handle(packet, attachments: [])
        case .binary(let packet, let attachments): handle(packet, attachments: attachments)
        case .needMore: break
        }
    }

    func engineIOSessionClosed(reason: String) {
        stopConnectTimer()
        guard let application else { return }
        self.application = nil
        for socket in sockets { leave(socket, reason: .connectionClosed(reason), application) }
        sockets = []
    }

    // MARK: packets

    private func handle(_ packet: SocketIOPacket, attachments: [[UInt8]]) {
        guard let application else { return }
        guard application.serves(packet.namespace) else {
            // A CONNECT to an unknown namespace is refused and the connection goes on; anything
            // else there is a protocol violation.
            if packet.kind == .connect { return sendConnectError(packet.namespace, "Invalid namespace") }
            return fail(packet.namespace, "Invalid namespace")
        }
        switch packet.kind {
        case .connect:
            connect(packet.namespace, SocketIOConnectRequest(auth: packet.data))
        case .disconnect:
            if let socket = socket(packet.namespace) { leave(socket, reason: .clientDisconnect, application) }
        case .event, .binaryEvent:
            guard let socket = socket(packet.namespace), socket.isConnected else {
                // "If the server does not receive a CONNECT packet first, then it MUST close
                // the connection immediately."
                return fail(packet.namespace, "not connected: send CONNECT (40) before events")
            }
            application.received(event(packet, attachments, on: socket), on: socket)
        case .ack, .binaryAck:
            guard let id = packet.id else { return }
            socket(packet.namespace)?.ackReceived(id, SocketIOAckReply(arguments: packet.data?.arrayValue ?? [], attachments: attachments))
        case .connectError:
            break // a client's CONNECT_ERROR means nothing to a server
        }
    }

    private func connect(_ namespace: String, _ request: SocketIOConnectRequest) {
        guard let application else { return }
        let socket: SocketIOSocket
        if let existing = self.socket(namespace) {
            socket = existing
        } else {
            socket = SocketIOSocket(namespace: namespace, connection: self)
            sockets.append(socket)
        }
        switch application.connect(socket, request) {
        case .refuse(let message):
            socket.isConnected = false
            sendConnectError(namespace, message)
        case .accept(let data):
            stopConnectTimer()
            socket.attach()
            if version == .v4 {
                socket.isConnected = true
                let reply = JSONObject([("sid", JSONValue.string(socket.id))] + data.map { ($0.key, $0.value) })
                send(SocketIOPacket(kind: .connect, namespace: namespace, data: .object(reply)))
            } else if !socket.isConnected {
                socket.isConnected = true
                send(SocketIOPacket(kind: .connect, namespace: namespace))
            } else {
                return // a Socket.IO v2 client repeating CONNECT: it is connected already
            }
            application.connected(socket, request)
        }
    }

    private func leave(_ socket: SocketIOSocket, reason: SocketIODisconnectReason, _ application: any SocketIOApplication) {
        socket.isConnected = false
        guard socket.detach() else { return }
        application.disconnected(socket, reason: reason)
    }

    private func event(_ packet: SocketIOPacket, _ attachments: [[UInt8]], on socket: SocketIOSocket) -> SocketIOEvent {
        // The decoder checked the shape: an array starting with a string or a number.
        let array = packet.data?.arrayValue ?? []
        let first = array.first
        let name = first?.stringValue ?? first?.numberValue?.text ?? ""
        return SocketIOEvent(name: name, nameIsNumber: first?.numberValue != nil, arguments: Array(array.dropFirst()),
                             attachments: attachments, ack: packet.id.map { SocketIOAck(socket: socket, id: $0) })
    }

    // MARK: sending

    /// Sends a packet and its attachments as one Engine.IO text message and N binary ones.
    func send(_ packet: SocketIOPacket, attachments: [[UInt8]] = []) {
        var messages: [EngineIOMessage] = [.text(packet.encoded)]
        for attachment in attachments { messages.append(.binary(attachment)) }
        channel.send(messages)
    }

    /// A protocol violation: CONNECT_ERROR saying why, then the connection is closed.
    private func fail(_ namespace: String, _ message: String) {
        sendConnectError(namespace, message)
        channel.close(reason: "parse error")
    }

    /// CONNECT_ERROR, the one error packet Socket.IO has: an object on v3+, a string on v2.
    func sendConnectError(_ namespace: String, _ message: String) {
        let data: JSONValue = version == .v4 ? ["message": .string(message)] : .string(message)
        send(SocketIOPacket(kind: .connectError, namespace: namespace, data: data))
    }
}
