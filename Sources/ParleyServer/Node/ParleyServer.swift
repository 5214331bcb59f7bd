import Foundation
import ParleyCore
import ParleyIO
import ParleySQLite
import Synchronization

/// Why the server could not start, naming what to fix.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
}

/// What every door shares: the hub, the configuration, one inbox per loop.
final class ServerCore: Sendable {
    let configuration: ServerConfiguration
    let hub: Hub
    let inboxes: [LoopInbox]
    /// The Socket.IO door's sid registry and SocketChat roster.
    let socketIO = SocketIOShared()
    /// Abuse-limit breaches, for `/metrics`.
    let limits = LimitCounters()
    /// Total and per-IP connection admission.
    let gate: ConnectionGate
    /// REST requests per IP.
    let restRate: RESTRateLimiter
    /// Serves https:// and wss:// when configured.
    let tls: TLSContext?
    /// Cluster mode: this node's Redis, name and backends; nil on a single node.
    let cluster: ClusterNode?

    init(configuration: ServerConfiguration, hub: Hub, group: EventLoopGroup, tls: TLSContext? = nil, cluster: ClusterNode? = nil) {
        self.configuration = configuration
        self.hub = hub
        self.tls = tls
        self.cluster = cluster
        gate = ConnectionGate(maxConnections: configuration.maxConnections,
                              maxConnectionsPerIP: configuration.maxConnectionsPerIP)
        restRate = RESTRateLimiter(ratePerSecond: configuration.restRatePerSecond, burst: configuration.restBurst)
        inboxes = group.loops.map { LoopInbox(loop: $0) }
    }

    func inbox(for loop: EventLoop) -> LoopInbox { inboxes[loop.index] }

    /// Put in member ids a door makes from per-process numbers (the line door's
    /// `line-<connection>`), so they stay unique across the nodes of a cluster: `NODE-` in
    /// cluster mode, nothing on a single node.
    var memberIDTag: String { cluster.map { "\($0.nodeID)-" } ?? "" }

    /// Cluster mode: whether Redis is usable (every connection up, the presence lease
    /// renewed), for `/readyz`; nil on a single node (nothing to wait for).
    var redisReadiness: ClusterReadiness? { cluster?.readiness }
}

/// A running Parley server: the event loops, the hub, and every door's listener.
public final class ParleyServer: Sendable {
    public let configuration: ServerConfiguration
    public let hub: Hub
    /// The durable store under `--data` on a single node; nil in cluster mode (history lives
    /// in Redis).
    public let store: SQLiteMessageStore?
    let group: EventLoopGroup
    let core: ServerCore
    private let listeners: Mutex<[TCPListener]>
    private let stopped = Atomic<Bool>(false)
    /// Bound ports (the real ones when 0 was asked for).
    public let linePort: Int
    /// The HTTP / WebSocket door's bound port.
    public let httpPort: Int

    /// Starts the loops and binds every door. Throws when a port cannot be bound.
    public convenience init(configuration: ServerConfiguration) throws {
        try self.init(configuration: configuration, store: { $0 })
    }

    /// Starts like ``init(configuration:)``, with the hub over the store `makeStore` returns
    /// for the SQLite store under `--data`: that store itself, another in front of it (tests
    /// put a fault-injecting decorator there), or another store altogether. The SQLite store
    /// is opened, and closed at shutdown, in every case. In cluster mode (`--redis`,
    /// `--redis-cluster`) there is no SQLite store and `makeStore` is not called: the hub
    /// runs over the Redis broker and presence store.
    public init(configuration: ServerConfiguration, store makeStore: (SQLiteMessageStore) -> any MessageStore) throws {
        self.configuration = configuration
        if let problem = configuration.clusterProblem { throw StartupError(description: problem) }
        var hubConfiguration = HubConfiguration()
        hubConfiguration.historyCapacity = configuration.historyCapacity
        hubConfiguration.historyBytesPerRoom = configuration.historyBytesPerRoom
        hubConfiguration.historyBytesTotal = configuration.historyBytesTotal
        hubConfiguration.backlogHighMark = configuration.roomBacklog
        let loopCount: Int
        switch configuration.loops {
        case .cores: loopCount = EventLoopGroup.coreCount
        case .fixed(let n): loopCount = n
        }
        let tls = try Self.loadTLS(configuration)
        let group = EventLoopGroup(loopCount: loopCount)
        let cluster: ClusterNode?
        do {
            if configuration.isClusterMode {
                let node = try ClusterNode(configuration: configuration, group: group,
                                           idempotencyWindowMillis: hubConfiguration.idempotencyWindowMillis)
                cluster = node
                store = nil
                hub = Hub(configuration: hubConfiguration, broker: node.broker, presence: node.presence)
            } else {
                cluster = nil
                let sqlite = try Self.openStore(configuration)
                store = sqlite
                hub = Hub(configuration: hubConfiguration, store: makeStore(sqlite))
            }
        } catch {
            group.shutdown()
            throw error
        }
        self.group = group
        let core = ServerCore(configuration: configuration, hub: hub, group: group, tls: tls, cluster: cluster)
        self.core = core
        listeners = Mutex([])
        do {
            let http = try HTTPDoor.listen(core: core, group: group)
            httpPort = http.port
            listeners.withLock { $0.append(http) }
            let line = try LineDoor.listen(core: core, group: group)
            linePort = line.port
            listeners.withLock { $0.append(line) }
        } catch {
            for listener in listeners.withLock({ $0 }) { listener.close() }
            cluster?.shutdown(timeout: .zero)
            group.shutdown()
            store?.close()
            throw error
        }
        // Typing flags that were not refreshed expire on their own; idle rooms leave memory.
        let hub = self.hub
        group.loops[0].execute {
            let timer = LoopTimer(loop: group.loops[0])
            timer.start(after: 1000, repeating: 1000, keepAlive: true) { hub.expireTyping() }
            let eviction = LoopTimer(loop: group.loops[0])
            eviction.start(after: 5000, repeating: 5000, keepAlive: true) { hub.evictIdleRooms() }
        }
    }

    /// Cluster mode: this node's name in the cluster; nil on a single node.
    public var nodeID: String? { core.cluster?.nodeID }

    /// The server TLS context from `--tls-cert` / `--tls-key`, or nil without them. A missing
    /// or unreadable file, a bad PEM or a key that does not match stops startup, naming the file.
    static func loadTLS(_ configuration: ServerConfiguration) throws -> TLSContext? {
        switch (configuration.tlsCertificateFile, configuration.tlsKeyFile) {
        case (nil, nil):
            if configuration.lineTLS { throw StartupError(description: "--line-tls needs --tls-cert and --tls-key") }
            return nil
        case (.some, nil): throw StartupError(description: "--tls-cert needs --tls-key (the certificate's private key)")
        case (nil, .some): throw StartupError(description: "--tls-key needs --tls-cert")
        case (.some(let certificate), .some(let key)):
            for (what, path) in [("certificate", certificate), ("private key", key)] where access(path, R_OK) != 0 {
                throw StartupError(description: "cannot read the TLS \(what) file \(path): \(String(cString: strerror(errno)))")
            }
            do {
                return try TLSContext(certificateChainFile: certificate, privateKeyFile: key)
            } catch {
                throw StartupError(description: error.message)
            }
        }
    }

    /// Creates the data directory when missing and opens `parley.sqlite3` in it; a directory
    /// that cannot be created or written, or a file that is not a Parley database, stops
    /// startup with a message naming the path.
    static func openStore(_ configuration: ServerConfiguration) throws -> SQLiteMessageStore {
        let directory = configuration.dataDirectory
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw StartupError(description: "the data directory \(directory) is not a directory")
            }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw StartupError(description: "cannot create the data directory \(directory): \(error.localizedDescription)")
            }
        }
        guard access(directory, W_OK | X_OK) == 0 else {
            throw StartupError(description: "the data directory \(directory) is not writable: \(String(cString: strerror(errno)))")
        }
        var options = SQLiteStoreOptions()
        options.synchronousFull = configuration.syncFull
        options.retention = storeRetention(configuration)
        do {
            return try SQLiteMessageStore(path: directory + "/parley.sqlite3", options: options)
        } catch {
            throw StartupError(description: error.message)
        }
    }

    /// The retention policy of the configuration (server-wide and per channel).
    static func storeRetention(_ configuration: ServerConfiguration) -> StoreRetention {
        var retention = StoreRetention(maxMessagesPerRoom: configuration.retentionCount,
                                       maxAgeMillis: configuration.retentionDays.map { Int64($0) * 86_400_000 })
        // A channel's own `history` block replaces the server-wide policy there; a key it
        // leaves out keeps the server-wide value.
        for channel in configuration.channels where channel.retentionCount != nil || channel.retentionDays != nil {
            retention.channels[channel.id] = StoreRetention.ChannelRetention(
                maxMessagesPerRoom: channel.retentionCount ?? configuration.retentionCount,
                maxAgeMillis: (channel.retentionDays ?? configuration.retentionDays).map { Int64($0) * 86_400_000 })
        }
        return retention
    }

    /// The lines `parley serve` prints once it is ready, one per bound door.
    public var listeningLines: [String] {
        var lines = ["http listening on \(configuration.host):\(httpPort)",
                     "line listening on \(configuration.host):\(linePort)"]
        if core.tls != nil {
            lines.append("tls on: https:// and wss:// on the http port" + (configuration.lineTLS ? ", and the line port" : ""))
        }
        if let cluster = core.cluster { lines.append(cluster.startLine) }
        return lines
    }

    /// Stops gracefully: stop accepting, tell every client goodbye, flush, then stop the
    /// loops. Waits at most `timeout` for clients to drain. Idempotent.
    public func shutdown(timeout: Duration = .seconds(3)) {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        for listener in listeners.withLock({ $0 }) { listener.close() }
        for loop in group.loops {
            loop.execute {
                loop.forEachConnection { connection in
                    // Connections the server opened (to Redis) are closed by their owners,
                    // after the sessions: a cluster node still announces its members' leaves.
                    if connection.isOutbound { return }
                    if let session = connection.handler as? GracefulSession {
                        session.serverIsStopping()
                    } else {
                        connection.close()
                    }
                }
            }
        }
        let deadline = ContinuousClock.now + timeout
        while core.gate.open.load(ordering: .relaxed) > 0 && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        // A node that leaves says so: its remaining members leave everywhere now.
        core.cluster?.shutdown(timeout: .seconds(2))
        group.shutdown()
        store?.close()
    }

    /// Watches SIGINT and SIGTERM, calls `ready` once the watchers are in place (so a signal
    /// sent after `ready` is always handled), blocks until a signal arrives, then shuts down
    /// gracefully.
    public func runUntilSignalled(ready: () -> Void = {}) {
        let signalled = DispatchSemaphore(value: 0)
        let installed = DispatchSemaphore(value: 0)
        let loop = group.loops[0]
        final class Watchers { var list: [SignalWatcher] = [] }
        loop.execute {
            let watchers = loop.local(Watchers.self) { Watchers() }
            for signal in [SIGINT, SIGTERM] {
                watchers.list.append(SignalWatcher(loop: loop, signal: signal) { _ in signalled.signal() })
            }
            installed.signal()
        }
        installed.wait()
        ready()
        signalled.wait()
        shutdown()
    }
}
