import Synchronization

/// One connection as the admin API lists it, on whichever node holds it.
public struct ConnectionSummary: Sendable, Hashable {
    /// Its client id (native), member id (`line-N`) or socket id (Socket.IO).
    public let id: String
    /// `native`, `line` or `socketio`.
    public let door: String
    public let channel: String
    public let name: String?
    public let ip: String?
    public let connectedAtMillis: Int64

    public init(id: String, door: String, channel: String, name: String?, ip: String?, connectedAtMillis: Int64) {
        self.id = id
        self.door = door
        self.channel = channel
        self.name = name
        self.ip = ip
        self.connectedAtMillis = connectedAtMillis
    }
}

extension ConnectionSummary {
    /// Its fields as the admin API shows them (`id, door, channel, name?, ip?, connected_at`),
    /// into an object the caller opened; the cluster's roster stores the same.
    public func writeFields(_ w: inout JSONWriter) {
        w.key("id"); w.writeString(id)
        w.key("door"); w.writeString(door)
        w.key("channel"); w.writeString(channel)
        if let name { w.key("name"); w.writeString(name) }
        if let ip { w.key("ip"); w.writeString(ip) }
        w.key("connected_at"); w.writeInt(Int(connectedAtMillis))
    }

    /// Back from what ``writeFields(_:)`` wrote; nil when a required field is missing.
    public init?(fields: JSONValue) {
        guard let id = fields["id"]?.stringValue, let door = fields["door"]?.stringValue,
              let channel = fields["channel"]?.stringValue else { return nil }
        self.init(id: id, door: door, channel: channel, name: fields["name"]?.stringValue, ip: fields["ip"]?.stringValue,
                  connectedAtMillis: Int64(fields["connected_at"]?.intValue ?? 0))
    }
}

/// What one node last told the cluster of its connections.
public struct NodeConnections: Sendable, Hashable {
    public let node: String
    /// Every connection it holds, listed or not.
    public let count: Int
    /// The first of them (at most the limit it was published with).
    public let clients: [ConnectionSummary]
    /// When it was published.
    public let publishedMillis: Int64

    public init(node: String, count: Int, clients: [ConnectionSummary], publishedMillis: Int64) {
        self.node = node
        self.count = count
        self.clients = clients
        self.publishedMillis = publishedMillis
    }
}

/// A request that a node disconnect one of its connections (an operator's, through another
/// node's admin API).
public struct DisconnectRequest: Sendable, Hashable {
    public let id: String
    public let reason: String

    public init(id: String, reason: String) {
        self.id = id
        self.reason = reason
    }
}

/// The cluster's connections, for the admin API of any node: each node publishes a bounded
/// list of its own (refreshed before it expires), reads every node's, and takes the
/// disconnect requests other nodes leave for it. One node alone uses the memory backend;
/// cluster mode the Redis one (`RedisConnectionRoster`). Both pass `ConnectionRosterContractTests`.
public protocol ConnectionRoster: Sendable {
    /// Replaces `node`'s entry: `count` connections, `clients` listed (the caller bounds the
    /// list), forgotten at `expiresMillis` unless published again.
    func publish(node: String, count: Int, clients: [ConnectionSummary], nowMillis: Int64,
                 expiresMillis: Int64) async throws(ParleyError)
    /// Every node's entry that has not expired at `nowMillis`, by node name.
    func nodes(nowMillis: Int64) async throws(ParleyError) -> [NodeConnections]
    /// Removes `node`'s entry (a node that stops).
    func withdraw(node: String) async throws(ParleyError)
    /// Leaves a request for `node` (at most ``ConnectionRosterLimits/maxPendingRequests``
    /// wait; past that the oldest go).
    func requestDisconnect(_ request: DisconnectRequest, node: String) async throws(ParleyError)
    /// Takes (and removes) the requests left for `node`, oldest first.
    func takeRequests(node: String) async throws(ParleyError) -> [DisconnectRequest]
}

public enum ConnectionRosterLimits {
    /// Connections one node lists (all are counted).
    public static let maxListed = 1_000
    /// Disconnect requests that may wait for one node.
    public static let maxPendingRequests = 1_000
}

/// The memory backend: one process.
public final class InMemoryConnectionRoster: ConnectionRoster {
    private struct State {
        var nodes: [String: (entry: NodeConnections, expiresMillis: Int64)] = [:]
        var requests: [String: [DisconnectRequest]] = [:]
    }
    private let state = Mutex(State())

    public init() {}

    public func publish(node: String, count: Int, clients: [ConnectionSummary], nowMillis: Int64,
                        expiresMillis: Int64) async throws(ParleyError) {
        let entry = NodeConnections(node: node, count: count, clients: clients, publishedMillis: nowMillis)
        state.withLock { $0.nodes[node] = (entry, expiresMillis) }
    }

    public func nodes(nowMillis: Int64) async throws(ParleyError) -> [NodeConnections] {
        state.withLock { state in
            state.nodes = state.nodes.filter { $0.value.expiresMillis > nowMillis }
            return state.nodes.values.map(\.entry).sorted { $0.node < $1.node }
        }
    }

    public func withdraw(node: String) async throws(ParleyError) {
        _ = state.withLock { $0.nodes.removeValue(forKey: node) }
    }

    public func requestDisconnect(_ request: DisconnectRequest, node: String) async throws(ParleyError) {
        state.withLock { state in
            var waiting = state.requests[node] ?? []
            waiting.append(request)
            if waiting.count > ConnectionRosterLimits.maxPendingRequests {
                waiting.removeFirst(waiting.count - ConnectionRosterLimits.maxPendingRequests)
            }
            state.requests[node] = waiting
        }
    }

    public func takeRequests(node: String) async throws(ParleyError) -> [DisconnectRequest] {
        state.withLock { $0.requests.removeValue(forKey: node) ?? [] }
    }
}
