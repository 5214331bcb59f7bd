import Foundation
import Testing
import ParleyIO
@testable import ParleyRedis
import ParleyTestSupport

/// Pub/sub against a real redis-server, under RESP3 (push messages) and RESP2 (arrays).
@Suite(.serialized) struct RedisSubscriberTests {
    static let protocols: [RedisProtocolPreference] = [.resp3IfAvailable, .resp2]

    @Test(arguments: protocols) func plainAndShardedMessagesArrive(preference: RedisProtocolPreference) async throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        var configuration = fastConfiguration()
        configuration.protocolPreference = preference
        let client = RedisClient(endpoint: try RedisEndpoint(url: redis.url), group: group, configuration: configuration)
        defer { client.close() }
        let log = SubscriberLog()
        let subscriber = client.makeSubscriber(on: group.loops[1], handler: log.handler)
        defer { subscriber.close() }

        let plain = RedisChannel.plain("{parley/lobby}:messages")
        let sharded = RedisChannel.sharded("{parley/lobby}:smessages")
        try await subscribe(subscriber, plain)
        try await subscribe(subscriber, sharded)
        #expect(try await client.call("PUBLISH", .string(plain.name), "hello").int == 1)
        #expect(try await client.call("SPUBLISH", .string(sharded.name), .bytes([0, 1, 2, 255])).int == 1)
        try await client.call("PUBLISH", "{other}", "not for us")
        try await eventually("two messages", timeout: 10) { log.messages.count == 2 }
        #expect(log.messages(on: plain) == ["hello"])
        #expect(log.messages.first { $0.channel == sharded }?.payload == [0, 1, 2, 255])

        // Many messages keep their order (published from one loop, so on one connection:
        // two connections' commands have no order between them).
        group.loops[0].execute {
            for index in 0..<500 { client.send(RedisCommand("PUBLISH", .string(plain.name), .string("\(index)"))) { _ in } }
        }
        try await eventually("500 more messages", timeout: 10) { log.messages(on: plain).count == 501 }
        #expect(Array(log.messages(on: plain).dropFirst()) == (0..<500).map { "\($0)" })
        #expect(log.resubscribed.isEmpty)
        #expect(subscriber.status.state == .ready)
    }

    @Test(arguments: protocols) func subscriptionsAreCountedByUse(preference: RedisProtocolPreference) async throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        var configuration = fastConfiguration()
        configuration.protocolPreference = preference
        let client = RedisClient(endpoint: try RedisEndpoint(url: redis.url), group: group, configuration: configuration)
        defer { client.close() }
        let log = SubscriberLog()
        let subscriber = client.makeSubscriber(on: group.loops[0], handler: log.handler)
        defer { subscriber.close() }

        for channel in [RedisChannel.plain("room"), .sharded("sroom")] {
            let (numsub, publish) = channel.isSharded ? ("SHARDNUMSUB", "SPUBLISH") : ("NUMSUB", "PUBLISH")
            func subscribers() async throws -> Int64? {
                try await client.call("PUBSUB", .string(numsub), .string(channel.name)).array?.last?.int
            }
            try await subscribe(subscriber, channel)   // use 1
            try await subscribe(subscriber, channel)   // use 2: already confirmed
            #expect(try await subscribers() == 1)
            subscriber.unsubscribe(channel)            // use 1 left: still subscribed
            try await client.call(publish, .string(channel.name), "still here")
            try await eventually("the message", timeout: 10) { log.messages(on: channel) == ["still here"] }
            #expect(try await subscribers() == 1)
            subscriber.unsubscribe(channel)            // none left
            try await eventually("Redis to drop the subscription", timeout: 10) { try await subscribers() == 0 }
            subscriber.unsubscribe(channel)            // more releases than uses are ignored
            try await client.call(publish, .string(channel.name), "gone")
            // A later subscription still works and the released one's message never arrived.
            try await subscribe(subscriber, channel)
            try await client.call(publish, .string(channel.name), "again")
            try await eventually("the message after re-subscribing", timeout: 10) { log.messages(on: channel).count == 2 }
            #expect(log.messages(on: channel) == ["still here", "again"])
            subscriber.unsubscribe(channel)
        }
    }

    @Test func idleSubscribersPingAndStayReady() async throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        for preference in RedisSubscriberTests.protocols {
            var configuration = fastConfiguration()
            configuration.protocolPreference = preference
            configuration.pingIntervalMillis = 30
            let client = RedisClient(endpoint: try RedisEndpoint(url: redis.url), group: group, configuration: configuration)
            let log = SubscriberLog()
            let subscriber = client.makeSubscriber(on: group.loops[0], handler: log.handler)
            try await subscribe(subscriber, .plain("quiet"))
            // RESP2 in subscribe mode answers PING with ["pong", ""]: it must count as the reply.
            try await eventually("the subscriber to ping", timeout: 10) {
                try redis.cli("CLIENT", "LIST").split(whereSeparator: \.isNewline).contains { $0.contains("sub=1") && $0.contains("cmd=ping") }
            }
            try await client.call("PUBLISH", "quiet", "after pings")
            try await eventually("the message", timeout: 10) { log.messages(on: .plain("quiet")) == ["after pings"] }
            #expect(subscriber.status.state == .ready)
            #expect(subscriber.status.reconnects == 0)
            subscriber.close()
            client.close()
        }
    }

    @Test func closingFailsWaitingSubscriptions() async throws {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let port = try RedisServer.freePort()
        let client = RedisClient(endpoint: RedisEndpoint(port: port), group: group, configuration: fastConfiguration())
        defer { client.close() }
        let subscriber = client.makeSubscriber(on: group.loops[0]) { _ in }
        let result: Result<Void, RedisError> = try await awaitCallback { done in
            subscriber.subscribe(.plain("never"), completion: done)
            subscriber.close()
        }
        guard case .failure(let error) = result else { Issue.record("subscribed without a server"); return }
        #expect(error.code == .closed)
    }
}
