import Testing
import ParleyCore
@testable import ParleyServer

/// Cluster mode's settings: the config file's `redis` block, flags and variables.
@Suite struct ClusterConfigTests {
    func load(_ text: String) throws(ServerConfiguration.UsageError) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        try ConfigFile.apply(Array(text.utf8), name: "parley.json", to: &configuration)
        return configuration
    }

    func message(_ text: String) -> String? {
        do { _ = try load(text); return nil } catch { return error.description }
    }

    @Test func theRedisBlock() throws {
        let single = try load(#"{"redis": {"url": "redis://:pw@10.0.0.5:6380/2", "nodeId": "n-1", "presenceLease": 4.5, "prefix": "prod:chat"}}"#)
        #expect(single.redisURL == "redis://:pw@10.0.0.5:6380/2")
        #expect(single.nodeID == "n-1" && single.presenceLeaseMillis == 4_500 && single.redisKeyPrefix == "prod:chat")
        #expect(single.isClusterMode)
        let cluster = try load(#"{"redis": {"cluster": ["10.0.0.1:7000", "10.0.0.2:7000"]}}"#)
        #expect(cluster.redisClusterSeeds == "10.0.0.1:7000,10.0.0.2:7000")
        #expect(try load(#"{"redis": {"cluster": "a:1,b:2"}}"#).redisClusterSeeds == "a:1,b:2")
        #expect(try !load("{}").isClusterMode)

        #expect(message(#"{"redis": {"url": "redis://a", "cluster": "b:1"}}"#)?.contains("cannot be used together") == true)
        #expect(message(#"{"redis": {"url": "http://a"}}"#)?.contains("redis.url") == true)
        #expect(message(#"{"redis": {"nodeId": "no spaces"}}"#)?.contains("redis.nodeId") == true)
        #expect(message(#"{"redis": {"presenceLease": 0.5}}"#)?.contains("redis.presenceLease") == true)
        #expect(message(#"{"redis": {"prefix": "{x}"}}"#)?.contains("redis.prefix") == true)
        #expect(message(#"{"redis": {"host": "a"}}"#)?.contains("unknown key redis.host") == true)
    }

    @Test func flagsAndVariables() throws {
        let c = try ServerConfiguration.parse(arguments: ["--redis", "redis://127.0.0.1:6379", "--presence-lease", "15"],
                                              environment: ["PARLEY_NODE_ID": "east-1", "PARLEY_REDIS_PREFIX": "p2"])
        #expect(c?.redisURL == "redis://127.0.0.1:6379" && c?.presenceLeaseMillis == 15_000)
        #expect(c?.nodeID == "east-1" && c?.redisKeyPrefix == "p2")
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(arguments: ["--presence-lease", "1"], environment: [:]) }
        #expect(throws: ServerConfiguration.UsageError.self) {
            try ServerConfiguration.parse(arguments: [], environment: ["PARLEY_REDIS": "redis://a", "PARLEY_REDIS_CLUSTER": "b:1"])
        }
        #expect(ServerConfiguration.usage.contains("--redis-cluster"))
    }

    @Test func sentinelTLSAndReplicaSettings() throws {
        let c = try load(#"{"cluster": {"redis_url": "rediss://chat:pw@ignored:1/3", "redis_sentinel": ["10.0.0.1:26379", "10.0.0.2:26379"], "redis_sentinel_master": "chat", "redis_tls_ca": "/etc/ca.pem", "redis_replicas_ack": 1, "redis_replicas_ack_timeout_seconds": 0.25}}"#)
        #expect(c.redisSentinels == "10.0.0.1:26379,10.0.0.2:26379" && c.redisSentinelMaster == "chat" && c.isClusterMode)
        #expect(c.redisTLSCAFile == "/etc/ca.pem" && c.redisReplicasAck == 1 && c.redisReplicasAckTimeoutMillis == 250)
        #expect(c.clusterProblem == nil, "--redis gives the master's credentials next to --redis-sentinel")
        let flags = try ServerConfiguration.parse(arguments: ["--redis-sentinel", "127.0.0.1:26379", "--redis-replicas-ack", "2"], environment: [:])
        #expect(flags?.redisSentinels == "127.0.0.1:26379" && flags?.redisSentinelMaster == "mymaster" && flags?.redisReplicasAck == 2)
        #expect(message(#"{"cluster": {"redis_sentinel": "a:1", "redis_cluster": "b:1"}}"#)?.contains("cannot be used together") == true)
        #expect(throws: ServerConfiguration.UsageError.self) {
            try ServerConfiguration.parse(arguments: ["--redis-sentinel", "a:1", "--redis-cluster", "b:1"], environment: [:])
        }
        #expect(message(#"{"cluster": {"redis_replicas_ack": 17}}"#) != nil)
        #expect(message(#"{"cluster": {"redis_sentinel_master": "two words"}}"#) != nil)
        #expect(message(#"{"cluster": {"redis_sentinel": "a:0"}}"#) != nil)
    }
}
