import Foundation
import Synchronization
import ParleyCore
import ParleyIO
import ParleyRedis
import ParleyTestSupport

/// Where the contract tests find Redis: one server, or a three-master Redis Cluster, shared
/// by the whole test process (each backend gets a key prefix of its own), with one loop
/// group and one client each.
enum RedisDeploymentKind: String, Sendable {
    case single, cluster
}

final class RedisDeployment: Sendable {
    let group: EventLoopGroup
    let client: any RedisCommandExecutor

    private static let shared = Mutex<[RedisDeploymentKind: RedisDeployment]>([:])
    private static let prefixes = Atomic<Int>(0)

    init(group: EventLoopGroup, client: any RedisCommandExecutor) {
        self.group = group
        self.client = client
    }

    /// The shared deployment of `kind`, started on first use.
    static func shared(_ kind: RedisDeploymentKind) throws -> RedisDeployment {
        try shared.withLock { shared in
            if let existing = shared[kind] { return existing }
            let group = EventLoopGroup(loopCount: 2)
            let client: any RedisCommandExecutor
            switch kind {
            case .single:
                let server = try SharedRedisServers.single()
                client = RedisClient(endpoint: try RedisEndpoint(url: server.url), group: group, configuration: testRedisConfiguration())
            case .cluster:
                let cluster = try SharedRedisServers.cluster()
                let clusterClient = RedisClusterClient(seeds: try RedisEndpoint.seeds(cluster.seedList), group: group,
                                                       configuration: testRedisConfiguration())
                try eventuallyBlocking("the cluster's slot map", timeout: 20) { clusterClient.masters.count == 3 }
                client = clusterClient
            }
            let deployment = RedisDeployment(group: group, client: client)
            shared[kind] = deployment
            return deployment
        }
    }

    /// A key prefix no other backend of this process uses.
    static func freshKeyspace() -> RedisKeyspace {
        let n = prefixes.add(1, ordering: .relaxed).newValue
        return try! RedisKeyspace(prefix: "t\(ProcessInfo.processInfo.processIdentifier)-\(n)")
    }
}

/// Timeouts that suit two shared cores, quick reconnects, and the backends' scripts loaded on
/// every connection.
func testRedisConfiguration() -> RedisConfiguration {
    var configuration = RedisConfiguration()
    configuration.commandTimeoutMillis = 5_000
    configuration.connectTimeoutMillis = 2_000
    configuration.reconnectInitialDelayMillis = 20
    configuration.reconnectMaxDelayMillis = 200
    configuration.scriptsToLoad = RedisBackendScripts.all
    return configuration
}

/// A Redis client whose scripts fail (as if Redis were unreachable) while `failing` is set:
/// the contract's stand-in for a failed write.
final class FailingRedis: RedisCommandExecutor {
    let inner: any RedisCommandExecutor
    let failing = Mutex(false)
    init(inner: any RedisCommandExecutor) { self.inner = inner }

    var group: EventLoopGroup { inner.group }
    var status: RedisStatus { inner.status }

    func send(_ command: RedisCommand, completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) {
        if failing.withLock({ $0 }) && command.name.hasPrefix("EVAL") {
            return completion(.failure(RedisError(.connection, "injected: Redis at 127.0.0.1 is unavailable")))
        }
        inner.send(command, completion: completion)
    }
    func send(batch commands: [RedisCommand], completion: @escaping @Sendable ([Result<RedisValue, RedisError>]) -> Void) {
        inner.send(batch: commands, completion: completion)
    }
    func broadcast(_ command: RedisCommand, completion: @escaping @Sendable (Result<[RedisValue], RedisError>) -> Void) {
        inner.broadcast(command, completion: completion)
    }
    func makeSubscriber(on loop: EventLoop, handler: @escaping @Sendable (RedisSubscriberEvent) -> Void) -> RedisSubscriber {
        inner.makeSubscriber(on: loop, handler: handler)
    }
    func close() {}
}
