import Foundation
import Testing
import ParleyIO
@testable import ParleyRedis
import ParleyTestSupport

/// A redis-server that dies (SIGKILL) or stops answering (SIGSTOP) and comes back.
@Suite(.serialized) struct RedisReconnectTests {
    @Test func aKilledRedisRestartedOnTheSamePortIsReconnectedAndResubscribed() async throws {
        let redis = try RedisServer.start(appendOnly: true)
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let clientEvents = Locked<[RedisConnectionEvent]>([])
        let client = RedisClient(endpoint: try RedisEndpoint(url: redis.url), group: group, configuration: fastConfiguration()) { _, event in
            clientEvents.withLock { $0.append(event) }
        }
        defer { client.close() }
        let log = SubscriberLog()
        let subscriber = client.makeSubscriber(on: group.loops[0], handler: log.handler)
        defer { subscriber.close() }
        let plain = RedisChannel.plain("{room}:live"), sharded = RedisChannel.sharded("{room}:slive")
        try await subscribe(subscriber, plain)
        try await subscribe(subscriber, sharded)
        try await client.call("SET", "kept", "yes")
        try await client.call("PUBLISH", .string(plain.name), "before")
        try await eventually("the first message", timeout: 10) { log.messages(on: plain) == ["before"] }

        redis.kill()
        // Down: reported, and a command fails with a clear error well within its timeout.
        try await eventually("the client to notice", timeout: 10) { client.status.state == .down }
        try await eventually("the subscriber to notice", timeout: 10) { subscriber.status.state == .down }
        let start = ContinuousClock.now
        let whileDown = try await client.result(RedisCommand("GET", "kept"))
        guard case .failure(let error) = whileDown else { Issue.record("GET succeeded while Redis was down"); return }
        #expect(error.code == .connection)
        #expect(error.message.contains("127.0.0.1:\(redis.port)"))
        #expect(ContinuousClock.now - start < .milliseconds(fastConfiguration().commandTimeoutMillis))

        try redis.restart()
        // Back by itself: the client, and the subscriber with both channels re-subscribed.
        try await eventually("the client to reconnect", timeout: 10) { client.status.state == .ready && client.status.reconnects >= 1 }
        try await eventually("the re-subscription event", timeout: 10) { Set(log.resubscribed).isSuperset(of: [plain, sharded]) }
        #expect(clientEvents.value.contains(.ready(reconnected: true)))
        #expect(log.connectionEvents.contains(.ready(reconnected: true)))
        #expect(subscriber.status.state == .ready)
        #expect(try await client.call("GET", "kept") == .bulkString(Array("yes".utf8)))  // AOF, fsync always
        try await client.call("PUBLISH", .string(plain.name), "after")
        try await client.call("SPUBLISH", .string(sharded.name), "sharded after")
        try await eventually("messages after the restart", timeout: 10) {
            log.messages(on: plain) == ["before", "after"] && log.messages(on: sharded) == ["sharded after"]
        }
    }

    @Test func aPausedRedisIsReportedDownAndRecoveredAfterwards() async throws {
        let redis = try RedisServer.start()
        defer { redis.resume(); redis.stop() }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        var configuration = fastConfiguration()
        configuration.commandTimeoutMillis = 300
        configuration.pingIntervalMillis = 100
        let client = RedisClient(endpoint: try RedisEndpoint(url: redis.url), group: group, configuration: configuration)
        defer { client.close() }
        let log = SubscriberLog()
        let subscriber = client.makeSubscriber(on: group.loops[0], handler: log.handler)
        defer { subscriber.close() }
        try await subscribe(subscriber, .plain("paused"))

        redis.pause()
        let start = ContinuousClock.now
        let result = try await client.result(RedisCommand("PING"))
        #expect((try? result.get()) == nil)
        #expect(ContinuousClock.now - start < .seconds(2))
        // Idle connections find out through their pings: both report down.
        try await eventually("both to be down", timeout: 10) { client.status.state == .down && subscriber.status.state == .down }
        #expect(client.status.message?.contains("127.0.0.1:\(redis.port)") == true)

        redis.resume()
        try await eventually("both to be back", timeout: 10) { client.status.state == .ready && subscriber.status.state == .ready }
        try await eventually("the re-subscription event", timeout: 10) { log.resubscribed.contains(.plain("paused")) }
        try await client.call("PUBLISH", "paused", "resumed")
        try await eventually("the message", timeout: 10) { log.messages(on: .plain("paused")).contains("resumed") }
    }
}
