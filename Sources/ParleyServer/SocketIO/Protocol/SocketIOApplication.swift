import ParleyCore

/// An event set on Socket.IO, such as SocketChat: the one type a new Socket.IO application
/// implements. It decides CONNECTs to its namespaces, receives events (with an ack handle when
/// the client asked for one), emits events through its sockets, and is told when a socket
/// leaves. Packets, namespaces, acks, binary attachments and transports stay below it.
///
/// One instance per client connection (Engine.IO session), made when the session opens and
/// used on that session's loop only; it may keep per-connection state.
protocol SocketIOApplication: AnyObject {
    /// Whether this application serves `namespace` (`/`, `/custom`, ...). Packets for any
    /// other namespace get CONNECT_ERROR "Invalid namespace".
    func serves(_ namespace: String) -> Bool

    /// A CONNECT to a served namespace: accept it or refuse it with a message for the client.
    /// `socket` is the same object for every CONNECT to its namespace on this connection.
    func connect(_ socket: SocketIOSocket, _ request: SocketIOConnectRequest) -> SocketIOConnectDecision

    /// An accepted CONNECT has been answered: events emitted now follow the reply.
    func connected(_ socket: SocketIOSocket, _ request: SocketIOConnectRequest)

    /// An event from the client on a connected socket. Answer `event.ack`, when there is one,
    /// exactly once, now or later (from any thread).
    func received(_ event: SocketIOEvent, on socket: SocketIOSocket)

    /// The socket has left: the client disconnected the namespace, or the connection ended.
    /// Emits after this are dropped once the connection has ended.
    func disconnected(_ socket: SocketIOSocket, reason: SocketIODisconnectReason)
}

extension SocketIOApplication {
    func connected(_ socket: SocketIOSocket, _ request: SocketIOConnectRequest) {}
}

/// A CONNECT, as the application sees it.
struct SocketIOConnectRequest: Sendable, Equatable {
    /// The CONNECT payload (Socket.IO v3+ clients send their `auth` there); nil when none came.
    var auth: JSONValue?
    /// True for the connection to `/` that an Engine.IO 3 session gets at once (Socket.IO v2
    /// servers connect `/` without waiting for the client); the client has sent nothing yet.
    var isImplicit = false
}

/// The application's answer to a CONNECT.
enum SocketIOConnectDecision: Sendable, Equatable {
    /// Connected. On Socket.IO v3+ the reply is `{"sid": <socket id>, ...data}`; v2 replies carry nothing.
    case accept(data: JSONObject = [:])
    /// CONNECT_ERROR with this message (`{"message": ...}` on v3+, the bare string on v2).
    case refuse(String)
}

/// Why a socket left.
enum SocketIODisconnectReason: Sendable, Equatable {
    /// The client sent DISCONNECT for the namespace; the connection goes on.
    case clientDisconnect
    /// The connection (Engine.IO session) ended, for this reason.
    case connectionClosed(String)
}

/// An EVENT from the client.
struct SocketIOEvent {
    /// The event name. A client may send a number; it arrives as its decimal text, as
    /// JavaScript emitters treat it, with ``nameIsNumber`` set.
    let name: String
    let nameIsNumber: Bool
    /// The arguments after the name. Binary attachments are `{"_placeholder":true,"num":i}`
    /// objects standing for `attachments[i]`.
    let arguments: [JSONValue]
    let attachments: [[UInt8]]
    /// How to answer, when the client asked for an acknowledgement.
    let ack: SocketIOAck?

    /// The arguments with each attachment as a base64 string, for applications whose events
    /// carry JSON only. Each call converts anew: ask once, and with `first`, for only the
    /// arguments the application reads. (Each attachment is named at most once, so the
    /// result is at most about the Engine.IO `maxPayload`; see ``SocketIOBinaryAssembler``.)
    func argumentsWithAttachmentsAsBase64(first count: Int = .max) -> [JSONValue] {
        let wanted = arguments.prefix(count)
        guard !attachments.isEmpty else { return Array(wanted) }
        return wanted.map { SocketIOBinaryAssembler.replacingPlaceholders($0, attachments) }
    }
}

/// An acknowledgement from the client for an event the server emitted.
struct SocketIOAckReply: Sendable, Equatable {
    let arguments: [JSONValue]
    /// Binary attachments, as in ``SocketIOEvent/attachments``.
    let attachments: [[UInt8]]
}
