import Foundation
import ParleyCore
import ParleyIO
import ParleyRedis

/// This node's part in a cluster (`--redis` / `--redis-cluster`): its Redis client, its name,
/// and the Redis backends its hub runs over (``RedisBroker``, ``RedisPresenceStore``, and the
/// broker's ``RedisMessageStore`` for history). Nodes share nothing else.
final class ClusterNode: Sendable {
    let nodeID: String
    /// `redis://HOST:PORT` or `redis-cluster://HOST:PORT,...` (no password), for logs.
    let redisDescription: String
    let redis: any RedisCommandExecutor
    let store: RedisMessageStore
    let presence: RedisPresenceStore
    let broker: RedisBroker
    /// The cluster's bans (one list for every node).
    let bans: RedisBanStore
    /// SocketChat's departed users (one roster for every node).
    let socketChatRoster: RedisSocketChatRosterStore
    /// Every node's connections, for the admin API of any node.
    let connections: RedisConnectionRoster
    /// Budgets every node shares (the day's upload bytes per address and in all).
    let budgets: RedisBudgetStore
    /// Devices, mutes and the push queue, one for the cluster.
    let pushStore: RedisPushStore
    /// Users' read marks and conversations, one set for the cluster.
    let reads: RedisReadStateStore
    /// Where every node is reached, for requests handed on between nodes.
    let nodes: RedisNodeDirectory

    /// Connects to the configured Redis (connections come up in the background; a node
    /// starts even while Redis is down, and reports it in `/metrics` and `/readyz`).
    init(configuration: ServerConfiguration, group: EventLoopGroup, idempotencyWindowMillis: Int64) throws {
        nodeID = configuration.nodeID ?? RedisPresenceOptions.randomNodeID()
        let lease = configuration.presenceLeaseMillis
        var redisConfiguration = RedisConfiguration()
        redisConfiguration.scriptsToLoad = RedisBackendScripts.all
        redisConfiguration.clientName = "parley-\(nodeID)"
        // A renewal (a third of the lease) plus a command timeout must stay below the lease,
        // so a node that can reach Redis never loses its lease to a slow reply.
        redisConfiguration.commandTimeoutMillis = max(500, min(5_000, lease / 3))
        redisConfiguration.pingIntervalMillis = max(200, min(2_000, lease / 5))
        let keyspace: RedisKeyspace
        do {
            keyspace = try RedisKeyspace(prefix: configuration.redisKeyPrefix)
            let template = try configuration.redisURL.map { url throws(RedisError) in try RedisEndpoint(url: url) }
            let seedsUseTLS = try [configuration.redisClusterSeeds, configuration.redisSentinels].compactMap { $0 }.contains { seeds throws(RedisError) in
                try RedisEndpoint.seeds(seeds).contains(where: \.usesTLS)
            }
            if template?.usesTLS == true || seedsUseTLS {
                do throws(IOError) {
                    redisConfiguration.tls = RedisTLS(context: try TLSContext(clientTrusting: configuration.redisTLSCAFile,
                                                                              certificateFile: configuration.redisTLSCertFile,
                                                                              privateKeyFile: configuration.redisTLSKeyFile))
                } catch {
                    throw StartupError(description: "TLS to Redis: \(error.message)")
                }
            }
            if let sentinels = configuration.redisSentinels {
                let endpoints = try RedisEndpoint.seeds(sentinels)
                let master = template ?? RedisEndpoint()
                redisDescription = "redis-sentinel://" + endpoints.map(\.address).joined(separator: ",") + "/\(configuration.redisSentinelMaster)"
                    + (master.usesTLS ? " (master over TLS)" : "")
                redis = RedisSentinelClient(sentinels: endpoints, masterName: configuration.redisSentinelMaster, master: master,
                                            group: group, configuration: redisConfiguration)
            } else if let seeds = configuration.redisClusterSeeds {
                let endpoints = try RedisEndpoint.seeds(seeds)
                redisDescription = "redis-cluster://" + endpoints.map(\.address).joined(separator: ",")
                redis = RedisClusterClient(seeds: endpoints, group: group, configuration: redisConfiguration)
            } else if let endpoint = template {
                redisDescription = endpoint.description
                redis = RedisClient(endpoint: endpoint, group: group, configuration: redisConfiguration)
            } else {
                throw StartupError(description: "cluster mode needs \(ServerSetting.flag(of: \ServerConfiguration.redisURL)) or \(ServerSetting.flag(of: \ServerConfiguration.redisClusterSeeds))")
            }
        } catch let error as RedisError {
            throw StartupError(description: error.message)
        }
        var storeOptions = RedisStoreOptions()
        storeOptions.retention = ParleyServer.storeRetention(configuration)
        storeOptions.idempotencyWindowMillis = idempotencyWindowMillis
        storeOptions.replicasToAcknowledge = configuration.redisReplicasAck
        storeOptions.replicasTimeoutMillis = configuration.redisReplicasAckTimeoutMillis
        store = RedisMessageStore(redis: redis, keyspace: keyspace, options: storeOptions)
        bans = RedisBanStore(redis: redis, keyspace: keyspace)
        socketChatRoster = RedisSocketChatRosterStore(redis: redis, keyspace: keyspace)
        connections = RedisConnectionRoster(redis: redis, keyspace: keyspace)
        budgets = RedisBudgetStore(redis: redis, keyspace: keyspace)
        pushStore = RedisPushStore(redis: redis, keyspace: keyspace)
        reads = RedisReadStateStore(redis: redis, keyspace: keyspace, maxRoomsPerUser: configuration.maxConversationsPerUser)
        nodes = RedisNodeDirectory(redis: redis, keyspace: keyspace)
        var presenceOptions = RedisPresenceOptions(nodeID: nodeID)
        presenceOptions.leaseMillis = lease
        presence = RedisPresenceStore(redis: redis, keyspace: keyspace, options: presenceOptions)
        broker = RedisBroker(store: store, presence: presence)
    }

    /// What `parley serve` prints at start.
    var startLine: String {
        "cluster node \(nodeID) on \(redisDescription) (key prefix \(store.keyspace.prefix))"
    }

    /// Ready when every Redis connection (commands and subscriptions) is up and the node's
    /// presence lease is being renewed.
    var readiness: ClusterReadiness {
        let status = broker.status
        if status.state != .ready {
            return ClusterReadiness(ready: false, detail: "redis \(status.state.rawValue)" + (status.message.map { ": \($0)" } ?? ""))
        }
        guard presence.isHealthy else {
            return ClusterReadiness(ready: false, detail: "presence lease not renewed yet")
        }
        return ClusterReadiness(ready: true, detail: "redis ready")
    }

    /// Why Redis is not usable now, for `/readyz`; nil when it is.
    var readinessProblem: String? {
        let readiness = self.readiness
        return readiness.ready ? nil : readiness.detail
    }

    /// `/metrics` lines about Redis and the cluster.
    func writeMetrics(into out: inout PrometheusText) {
        let status = broker.status
        out.family("parley_redis_up", "gauge", help: "1 when every Redis connection of this node is ready, else 0.")
        out.sample("parley_redis_up", status.state == .ready ? 1 : 0)
        out.family("parley_redis_connections", "gauge", help: "Redis connections of this node (commands and subscriptions).")
        out.sample("parley_redis_connections", status.readyConnections, labels: ["state": "ready"])
        out.sample("parley_redis_connections", status.connections - status.readyConnections, labels: ["state": "not_ready"])
        out.family("parley_redis_reconnects_total", "counter", help: "Times a Redis connection came back after being lost.")
        out.sample("parley_redis_reconnects_total", status.reconnects)
        out.family("parley_redis_pending_commands", "gauge", help: "Commands sent to Redis and not answered yet.")
        out.sample("parley_redis_pending_commands", store.pendingCommands + presence.pendingCommands)
        out.family("parley_cluster_local_members", "gauge", help: "Members this node holds in presence.")
        out.sample("parley_cluster_local_members", presence.localMemberCount)
        out.family("parley_cluster_presence_reassertions_total", "counter",
                   help: "Times this node re-announced its members after losing Redis.")
        out.sample("parley_cluster_presence_reassertions_total", presence.reassertions)
        out.family("parley_cluster_node_info", "gauge", help: "This node's name and its Redis.")
        out.sample("parley_cluster_node_info", 1, labels: ["node_id": nodeID, "redis": redisDescription])
    }

    /// Leaves the cluster: this node's remaining members leave everywhere (waiting at most
    /// `timeout`; otherwise their lease expires), then the connections close.
    func shutdown(timeout: Duration) {
        let done = DispatchSemaphore(value: 0)
        presence.close { _ in done.signal() }
        let millis = Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        _ = done.wait(timeout: .now() + .milliseconds(max(0, millis)))
        broker.close()
        store.close()
        redis.close()
    }
}

/// Whether cluster mode's Redis is usable, for `/readyz`.
struct ClusterReadiness: Sendable, Equatable {
    let ready: Bool
    /// What a person reads (`redis ready`, `redis down: …`).
    let detail: String
}
