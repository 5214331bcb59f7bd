import Foundation
import ParleyCore
import ParleyHTTP
import ParleyIO
import ParleyLog
import ParleySQLite
import Synchronization

/// Why the server could not start, naming what to fix.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
}

/// What every door shares: the hub, the configuration, one inbox per loop, and what the
/// operator sees (logs, metrics, readiness, the admin API's directory and bans).
final class ServerCore: Sendable {
    /// The configuration in force: replaced by a reload (SIGHUP), so read it when needed
    /// rather than keeping a copy.
    let settings: SettingsSource
    var configuration: ServerConfiguration { settings.current.configuration }
    /// The web-origin rules of the configuration in force, built once per configuration:
    /// every HTTP request (each Socket.IO poll) asks them.
    var webOrigins: WebOriginPolicy { settings.current.webOrigins }
    let hub: Hub
    let inboxes: [LoopInbox]
    let loops: [EventLoop]
    /// The server's doors (``DoorRegistry``), each with its own state.
    let doors: DoorSet
    /// Each loop's hub of sessions and rooms.
    let loopContexts: LoopLocal<LoopContext>
    /// Abuse-limit breaches, for `/metrics` (and the log).
    let limits: LimitCounters
    /// Total and per-IP connection admission.
    let gate: ConnectionGate
    /// REST requests per IP.
    let restRate: IPRateLimiter
    /// File downloads per address (``ServerConfiguration/downloadRatePerSecond``).
    let downloadRate: IPRateLimiter
    /// Bytes all connections may hold in WebSocket messages and HTTP request bodies not yet
    /// complete (``ServerConfiguration/inboundBufferBytes``).
    let inboundBudget: InboundByteBudget
    /// Serves https:// and wss:// when configured.
    let tls: TLSContext?
    /// Attachments: uploads, downloads, the registry (Files/).
    let files: ServerFiles
    /// The server's logger (standard error in `parley serve`; tests pass their own).
    let logger: Logger
    /// Keeps floods of one kind of line (refused tokens, breaches, store errors) out of the log.
    let logThrottle: LogThrottle
    let metrics: ServerMetrics
    /// What `/readyz` asks; cluster mode adds its checks here.
    let readiness = Readiness()
    /// The REST listings that walk a channel's rooms (stats, members, rooms, room members):
    /// shared by requests at once and given again for a second (RESTRoutes, "queries").
    let channelListings: SharedAnswers<RESTRoutes.ListingKey, HTTPResponse>
    /// Identified clients of this node, for the admin API and reloads.
    let directory = SessionDirectory()
    let bans = BanList()
    /// Where the bans are kept (SQLite, or Redis for the whole cluster), feeding ``bans``.
    let banKeeper: BanKeeper
    /// The dashboard's recent numbers.
    let statsHistory = StatsHistory()
    /// The store as the hub uses it (timed, logged); nil when the hub was given another.
    let observedStore: ObservedMessageStore?
    /// Cluster mode: this node's Redis, name and backends; nil on a single node.
    let cluster: ClusterNode?
    /// Cluster mode: this node's entry of the cluster's connection roster.
    let connectionSync: ConnectionRosterSync?
    let startedUnixMillis: Int64
    let startedMonotonicMillis: Int64
    /// What the doors' sessions get of the server, and nothing more.
    let doorContext: DoorContext
    private let providers = Mutex<[@Sendable (inout PrometheusText) -> Void]>([])
    /// False for a server started without listeners (``ParleyServer/init(configuration:logger:clock:bindsListeners:store:)``):
    /// its doors are reached only through ``ParleyServer/acceptInMemory(door:remoteIP:loop:)``.
    let bindsListeners: Bool
    /// Push notifications, when VAPID keys are configured (set once, right after start).
    let push = StartedService<PushService>()
    var pushService: PushService? { push.service }
    /// Cluster mode: Engine.IO requests for another node's sessions go there (no sticky sessions).
    let engineIORelay = StartedService<EngineIORelay>()
    /// What each door with a listener does with an accepted connection, kept so a connection
    /// handed in memory takes the same way in (``admit(_:door:accept:)``).
    let acceptors = Mutex<[DoorKind: DoorAcceptor]>([:])

    init(configuration: ServerConfiguration, hub: Hub, group: EventLoopGroup, tls: TLSContext? = nil,
         logger: Logger = .disabled, logThrottle: LogThrottle = LogThrottle(), metrics: ServerMetrics? = nil,
         observedStore: ObservedMessageStore? = nil, files: ServerFiles, cluster: ClusterNode? = nil,
         banStore: any BanStore = InMemoryBanStore(), readStore: any ReadStateStore = InMemoryReadStateStore(),
         bindsListeners: Bool = true) {
        settings = SettingsSource(configuration)
        banKeeper = BanKeeper(store: banStore, list: bans, clock: hub.clock)
        self.bindsListeners = bindsListeners
        self.hub = hub
        channelListings = SharedAnswers(reuseMillis: RESTRoutes.listingReuseMillis, maxRunning: RESTRoutes.maxListingsAtOnce,
                                        maxWaiting: RESTRoutes.maxListingsWaiting, maxKeptCost: RESTRoutes.maxListingBytesKept,
                                        cost: { $0.body.count }, now: { [clock = hub.clock] in clock.nowMillis() })
        self.tls = tls
        self.files = files
        self.logger = logger
        self.logThrottle = logThrottle
        self.observedStore = observedStore
        self.cluster = cluster
        connectionSync = cluster.map { ConnectionRosterSync(roster: $0.connections, node: $0.nodeID, clock: hub.clock) }
        let metrics = metrics ?? ServerMetrics(loopCount: group.loops.count)
        self.metrics = metrics
        limits = LimitCounters(logger: logger, throttle: logThrottle)
        let doors = DoorRegistry.make(configuration: configuration, hub: hub, group: group, cluster: cluster) { error in
            logThrottle.log("socketchat roster", to: logger, .warn, "the SocketChat roster cannot be kept in Redis",
                            metadata: ["error": .string(error.message)])
        }
        self.doors = doors
        let loopContexts = LoopLocal(group) { loop in LoopContext(encoders: doors.encoders(loop)) }
        self.loopContexts = loopContexts
        gate = ConnectionGate(maxConnections: configuration.maxConnections,
                              maxConnectionsPerIP: configuration.maxConnectionsPerIP)
        restRate = IPRateLimiter(ratePerSecond: configuration.restRatePerSecond, burst: configuration.restBurst)
        downloadRate = IPRateLimiter(ratePerSecond: configuration.downloadRatePerSecond, burst: configuration.downloadBurst)
        inboundBudget = InboundByteBudget(limit: configuration.inboundBufferBytes)
        loops = group.loops
        inboxes = group.loops.map { LoopInbox(loop: $0, contexts: loopContexts, metrics: metrics.loops[$0.index]) }
        startedUnixMillis = LogDestination.unixMillis()
        startedMonotonicMillis = MonotonicTime.milliseconds()
        let inboxes = self.inboxes
        doorContext = DoorContext(hub: hub, settings: settings, directory: directory, bans: bans, limits: limits,
                                  metrics: metrics, logger: logger, logThrottle: logThrottle, inbox: { inboxes[$0.index] },
                                  memberIDTag: DoorContext.processMemberIDTag(node: cluster?.nodeID), loopContexts: loopContexts,
                                  reads: readStore, historyBytes: DoorContext.byteBudget(configuration.historyBytesPerIPPerSecond),
                                  publishBytes: DoorContext.byteBudget(configuration.publishBytesPerIPPerSecond), push: push)
    }

    func inbox(for loop: EventLoop) -> LoopInbox { inboxes[loop.index] }

    /// The per-address buckets a cluster shares (``ClusterBudgetSync``): published and
    /// history bytes, REST requests, Socket.IO polls.
    var perAddressBudgets: [ClusterBudgetSync.Budget] {
        var budgets = [ClusterBudgetSync.Budget(name: "publish", limiter: doorContext.publishBytes),
                       ClusterBudgetSync.Budget(name: "history", limiter: doorContext.historyBytes),
                       ClusterBudgetSync.Budget(name: "rest", limiter: restRate),
                       ClusterBudgetSync.Budget(name: "downloads", limiter: downloadRate)]
        if let socketIO = doors.all.lazy.compactMap({ $0 as? SocketIODoor }).first {
            budgets.append(ClusterBudgetSync.Budget(name: "polling", limiter: socketIO.shared.pollingRate))
        }
        return budgets
    }

    /// `loop`'s sessions and rooms. On `loop` only.
    func loopHub(_ loop: EventLoop) -> LoopHub<IOBuffer> { loopContexts[loop].loopHub }


    /// Put in member ids a door makes from per-process numbers (the line door's
    /// `line-<tag><connection>`), so they stay unique across the nodes of a cluster and across
    /// restarts: `NODE-` in cluster mode, then a random part drawn at start
    /// (``DoorContext/processMemberIDTag(node:)``).
    var memberIDTag: String { doorContext.memberIDTag }

    /// A connection id as `LOOP.N` for logs (the loop's index is in its top bits).
    static func describe(connection id: UInt64) -> String { "\(id >> 48).\(id & 0xFFFF_FFFF_FFFF)" }

    /// The loop's fan-out counters.
    func loopMetrics(_ loop: EventLoop) -> LoopMetrics { metrics.loops[loop.index] }

    /// Puts a reloaded configuration in force (see ``ParleyServer/applyConfiguration(_:)``).
    func replaceConfiguration(_ configuration: ServerConfiguration) {
        settings.replace(with: configuration)
    }

    /// Adds lines to every `/metrics` answer (cluster mode: the Redis connection's state).
    func addMetricsProvider(_ provider: @escaping @Sendable (inout PrometheusText) -> Void) {
        providers.withLock { $0.append(provider) }
    }

    var metricsProviders: [@Sendable (inout PrometheusText) -> Void] { providers.withLock { $0 } }

    /// Logs a refused credential (token, secret, admin or metrics token) at info, rate-limited.
    /// The credential itself is never logged: only where it came from and why it failed.
    func logAuthFailure(door: DoorKind, remote: String?, channel: String? = nil, reason: String) {
        doorContext.logAuthFailure(door: door, remote: remote, channel: channel, reason: reason)
    }
}

/// A running Parley server: the event loops, the hub, and every door's listener.
public final class ParleyServer: Sendable {
    /// The configuration in force (a reload changes what it may: see
    /// ``applyConfiguration(_:)``).
    public var configuration: ServerConfiguration { core.configuration }
    public let hub: Hub
    /// The durable store under `--data` on a single node; nil in cluster mode (history lives
    /// in Redis).
    public let store: SQLiteMessageStore?
    /// The bans file beside the store on a single node.
    private let banFile: SQLiteBanStore?
    /// The read marks file beside the store on a single node.
    private let readsFile: SQLiteReadStateStore?
    /// The server's logger.
    public let logger: Logger
    let group: EventLoopGroup
    let core: ServerCore
    private let listeners: Mutex<[TCPListener]>
    private let stopped = Atomic<Bool>(false)
    /// Signalled by a second SIGINT/SIGTERM: cuts a drain short.
    private let drainInterrupted = DispatchSemaphore(value: 0)
    /// SIGHUP reloads run here, one at a time, off the event loops.
    private let reloads = DispatchQueue(label: "parley-reload")
    /// Bound ports (the real ones when 0 was asked for).
    public let linePort: Int
    /// The HTTP / WebSocket door's bound port.
    public let httpPort: Int

    /// Starts the loops and binds every door. Throws when a port cannot be bound.
    public convenience init(configuration: ServerConfiguration) throws {
        try self.init(configuration: configuration, logger: .disabled, store: { $0 })
    }

    /// Starts like ``init(configuration:)``, logging to `logger`.
    public convenience init(configuration: ServerConfiguration, logger: Logger) throws {
        try self.init(configuration: configuration, logger: logger, store: { $0 })
    }

    /// Starts like ``init(configuration:)``, with the hub over the store `makeStore` returns
    /// for the SQLite store under `--data`: that store itself, another in front of it (tests
    /// put a fault-injecting decorator there), or another store altogether. The SQLite store
    /// is opened, and closed at shutdown, in every case. In cluster mode (`--redis`,
    /// `--redis-cluster`) there is no SQLite store and `makeStore` is not called: the hub
    /// runs over the Redis broker and presence store.
    ///
    /// `clock` is the wall clock of timestamps, token expiry, bans and rate buckets: tests
    /// pass a ``ManualClock`` and move it by hand (the event loops' timers keep real time).
    ///
    /// With `bindsListeners` false no port is bound (``httpPort`` and ``linePort`` are 0): the
    /// server runs as usual, but its doors are reached only through
    /// ``acceptInMemory(door:remoteIP:loop:)``, for tests without sockets.
    public init(configuration: ServerConfiguration, logger: Logger = .disabled, clock: any WallClock = SystemWallClock(),
                bindsListeners: Bool = true, store makeStore: (SQLiteMessageStore) -> any MessageStore) throws {
        self.logger = logger
        let loopCount: Int
        switch configuration.loops {
        case .cores: loopCount = EventLoopGroup.coreCount
        case .fixed(let n): loopCount = n
        }
        logger.info("starting", metadata: ["version": .string(BuildInfo.version), "commit": .string(BuildInfo.commit),
                                           "loops": .int(loopCount), "data": .string(configuration.dataDirectory)])
        var hubConfiguration = HubConfiguration()
        hubConfiguration.historyCapacity = configuration.historyCapacity
        hubConfiguration.historyBytesPerRoom = configuration.historyBytesPerRoom
        hubConfiguration.historyBytesTotal = configuration.historyBytesTotal
        hubConfiguration.backlogHighMark = configuration.roomBacklog
        hubConfiguration.historyPageBytes = configuration.historyPageBytes
        hubConfiguration.maxHistoryBytesInFlight = configuration.historyBytesInFlight
        if let problem = configuration.clusterProblem { throw StartupError(description: problem) }
        let metrics = ServerMetrics(loopCount: loopCount)
        let throttle = LogThrottle()
        let tls: TLSContext?
        let files: ServerFiles
        do {
            tls = try Self.loadTLS(configuration)
            files = try ServerFiles(configuration: configuration)
        } catch {
            logger.error("TLS or the files directory cannot be set up", metadata: ["error": .string("\(error)")])
            throw error
        }
        let group = EventLoopGroup(loopCount: loopCount)
        let cluster: ClusterNode?
        let observed: ObservedMessageStore?
        var sqliteBans: SQLiteBanStore?
        var sqliteReads: SQLiteReadStateStore?
        let pushSettings: PushSettings
        do {
            pushSettings = try PushSettings(configuration)
        } catch {
            logger.error("push cannot be set up", metadata: ["error": .string(error.description)])
            throw error
        }
        var pushStore: (any PushStore)?
        do {
            if configuration.isClusterMode {
                let node = try ClusterNode(configuration: configuration, group: group,
                                           idempotencyWindowMillis: hubConfiguration.idempotencyWindowMillis)
                cluster = node
                if pushSettings.isOn { pushStore = node.pushStore }
                files.useClusterBudgets(node.budgets)
                store = nil
                observed = nil
                hub = Hub(configuration: hubConfiguration, clock: clock, broker: node.broker, presence: node.presence)
                logger.info("cluster node", metadata: ["node": .string(node.nodeID), "redis": .string(node.redisDescription)])
            } else {
                cluster = nil
                let sqlite: SQLiteMessageStore
                do {
                    sqlite = try Self.openStore(configuration)
                } catch {
                    logger.error("the data store cannot be used", metadata: ["error": .string("\(error)")])
                    throw error
                }
                store = sqlite
                do {
                    sqliteBans = try SQLiteBanStore(path: configuration.dataDirectory + "/bans.sqlite3", synchronousFull: configuration.syncFull)
                } catch {
                    sqlite.close()
                    throw StartupError(description: "cannot open the bans file: \(error.message)")
                }
                do {
                    sqliteReads = try SQLiteReadStateStore(path: configuration.dataDirectory + "/reads.sqlite3",
                                                           maxRoomsPerUser: configuration.maxConversationsPerUser,
                                                           synchronousFull: configuration.syncFull)
                } catch {
                    sqlite.close()
                    sqliteBans?.close()
                    throw StartupError(description: "cannot open the read marks file: \(error.message)")
                }
                if pushSettings.isOn {
                    do {
                        pushStore = try SQLitePushStore(path: configuration.dataDirectory + "/push.sqlite3", synchronousFull: configuration.syncFull)
                    } catch {
                        sqlite.close()
                        sqliteBans?.close()
                        throw StartupError(description: "cannot open the push file: \(error.message)")
                    }
                }
                let opened = sqlite.openedAtSchemaVersion == 0 ? "store created"
                    : sqlite.openedAtSchemaVersion < SQLiteMessageStore.schemaVersion ? "store opened and migrated" : "store opened"
                logger.info(opened,
                            metadata: ["path": .string(sqlite.path), "schema": .int(Int(SQLiteMessageStore.schemaVersion)),
                                       "found_schema": .int(Int(sqlite.openedAtSchemaVersion)),
                                       "sqlite": .string(SQLiteMessageStore.libraryVersion)])
                let wrapped = ObservedMessageStore(makeStore(sqlite), metrics: metrics, logger: logger, throttle: throttle)
                observed = wrapped
                hub = Hub(configuration: hubConfiguration, clock: clock, store: wrapped)
            }
        } catch {
            group.shutdown()
            files.shutdown()
            throw error
        }
        self.group = group
        let core = ServerCore(configuration: configuration, hub: hub, group: group, tls: tls, logger: logger,
                              logThrottle: throttle, metrics: metrics, observedStore: observed, files: files, cluster: cluster,
                              banStore: cluster?.bans ?? sqliteBans ?? InMemoryBanStore(),
                              readStore: cluster?.reads ?? sqliteReads ?? InMemoryReadStateStore(maxRoomsPerUser: configuration.maxConversationsPerUser),
                              bindsListeners: bindsListeners)
        self.banFile = sqliteBans
        self.readsFile = sqliteReads
        if let pushStore {
            let push = PushService(store: pushStore, settings: pushSettings, hub: hub, reads: core.doorContext.reads, logger: logger,
                                   budgets: cluster?.budgets ?? InMemoryBudgetStore())
            core.push.set(push)
            core.addMetricsProvider { text in push.counters.write(into: &text) }
            logger.info("push on", metadata: ["providers": .string(pushSettings.providers.joined(separator: ",")),
                                              "queue": .string(cluster == nil ? configuration.dataDirectory + "/push.sqlite3" : "redis")])
        }
        self.core = core
        listeners = Mutex([])
        do {
            var ports: [DoorKind: Int] = [:]
            for door in core.doors.all {
                guard let listener = try door.listen(core, group: group) else { continue }
                ports[door.kind] = listener.port
                listeners.withLock { $0.append(listener) }
                logger.info("listening", metadata: ["door": .string(door.kind.rawValue),
                                                    "address": .string("\(configuration.host):\(listener.port)"),
                                                    "tls": .bool(tls != nil && DoorPolicy(door.kind, configuration).tls)])
            }
            httpPort = ports[.http] ?? 0
            linePort = ports[.line] ?? 0
            files.bound(host: configuration.host, port: httpPort, tls: tls != nil)
        } catch {
            logger.error("cannot listen", metadata: ["error": .string(error.message)])
            for listener in listeners.withLock({ $0 }) { listener.close() }
            cluster?.shutdown(timeout: .zero)
            group.shutdown()
            files.shutdown()
            store?.close()
            throw error
        }
        Self.addStoreReadiness(core)
        core.addMetricsProvider { [hub] out in
            out.family("parley_history_read_bytes_in_flight", "gauge",
                       help: "bytes of history pages being read from the store now (bounded by --history-inflight-bytes)")
            out.sample("parley_history_read_bytes_in_flight", hub.historyReadBytesInFlight)
            out.family("parley_history_reads_waiting", "gauge",
                       help: "subscriptions' history reads (history_count, resume pages) waiting for room under --history-inflight-bytes")
            out.sample("parley_history_reads_waiting", hub.historyReadsWaiting)
        }
        core.addMetricsProvider { [budget = core.inboundBudget] out in
            out.family("parley_inbound_buffered_bytes", "gauge",
                       help: "bytes connections hold in WebSocket messages and HTTP request bodies not complete yet (bounded by --inbound-buffer-bytes)")
            out.sample("parley_inbound_buffered_bytes", budget.bytesHeld)
            out.family("parley_inbound_budget_closes_total", "counter",
                       help: "connections closed (WebSocket 1013, HTTP 503) because unfinished messages and bodies filled --inbound-buffer-bytes")
            out.sample("parley_inbound_budget_closes_total", budget.connectionsRefused)
        }
        Self.startBans(core, logger: logger, polling: cluster != nil)
        core.connectionSync?.start(directory: core.directory) { error in
            throttle.log("connection roster", to: logger, .warn, "this node's connections cannot be published to the cluster",
                         metadata: ["error": .string(error.message)])
        }
        if let cluster {
            core.readiness.add("redis") { cluster.readinessProblem }
            core.addMetricsProvider { out in cluster.writeMetrics(into: &out) }
            let budgetSync = ClusterBudgetSync(budgets: core.perAddressBudgets, store: cluster.budgets, clock: hub.clock)
            budgetSync.start(on: group.loops[0])
            core.addMetricsProvider { out in budgetSync.writeMetrics(into: &out) }
            Self.startRelay(cluster, core: core, logger: logger, group: group, httpPort: httpPort, tls: tls != nil && DoorPolicy(.http, configuration).tls)
        }
        files.startCollecting(on: group.loops[0], every: configuration.filesCollectIntervalSeconds, store: hub.store,
                              clock: hub.clock)
        // Typing flags that were not refreshed expire on their own; idle rooms leave memory;
        // suppressed log lines are summed up; the dashboard's charts get a sample.
        let hub = self.hub
        group.loops[0].execute {
            let timer = LoopTimer(loop: group.loops[0])
            // Cluster mode: each change of Redis's state is logged once (down with its reason,
            // back up), so an operator reading the log sees the outage and its end.
            var redisReady: Bool?
            timer.start(after: 1000, repeating: 1000, keepAlive: true) {
                hub.expireTyping()
                core.logThrottle.flushSummaries(to: core.logger)
                if let cluster {
                    let now = cluster.readiness
                    if now.ready != redisReady {
                        if now.ready {
                            core.logger.info("redis ready", metadata: ["redis": .string(cluster.redisDescription)])
                            redisReady = true
                        } else if redisReady != nil || !now.detail.hasPrefix("redis connecting") {
                            // (Still connecting at start is not worth a warning.)
                            core.logger.warn("redis not usable", metadata: ["redis": .string(cluster.redisDescription),
                                                                           "state": .string(now.detail)])
                            redisReady = false
                        }
                    }
                }
            }
            let eviction = LoopTimer(loop: group.loops[0])
            eviction.start(after: 5000, repeating: 5000, keepAlive: true) { hub.evictIdleRooms() }
            core.sampleStats()
            let sampler = LoopTimer(loop: group.loops[0])
            let interval = UInt64(core.statsHistory.intervalMillis)
            sampler.start(after: interval, repeating: interval, keepAlive: true) { core.sampleStats() }
        }
        if let exposure = configuration.openModeExposure {
            logger.warn("open mode on a public address", metadata: ["address": .string(configuration.host),
                                                                    "detail": .string(exposure)])
        }
        logger.info("ready", metadata: ["http": .int(httpPort), "line": .int(linePort)])
    }

    /// `/readyz` asks the store: the last append did not fail (within 30 s), and a read
    /// through the store's reader answers.
    /// Cluster mode: Engine.IO requests for other nodes' sessions are handed on to them, and
    /// this node says where it is reached (renewed with the presence lease).
    private static func startRelay(_ cluster: ClusterNode, core: ServerCore, logger: Logger, group: EventLoopGroup, httpPort: Int, tls: Bool) {
        let configuration = core.configuration
        var address = configuration.relayAddress
        if address == nil, !["0.0.0.0", "::", "[::]", ""].contains(configuration.host) {
            address = (configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host) + ":\(httpPort)"
        }
        if tls {
            // The relay speaks plain HTTP between nodes.
            logger.warn("no sticky sessions needs a plain HTTP door between nodes: with TLS on the HTTP door, terminate TLS at the load balancer, or route Socket.IO by sid")
            address = nil
        } else if address == nil {
            logger.warn("bound to a wildcard address without --relay-address: other nodes cannot hand this node's Socket.IO requests to it (sticky sessions needed)")
        }
        let relay = EngineIORelay(nodeID: cluster.nodeID, directory: cluster.nodes, address: address)
        let secret = Base64URL.encode(PushCrypto.random(32))
        cluster.nodes.loadSecret(candidate: secret) { result in
            if case .failure(let error) = result {
                logger.warn("the cluster's relay secret cannot be read yet; Socket.IO requests for other nodes' sessions are refused until it is",
                            metadata: ["error": .string(error.message)])
            }
        }
        core.engineIORelay.set(relay)
        core.addMetricsProvider { out in relay.writeMetrics(into: &out) }
        guard let address else { return }
        let lease = configuration.presenceLeaseMillis
        let register: @Sendable () -> Void = {
            if cluster.nodes.secret == nil { cluster.nodes.loadSecret(candidate: secret) { _ in } } else { cluster.nodes.reassertSecret() }
            cluster.nodes.register(node: cluster.nodeID, address: address, leaseMillis: Int64(lease)) { _ in }
        }
        register()
        logger.info("relay on", metadata: ["node": .string(cluster.nodeID), "address": .string(address)])
        let loop = group.loops[0]
        let every = UInt64(max(200, lease / 3))
        loop.execute {
            LoopTimer(loop: loop).start(after: every, repeating: every, keepAlive: true) { register() }
        }
    }

    private static func addStoreReadiness(_ core: ServerCore) {
        let store = core.hub.store
        let observed = core.observedStore
        core.readiness.add("store") {
            if let failure = observed?.recentFailure(withinMillis: 30_000) {
                return "the last write failed: \(failure.message)"
            }
            let probe = RoomKey(channel: "parley", room: "readiness")
            let result = await withCheckedContinuation { continuation in
                store.messages(in: probe, after: Int64.max - 1, limit: 1) { continuation.resume(returning: $0) }
            }
            if case .failure(let error) = result { return "a read failed: \(error.message)" }
            return nil
        }
    }

    /// The server TLS context from `--tls-cert` / `--tls-key`, or nil without them. A missing
    /// or unreadable file, a bad PEM or a key that does not match stops startup, naming the file.
    static func loadTLS(_ configuration: ServerConfiguration) throws -> TLSContext? {
        switch (configuration.tlsCertificateFile, configuration.tlsKeyFile) {
        case (nil, nil):
            if configuration.lineTLS { throw StartupError(description: "\(ServerSetting.flag(of: \ServerConfiguration.lineTLS)) needs \(ServerSetting.flag(of: \ServerConfiguration.tlsCertificateFile)) and \(ServerSetting.flag(of: \ServerConfiguration.tlsKeyFile))") }
            return nil
        case (.some, nil): throw StartupError(description: "\(ServerSetting.flag(of: \ServerConfiguration.tlsCertificateFile)) needs \(ServerSetting.flag(of: \ServerConfiguration.tlsKeyFile)) (the certificate's private key)")
        case (nil, .some): throw StartupError(description: "\(ServerSetting.flag(of: \ServerConfiguration.tlsKeyFile)) needs \(ServerSetting.flag(of: \ServerConfiguration.tlsCertificateFile))")
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
        options.maxBytes = configuration.storeMaxBytes
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

    /// A door with a listener of its own, for ``acceptInMemory(door:remoteIP:loop:)``.
    public enum ListeningDoor: Sendable {
        /// The HTTP port: REST, the web client, the native WebSocket door, Socket.IO.
        case http
        /// The line protocol's port.
        case line

        var kind: DoorKind {
            switch self {
            case .http: .http
            case .line: .line
            }
        }
    }

    /// For tests: a connection to `door` without a socket, as if its listener had accepted
    /// one from `remoteIP`. It takes the same way in as a real one (bans, the total and
    /// per-IP limits, the door's policy and session), on the next loop, and the returned
    /// peer is its far end: send it bytes, read what the server wrote, close it. Works on a
    /// server started with or without listeners (`bindsListeners`). TLS is not available in
    /// memory: a door that would speak it refuses the connection (it is closed at once).
    /// Throws on a stopped server.
    /// `loop` picks the event loop (an index below the configured loop count) where the
    /// connection lives, as a test of cross-loop delivery wants; by default the next one.
    public func acceptInMemory(door: ListeningDoor, remoteIP: String = "127.0.0.1", loop: Int? = nil) async throws -> InMemoryPeer {
        let kind = door.kind
        guard !stopped.load(ordering: .relaxed) else { throw StartupError(description: "the server is stopped") }
        guard let accept = core.acceptors.withLock({ $0[kind] }) else {
            throw StartupError(description: "the \(kind.rawValue) door has no listener on this server")
        }
        if let loop, !group.loops.indices.contains(loop) {
            throw StartupError(description: "no loop \(loop): this server has \(group.loops.count)")
        }
        let core = self.core
        return try await InMemoryPeer.connect(on: loop.map { group.loops[$0] } ?? group.next(), remoteIP: remoteIP) { connection in
            core.admit(connection, door: kind, accept: accept)
        }
    }

    /// Cluster mode: this node's name in the cluster; nil on a single node.
    public var nodeID: String? { core.cluster?.nodeID }

    /// The lines `parley serve` prints once it is ready, one per bound door.
    public var listeningLines: [String] {
        let configuration = self.configuration
        var lines = ["http listening on \(configuration.host):\(httpPort)",
                     "line listening on \(configuration.host):\(linePort)"]
        if core.tls != nil {
            lines.append("tls on: https:// and wss:// on the http port" + (configuration.lineTLS ? ", and the line port" : ""))
        }
        if let cluster = core.cluster { lines.append(cluster.startLine) }
        return lines
    }

    /// Stops gracefully. First `/readyz` answers 503 for `drain` (default `--drain-time`)
    /// while everything keeps serving, so load balancers take the node out; then the doors
    /// stop accepting, every client is told goodbye, and the server waits at most `timeout`
    /// (default `--shutdown-timeout`) for them to go before it stops the loops. The waits are
    /// timers on the event loops and the connection gate's own signal, not polling.
    /// Idempotent; must not be called on an event loop.
    public func shutdown(drain: Duration? = nil, timeout: Duration? = nil) {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        let configuration = self.configuration
        let drainMillis = drain.map(Self.milliseconds) ?? configuration.drainMillis
        let graceMillis = timeout.map(Self.milliseconds) ?? configuration.shutdownGraceMillis
        logger.info("shutting down", metadata: ["drain_ms": .int(Int(drainMillis)), "grace_ms": .int(Int(graceMillis)),
                                                "connections": .int(core.gate.open.load(ordering: .relaxed))])
        core.readiness.beginDraining()
        let loop = group.loops[0]
        if drainMillis > 0 {
            let drained = drainInterrupted
            loop.execute { loop.schedule(after: drainMillis) { drained.signal() } }
            drained.wait()
        }
        for listener in listeners.withLock({ $0 }) { listener.close() }
        let core = self.core
        for loop in group.loops {
            loop.execute {
                for door in core.doors.all { door.serverIsStopping(core, on: loop) }
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
        let gone = DispatchSemaphore(value: 0)
        core.gate.whenEmpty { gone.signal() }
        loop.execute { loop.schedule(after: graceMillis) { gone.signal() } }
        gone.wait()
        let left = core.gate.open.load(ordering: .relaxed)
        core.connectionSync?.stop()
        // A node that leaves says so: its remaining members leave everywhere now.
        core.cluster?.shutdown(timeout: .seconds(2))
        group.shutdown()
        core.files.shutdown()
        core.banKeeper.stop()
        for door in core.doors.all { door.stop() }
        core.pushService?.stop()
        banFile?.close()
        readsFile?.close()
        store?.close()
        logger.info("stopped", metadata: ["connections_cut": .int(left)])
    }

    /// Reads the bans in (waiting a little for Redis), and in cluster mode follows the
    /// changes other nodes make: a ban added elsewhere disconnects the clients it covers here.
    private static func startBans(_ core: ServerCore, logger: Logger, polling: Bool) {
        let report: @Sendable (ParleyError) -> Void = { error in
            core.logThrottle.log("bans", to: logger, .warn, "the bans cannot be read", metadata: ["error": .string(error.message)])
        }
        core.banKeeper.loadAtStart(timeoutMillis: 3_000, logger: report)
        guard polling else { return }
        core.banKeeper.startPolling(onNewBans: { bans in
            for ban in bans {
                for client in core.directory.matching(ban.target) {
                    client.control.run { $0.disconnect(byAdministrator: "banned: \(ban.reason)") }
                }
            }
        }, onError: report)
    }

    private static func milliseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1000 + UInt64(max(0, attoseconds) / 1_000_000_000_000_000)
    }

    /// Watches SIGINT and SIGTERM (and SIGHUP when `reload` is given), calls `ready` once
    /// the watchers are in place (so a signal sent after `ready` is always handled), blocks
    /// until SIGINT or SIGTERM arrives, then shuts down gracefully; a second one cuts the
    /// drain short. SIGHUP calls `reload` for a fresh configuration and applies it
    /// (``reloadConfiguration(_:)``).
    public func runUntilSignalled(ready: () -> Void = {}, reload: (@Sendable () throws -> ServerConfiguration)? = nil) {
        let signalled = DispatchSemaphore(value: 0)
        let installed = DispatchSemaphore(value: 0)
        let loop = group.loops[0]
        final class Watchers { var list: [SignalWatcher] = []; var stopping = false }
        let drainInterrupted = self.drainInterrupted
        // Kept alive by this call, which lasts until the server has stopped.
        let bound = LoopBound(Watchers(), on: loop)
        defer { withExtendedLifetime(bound) {} }
        bound.execute { [self] watchers in
            for signal in [SIGINT, SIGTERM] {
                watchers.list.append(SignalWatcher(loop: loop, signal: signal) { _ in
                    if watchers.stopping {
                        drainInterrupted.signal()
                    } else {
                        watchers.stopping = true
                        signalled.signal()
                    }
                })
            }
            if let reload {
                watchers.list.append(SignalWatcher(loop: loop, signal: SIGHUP) { _ in
                    // Reading the file and re-checking sessions happens off the loop, one
                    // reload at a time.
                    self.reloads.async { _ = self.reloadConfiguration(reload) }
                })
            }
            installed.signal()
        }
        installed.wait()
        ready()
        signalled.wait()
        shutdown()
    }

    // MARK: reloading

    /// Reads a new configuration with `load` (the config file, environment and flags again)
    /// and applies it. A configuration that does not load (a broken file) is refused and
    /// logged, and the running one stays. Returns whether it was applied.
    @discardableResult
    public func reloadConfiguration(_ load: () throws -> ServerConfiguration) -> Bool {
        let fresh: ServerConfiguration
        do {
            fresh = try load()
        } catch {
            core.metrics.configurationReloads.counter(.refused).increment()
            logger.error("configuration reload refused; the running configuration stays",
                         metadata: ["error": .string("\(error)")])
            return false
        }
        applyConfiguration(fresh)
        return true
    }

    /// Puts what a running server can change of `fresh` in force (channels, secrets, auth
    /// rules, limits, log level, tokens; ``ServerConfiguration/reloaded(from:)``) and returns
    /// the settings that need a restart. Existing connections stay up; each one is re-checked
    /// on its loop, and one whose channel or token no longer lets it in is told and closed.
    /// New connections get the new limits.
    @discardableResult
    public func applyConfiguration(_ fresh: ServerConfiguration) -> [String] {
        let old = core.configuration
        let (merged, needsRestart) = old.reloaded(from: fresh)
        core.replaceConfiguration(merged)
        core.files.reconfigure(merged)
        logger.destination.logLevel = merged.logLevel
        core.metrics.configurationReloads.counter(.applied).increment()
        let oldIDs = Set(old.channels.map(\.id)), newIDs = Set(merged.channels.map(\.id))
        let changed = merged.channels.filter { channel in old.settings(ofChannel: channel.id).map { $0 != channel } ?? false }.map(\.id)
        var metadata: LogMetadata = [
            "channels": .int(merged.channels.count),
            "added": .string(newIDs.subtracting(oldIDs).sorted().joined(separator: ",")),
            "removed": .string(oldIDs.subtracting(newIDs).sorted().joined(separator: ",")),
            "changed": .string(changed.sorted().joined(separator: ",")),
            "open_channels": .bool(merged.openChannels),
            "log_level": .string(merged.logLevel.description),
        ]
        if !needsRestart.isEmpty { metadata["needs_restart"] = .string(needsRestart.joined(separator: ",")) }
        logger.info("configuration reloaded", metadata: metadata)
        if !needsRestart.isEmpty {
            logger.warn("some settings changed but only take effect after a restart",
                        metadata: ["settings": .string(needsRestart.joined(separator: ","))])
        }
        for client in core.directory.all { client.control.run { $0.configurationReloaded() } }
        return needsRestart
    }

    /// Adds lines to every `/metrics` answer.
    public func addMetrics(_ provider: @escaping @Sendable (inout PrometheusText) -> Void) {
        core.addMetricsProvider(provider)
    }

    /// A check `/readyz` runs: nil means ready, a text says why not (cluster mode adds Redis).
    public func addReadinessCheck(_ name: String, _ check: @escaping @Sendable () async -> String?) {
        core.readiness.add(name, check)
    }

    /// `/metrics` as it would answer now.
    public func metricsText() -> String { core.metricsText() }
}
