import ParleyCore
import ParleyHTTP
import ParleyIO
import ParleyRedis
import Synchronization

/// No sticky sessions (docs/cluster.md, "Behind a load balancer"): in a cluster a session's
/// id names the node that holds it (`NODE~RANDOM`), and a polling request or a WebSocket
/// upgrade for a session of another node is handed to that node over one TCP connection of
/// its own: the request goes on with the cluster's secret and the client's address, and from
/// then on the bytes flow both ways unchanged, in order. A polling request goes on with
/// `Connection: close`, so the client's next request is routed afresh.
final class EngineIORelay: Sendable {
    /// Carries the cluster's secret on a handed-on request (a client cannot forge it).
    static let secretHeader = "X-Parley-Relay"
    /// The client's address on a handed-on request (trusted with the secret only).
    static let clientHeader = "X-Parley-Relay-For"
    /// Separates the node from the random part of a session id.
    static let separator: Character = "~"

    let nodeID: String
    let directory: RedisNodeDirectory
    /// `host:port` other nodes reach this node's HTTP door at; nil: this node hands requests
    /// on but takes none (it cannot be reached), so its sessions carry no node name.
    let address: String?
    /// Requests handed on to another node, and those that could not be (no such node, or it
    /// could not be reached).
    let relayed = Atomic<Int>(0)
    let failed = Atomic<Int>(0)

    init(nodeID: String, directory: RedisNodeDirectory, address: String?) {
        self.nodeID = nodeID
        self.directory = directory
        self.address = address
    }

    /// The id of a new session of this node.
    func sessionID(random: String) -> String {
        address == nil ? random : nodeID + String(Self.separator) + random
    }

    /// The node holding `sid` when it is another one.
    func foreignNode(of sid: String) -> String? {
        guard let split = sid.lastIndex(of: Self.separator) else { return nil }
        let node = String(sid[..<split])
        guard node != nodeID, RedisPresenceOptions.isValidNodeID(node) else { return nil }
        return node
    }

    /// Whether `head` was handed on by a node of this cluster (it carries the secret).
    func isFromNode(_ head: HTTPRequestHead) -> Bool {
        guard let secret = directory.secret, let given = head.headers[Self.secretHeader] else { return false }
        return constantTimeEqual(Array(given.utf8), Array(secret.utf8))
    }

    /// The request as it goes on to the node that holds its session (for an upgrade, `body` is
    /// what the client sent after the request: its first WebSocket frames).
    func forwarded(_ head: HTTPRequestHead, body: [UInt8], clientIP: String) -> [UInt8]? {
        guard let secret = directory.secret else { return nil }
        var text = "\(head.method) \(head.target) HTTP/1.1\r\n"
        for (name, value) in head.headers {
            let lower = name.lowercased()
            if lower == Self.secretHeader.lowercased() || lower == Self.clientHeader.lowercased() || lower == "content-length" { continue }
            if !head.isUpgrade && (lower == "connection" || lower == "keep-alive") { continue }
            text += "\(name): \(value)\r\n"
        }
        if !head.isUpgrade { text += "Connection: close\r\n" }
        if !head.isUpgrade && (!body.isEmpty || head.method == "POST") { text += "Content-Length: \(body.count)\r\n" }
        text += "\(Self.secretHeader): \(secret)\r\n\(Self.clientHeader): \(clientIP)\r\n\r\n"
        return Array(text.utf8) + body
    }

    /// Hands `connection`, and the request `head` with `body` it carries, to `node`; false
    /// (nothing done) before the cluster's secret is known. `refuse` answers the client when
    /// the node is unknown or cannot be reached.
    func handOn(_ head: HTTPRequestHead, body: [UInt8], connection: TCPConnection, to node: String, nowMillis: Int64,
                refuse: @escaping @Sendable (TCPConnection, HTTPResponse) -> Void) -> Bool {
        guard let bytes = forwarded(head, body: body, clientIP: connection.clientIP) else { return false }
        let client = LoopBound(connection, on: connection.loop)
        directory.address(of: node, nowMillis: nowMillis) { address in
            client.run { connection in
                guard connection.state == .open else { return }
                guard let address, let (host, port) = Self.split(address) else {
                    self.failed.add(1, ordering: .relaxed)
                    return refuse(connection, EngineIODoor.errorResponse(400, code: 1, "Session ID unknown"))
                }
                // Nothing more is read from the client until its request has gone on.
                connection.stopReading()
                connection.loop.connect(host: host, port: port) { result in
                    guard connection.state == .open else {
                        if case .success(let upstream) = result { upstream.close(flush: false) }
                        return
                    }
                    switch result {
                    case .failure:
                        self.failed.add(1, ordering: .relaxed)
                        connection.startReading()
                        refuse(connection, .text(502, "the node holding this session (\(node)) cannot be reached; reconnect\n"))
                    case .success(let upstream):
                        self.relayed.add(1, ordering: .relaxed)
                        RelayTunnel.join(client: connection, upstream: upstream, first: bytes)
                    }
                }
            }
        }
        return true
    }

    func writeMetrics(into out: inout PrometheusText) {
        out.family("parley_engineio_relayed_total", "counter", help: "Socket.IO requests handed on to the node holding their session")
        out.sample("parley_engineio_relayed_total", relayed.load(ordering: .relaxed))
        out.family("parley_engineio_relay_failures_total", "counter", help: "Socket.IO requests for another node's session that could not be handed on")
        out.sample("parley_engineio_relay_failures_total", failed.load(ordering: .relaxed))
    }

    static func split(_ address: String) -> (String, Int)? {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]), (1...65_535).contains(port) else {
            return nil
        }
        var host = String(address[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }
}

/// Two connections joined: what one reads, the other writes, with back-pressure (a side
/// stops reading while the other's queue is long). When either ends, both end; the client
/// connection's own handler (the HTTP session that took it in) learns of its close as before.
final class RelayTunnel: ConnectionHandler {
    private let client: TCPConnection
    private let upstream: TCPConnection
    /// The client connection's handler before the tunnel: its close hooks still run.
    private let previous: (any ConnectionHandler)?
    /// A side stops reading while the other has more than this waiting to be written.
    static let highWater = 256 << 10
    static let lowWater = 64 << 10

    private init(client: TCPConnection, upstream: TCPConnection) {
        self.client = client
        self.upstream = upstream
        previous = client.handler
    }

    static func join(client: TCPConnection, upstream: TCPConnection, first: [UInt8]) {
        let tunnel = RelayTunnel(client: client, upstream: upstream)
        client.handler = tunnel
        upstream.handler = tunnel
        upstream.write(first)
        client.startReading()
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        let other = connection === client ? upstream : client
        guard other.state == .open else { return }
        other.write(Array(bytes))
        if other.queuedBytes > Self.highWater {
            connection.stopReading()
            other.whenDrained(below: Self.lowWater) { [weak connection] in connection?.startReading() }
        }
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        let other = connection === client ? upstream : client
        other.close()
        if connection === client { previous?.connectionDidClose(connection, reason: reason) }
    }
}
