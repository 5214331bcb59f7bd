import Foundation
import Testing
import ParleyIO
@testable import ParleyRedis
import ParleyTestSupport

/// Redis Sentinel against real processes: a master, a replica and three Sentinels.
@Suite(.serialized) struct RedisSentinelTests {
    @Test func repliesOfSentinelAreParsed() {
        #expect(RedisSentinelClient.masterAddress(.array([.bulkString(Array("127.0.0.1".utf8)), .bulkString(Array("6380".utf8))]))! == ("127.0.0.1", 6380))
        #expect(RedisSentinelClient.masterAddress(.null) == nil)
        #expect(RedisSentinelClient.masterAddress(.array([.bulkString(Array("h".utf8)), .bulkString(Array("0".utf8))])) == nil)
        #expect(RedisSentinelClient.switchedMaster(Array("m 127.0.0.1 1 127.0.0.1 2".utf8), name: "m"))
        #expect(!RedisSentinelClient.switchedMaster(Array("other 127.0.0.1 1 127.0.0.1 2".utf8), name: "m"))
        #expect(!RedisSentinelClient.switchedMaster(Array("m".utf8), name: "m"))
        #expect(RedisSentinelClient.saysMaster(.array([.bulkString(Array("master".utf8)), .integer(0), .array([])])))
        #expect(!RedisSentinelClient.saysMaster(.array([.bulkString(Array("slave".utf8))])))
    }

    @Test func noSentinelAnswersFailsClearly() async throws {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let dead = RedisEndpoint(host: "127.0.0.1", port: try RedisServer.freePort())
        var configuration = fastConfiguration()
        configuration.commandTimeoutMillis = 500
        let client = RedisSentinelClient(sentinels: [dead], masterName: "nobody", group: group, configuration: configuration, checkIntervalMillis: 100)
        defer { client.close() }
        let result = try await client.result(RedisCommand("PING"), timeout: 10)
        guard case .failure(let error) = result else { Issue.record("PING without a master: \(result)"); return }
        #expect(error.code == .connection)
        #expect(error.message.contains("Sentinel"), "\(error)")
        try await eventually("status says why", timeout: 5) { client.status.state == .down }
        #expect(client.status.message?.contains(dead.address) == true, "\(client.status)")
    }

    /// Commands and subscriptions follow a failover after the master is SIGKILLed.
    @Test func followsAFailoverForCommandsAndSubscriptions() async throws {
        let deployment = try RedisSentinelDeployment.start()
        defer { deployment.stop() }
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let sentinels = try RedisEndpoint.seeds(deployment.sentinelList)
        let client = RedisSentinelClient(sentinels: sentinels, masterName: deployment.masterName, group: group,
                                         configuration: fastConfiguration(), checkIntervalMillis: 200)
        defer { client.close() }
        #expect(try await client.call("SET", "k", "before").string == "OK")
        #expect(client.master?.port == deployment.master.port)
        let log = SubscriberLog()
        let subscriber = client.makeSubscriber(on: group.loops[1], handler: log.handler)
        defer { subscriber.close() }
        let channel = RedisChannel.plain("room")
        try await subscribe(subscriber, channel)
        #expect(try await client.call("PUBLISH", "room", "one").int == 1)
        try await eventually("the first message", timeout: 5) { log.messages(on: channel) == ["one"] }
        try await eventually("the replica has the key", timeout: 5) { (try deployment.replica.cli("GET", "k")) == "before" }

        let killed = ContinuousClock.now
        deployment.master.kill()
        try await eventually("a SET works on the promoted replica", timeout: 20, pollMillis: 100) {
            guard case .success = try await client.result(RedisCommand("SET", "k", "after"), timeout: 5) else { return false }
            return true
        }
        let took = ContinuousClock.now - killed
        #expect(client.master?.port == deployment.replica.port)
        #expect(client.failovers == 1)
        // The Sentinel asked here may learn of the switch a moment after the one that led it.
        try await eventually("every Sentinel names the promoted replica", timeout: 10, pollMillis: 100) {
            try deployment.masterPort() == deployment.replica.port
        }
        #expect(try await client.call("GET", "k").string == "after")
        #expect(try deployment.replica.cli("ROLE").hasPrefix("master"))
        #expect(took < .seconds(Double(deployment.downAfterMillis) / 1000 + 10), "took \(took)")

        // The subscription moved too, and said so.
        try await eventually("the channel is resubscribed on the new master", timeout: 10) { log.resubscribed.contains(channel) }
        try await eventually("a message through the new master", timeout: 10, pollMillis: 50) {
            _ = try await client.call("PUBLISH", "room", "two")
            return log.messages(on: channel).contains("two")
        }
        try await eventually("ready", timeout: 5) { client.status.state == .ready && subscriber.status.state == .ready }
    }

    /// A node that answers `READONLY` (a master demoted under the client) sends the client
    /// back to Sentinel.
    @Test func readonlyAsksSentinelAgain() async throws {
        let deployment = try RedisSentinelDeployment.start()
        defer { deployment.stop() }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let client = RedisSentinelClient(sentinels: try RedisEndpoint.seeds(deployment.sentinelList), masterName: deployment.masterName,
                                         group: group, configuration: fastConfiguration(), checkIntervalMillis: 200)
        defer { client.close() }
        #expect(try await client.call("SET", "k", "v").string == "OK")
        // A planned failover: the old master becomes a replica while the client is connected.
        try deployment.sentinels[0].cli("SENTINEL", "failover", deployment.masterName)
        try await eventually("writes go to the new master", timeout: 20, pollMillis: 100) {
            guard case .success = try await client.result(RedisCommand("SET", "k", "w"), timeout: 5) else { return false }
            return client.master?.port == deployment.replica.port
        }
        #expect(try deployment.replica.cli("GET", "k") == "w")
    }
}
