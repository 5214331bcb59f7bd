import Foundation
import Testing
import ParleyIO
@testable import ParleyRedis
import ParleyTestSupport

/// A local Redis Cluster of three masters.
@Suite(.serialized) struct RedisClusterTests {
    /// A started cluster and a client that has loaded its slot map.
    struct Fixture {
        let cluster: RedisClusterServers
        let group: EventLoopGroup
        let client: RedisClusterClient

        static func start(loops: Int = 2) async throws -> Fixture {
            let cluster = try RedisClusterServers.start(masters: 3)
            let group = EventLoopGroup(loopCount: loops)
            // Generous timeouts: three servers and the tests share two cores with everything else.
            var configuration = fastConfiguration()
            configuration.commandTimeoutMillis = 10_000
            configuration.connectTimeoutMillis = 5_000
            let client = RedisClusterClient(seeds: try RedisEndpoint.seeds(cluster.seedList), group: group, configuration: configuration)
            let fixture = Fixture(cluster: cluster, group: group, client: client)
            do {
                try await eventually("the slot map", timeout: 10) { client.masters.count == 3 }
            } catch {
                fixture.stop()
                throw error
            }
            return fixture
        }

        func stop() {
            client.close()
            group.shutdown()
            cluster.stop()
        }

        /// A hash tag whose slot is served by each master, in `masters` order.
        func tagsOnEveryMaster(prefix: String) -> [String] {
            var found: [String: String] = [:]
            var index = 0
            while found.count < 3 {
                let tag = "\(prefix)-\(index)"
                if let master = client.master(forSlot: RedisKeySlot.slot(for: tag)), found[master.address] == nil {
                    found[master.address] = tag
                }
                index += 1
            }
            return client.masters.map { found[$0.address]! }
        }
    }

    @Test func keysSpreadOverEveryMaster() async throws {
        let fixture = try await Fixture.start()
        defer { fixture.stop() }
        let client = fixture.client
        #expect(client.status.state == .ready || client.status.state == .connecting)
        let results = Locked<[Result<RedisValue, RedisError>]>([])
        for index in 0..<300 {
            client.send(RedisCommand("SET", .string("{room-\(index)}:offset"), .integer(Int64(index)))) { result in
                results.withLock { $0.append(result) }
            }
        }
        try await eventually("300 SETs", timeout: 10) { results.value.count == 300 }
        let failures = results.value.compactMap { result -> RedisError? in
            if case .failure(let error) = result { return error } else { return nil }
        }
        #expect(failures.isEmpty, "\(failures.prefix(3))")
        for node in fixture.cluster.nodes {
            let keys = Int(try node.cli("DBSIZE")) ?? 0
            #expect(keys > 30, "node \(node.port) holds \(keys) keys")
        }
        for index in stride(from: 0, to: 300, by: 37) {
            #expect(try await client.call("GET", .string("{room-\(index)}:offset")).int == Int64(index))
        }
        // Parley's slot function is Redis's.
        for key in ["{room-7}:offset", "plain", "{}", "a{b}c"] {
            #expect(try await client.call("CLUSTER", "KEYSLOT", .string(key)).int == Int64(RedisKeySlot.slot(for: key)))
        }
        // Keyless commands go to any master; broadcast reaches them all.
        #expect(try await client.call("PING") == .simpleString("PONG"))
        #expect(try await client.broadcast(RedisCommand("DBSIZE")).compactMap(\.int).reduce(0, +) == 300)
        try await eventually("every connection ready", timeout: 10) { client.status.state == .ready }
        #expect(client.status.connections == 6)  // 3 masters x 2 loops
        let reloaded: Result<Void, RedisError> = try await awaitCallback { done in client.refreshSlotMap(completion: done) }
        #expect((try? reloaded.get()) != nil)
    }

    @Test func aDeadMasterFailsOnlyItsOwnSlotsUntilItComesBack() async throws {
        let fixture = try await Fixture.start()
        defer { fixture.stop() }
        let client = fixture.client
        let tags = fixture.tagsOnEveryMaster(prefix: "k")
        for tag in tags { try await client.call("SET", .string("{\(tag)}"), .string(tag)) }
        let dead = try #require(fixture.cluster.nodes.first { $0.port == client.masters[0].port })

        dead.kill()
        try await eventually("the client to report the dead master", timeout: 10) { client.status.state == .down }
        let start = ContinuousClock.now
        let lost = try await client.result(RedisCommand("GET", .string("{\(tags[0])}")))
        guard case .failure(let error) = lost else { Issue.record("a dead master answered: \(lost)"); return }
        #expect(error.code == .connection)
        #expect(error.message.contains("127.0.0.1:\(dead.port)"))
        #expect(ContinuousClock.now - start < .seconds(2))
        // The other shards carry on.
        #expect(try await client.call("GET", .string("{\(tags[1])}")).string == tags[1])
        #expect(try await client.call("GET", .string("{\(tags[2])}")).string == tags[2])

        try dead.restart()  // same port and nodes.conf: it rejoins with its slots
        try fixture.cluster.waitUntilStable()
        try await eventually("the client to be back", timeout: 10) { client.status.state == .ready }
        try await client.call("SET", .string("{\(tags[0])}"), "again")
        #expect(try await client.call("GET", .string("{\(tags[0])}")).string == "again")
    }

    @Test func movedSlotsAreFollowedWithAStaleMap() async throws {
        let fixture = try await Fixture.start()
        defer { fixture.stop() }
        let client = fixture.client
        let key = "{moving}:offset"
        let slot = RedisKeySlot.slot(for: key)
        try await client.call("SET", .string(key), "41")
        let source = try #require(client.master(forSlot: slot))
        let target = try #require(fixture.cluster.nodes.first { $0.port != source.port })

        try fixture.cluster.moveSlot(slot, to: target)
        // The client still routes the slot to its old master: MOVED, then the new one.
        #expect(client.master(forSlot: slot)?.port == source.port)
        #expect(try await client.call("INCR", .string(key)).int == 42)
        #expect(client.master(forSlot: slot)?.port == target.port)
        #expect(try target.cli("GET", key) == "42")
        // Scripts are routed by their first key too.
        let script = RedisScript("return redis.call('INCR', KEYS[1])")
        #expect(try await client.evaluate(script, keys: [.string(key)]) == .integer(43))
        // A transaction on the slot, after it moves back.
        let back = try #require(fixture.cluster.nodes.first { $0.port == source.port })
        try fixture.cluster.moveSlot(slot, to: back)
        let results = await client.send(batch: [RedisCommand("MULTI"), RedisCommand("INCR", .string(key)), RedisCommand("EXEC")])
        #expect((try? results.last?.get())?.array == [.integer(44)])
    }

    @Test func askRedirectionsDuringAMigration() async throws {
        let fixture = try await Fixture.start()
        defer { fixture.stop() }
        let client = fixture.client
        let old = "{migrating}:old", new = "{migrating}:new"
        let slot = RedisKeySlot.slot(for: old)
        try await client.call("SET", .string(old), "moved-already")
        let source = try #require(client.master(forSlot: slot))
        let target = try #require(fixture.cluster.nodes.first { $0.port != source.port })

        // MIGRATING/IMPORTING with the existing key moved: the slot is half-way.
        try fixture.cluster.moveSlot(slot, to: target, finish: false)
        // The key is on the target now: the source answers ASK.
        #expect(try await client.call("GET", .string(old)) == .bulkString(Array("moved-already".utf8)))
        // A new key in a migrating slot is created on the target (ASK + ASKING).
        try await client.call("SET", .string(new), "created-during-migration")
        #expect(try target.cli("-c", "GET", new) == "created-during-migration")
        // ASK does not change the map: the slot still belongs to the source until the move ends.
        #expect(client.master(forSlot: slot)?.port == source.port)

        try fixture.cluster.finishSlotMove(slot, to: target)
        #expect(try await client.call("GET", .string(new)) == .bulkString(Array("created-during-migration".utf8)))
        #expect(client.master(forSlot: slot)?.port == target.port)
    }

    @Test func shardedPubSubAcrossShards() async throws {
        let fixture = try await Fixture.start()
        defer { fixture.stop() }
        let client = fixture.client
        let log = SubscriberLog()
        let subscriber = client.makeSubscriber(on: fixture.group.loops[1], handler: log.handler)
        defer { subscriber.close() }
        let tags = fixture.tagsOnEveryMaster(prefix: "room")
        let channels = tags.map { RedisChannel.sharded("{\($0)}:channel") }
        for channel in channels { try await subscribe(subscriber, channel) }
        // Each channel is subscribed on the master of its slot, and only there.
        for (channel, master) in zip(channels, client.masters) {
            for node in fixture.cluster.nodes {
                let count = try node.cli("PUBSUB", "SHARDNUMSUB", channel.name).split(whereSeparator: \.isNewline).last.map(String.init)
                #expect(count == (node.port == master.port ? "1" : "0"), "\(channel) on \(node.port)")
            }
        }
        for channel in channels {
            #expect(try await client.call("SPUBLISH", .string(channel.name), .string("hello \(channel.name)")).int == 1)
        }
        try await eventually("three messages", timeout: 10) { log.messages.count == 3 }
        for channel in channels { #expect(log.messages(on: channel) == ["hello \(channel.name)"]) }
        // Plain pub/sub in a cluster reaches a subscriber on any node.
        try await subscribe(subscriber, .plain("everyone"))
        try await client.call("PUBLISH", "everyone", "hi all")
        try await eventually("the plain message", timeout: 10) { log.messages(on: .plain("everyone")) == ["hi all"] }
        #expect(subscriber.status.connections == 3)

        // The atomic publish script works on a cluster (all keys and the channel on one tag).
        let room = tags[1]
        try await subscribe(subscriber, .sharded("{\(room)}:channel"))
        let reply = try await client.evaluate(RedisScriptTests.publish, keys: RedisScriptTests().publishKeys(room, "m1"),
                                              arguments: ["scripted", 100, 60_000])
        #expect(reply == .array([.integer(1), .integer(1)]))
        try await eventually("the scripted message", timeout: 10) { log.messages(on: .sharded("{\(room)}:channel")).contains("1:scripted") }
    }

    @Test func aShardedSubscriptionFollowsItsSlot() async throws {
        let fixture = try await Fixture.start()
        defer { fixture.stop() }
        let client = fixture.client
        let log = SubscriberLog()
        let subscriber = client.makeSubscriber(on: fixture.group.loops[0], handler: log.handler)
        defer { subscriber.close() }
        let channel = RedisChannel.sharded("{wandering}:channel")
        let slot = RedisKeySlot.slot(for: channel.name)
        try await subscribe(subscriber, channel)
        try await client.call("SPUBLISH", .string(channel.name), "before")
        try await eventually("the first message", timeout: 10) { log.messages(on: channel) == ["before"] }

        let source = try #require(client.master(forSlot: slot))
        let target = try #require(fixture.cluster.nodes.first { $0.port != source.port })
        try fixture.cluster.moveSlot(slot, to: target)
        // Redis drops the subscription on the old master; the subscriber follows the slot and
        // says it re-subscribed (messages in between may be lost).
        try await eventually("the re-subscription", timeout: 10) { log.resubscribed.contains(channel) }
        try await eventually("the subscription on the new master", timeout: 10) {
            try target.cli("PUBSUB", "SHARDNUMSUB", channel.name).hasSuffix("1")
        }
        try await client.call("SPUBLISH", .string(channel.name), "after")
        try await eventually("the message after the move", timeout: 10) { log.messages(on: channel) == ["before", "after"] }
    }
}
