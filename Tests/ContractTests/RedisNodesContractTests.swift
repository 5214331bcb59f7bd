import Foundation
import Synchronization
import Testing
import ParleyCore
import ParleyIO
import ParleyRedis
import ParleyTestSupport

/// What only a cluster has: several nodes over one Redis (or Redis Cluster), each with a
/// broker and a presence store of its own, and Redis itself failing under them.
@Suite(.serialized) struct RedisBrokerNodesTests {
    static let kinds: [BrokerKind] = [.redis, .redisCluster]

    @Test(arguments: kinds)
    func twoNodesSeeOneIdenticalOrder(kind: BrokerKind) async throws {
        let keyspace = RedisDeployment.freshKeyspace()
        let a = try kind.makeNode(keyspace: keyspace), b = try kind.makeNode(keyspace: keyspace)
        // Rooms spread over the shards of a cluster.
        let rooms = (0..<6).map { RoomKey(channel: "demo", room: "order-\($0)") }
        for room in rooms {
            #expect(try await a.broker.subscribe(room) == RoomPosition(stored: 0, published: 0))
            _ = try await b.broker.subscribe(room)
        }
        let alice = Member(id: "a", clientData: ["name": "alice"])
        await withTaskGroup(of: Void.self) { group in
            for (index, node) in [a, b, a, b].enumerated() {
                group.addTask {
                    for n in 0..<50 {
                        for room in rooms {
                            _ = try? await node.broker.publish(draft("p\(index)-\(n)", in: room, sender: alice))
                            if n % 10 == 0 {
                                let typing = Message(id: "t\(index)-\(n)", offset: 0, timestampMillis: 0, room: room, sender: alice,
                                                     body: ["typing": .bool(n % 20 == 0)])
                                node.broker.broadcast(.message(typing), in: room)
                            }
                        }
                    }
                }
            }
        }
        for room in rooms {
            #expect(await a.deliveries.wait(in: room, timeout: 20) { $0.count == 220 })
            #expect(await b.deliveries.wait(in: room, timeout: 20) { $0.count == 220 })
            #expect(a.deliveries.offsets(in: room) == Array(1...200))
            #expect(a.deliveries.events(in: room) == b.deliveries.events(in: room), "both nodes see \(room) in one order")
        }
    }

    @Test(arguments: kinds)
    func aSubscriptionTakenDuringPublishesStartsAtItsPositionWithNoGap(kind: BrokerKind) async throws {
        let keyspace = RedisDeployment.freshKeyspace()
        let publisher = try kind.makeNode(keyspace: keyspace), late = try kind.makeNode(keyspace: keyspace)
        let room = RoomKey(channel: "demo", room: "late")
        for n in 1...5 { _ = try await publisher.broker.publish(draft("m\(n)", in: room)) }
        #expect(try await late.broker.subscribe(room) == RoomPosition(stored: 5, published: 5))
        late.broker.unsubscribe(room)
        // Publishes fired without waiting keep coming while the second node subscribes.
        let acknowledged = Atomic<Int>(0)
        for n in 6...150 {
            try publisher.broker.publish(draft("m\(n)", in: room), clientMessageID: nil) { result in
                if case .success = result { acknowledged.add(1, ordering: .relaxed) }
            }
        }
        let position = try await late.broker.subscribe(room)
        for n in 151...400 { _ = try await publisher.broker.publish(draft("m\(n)", in: room)) }
        try await eventually("every publish acknowledged", timeout: 20) { acknowledged.load(ordering: .relaxed) == 145 }
        #expect(position.stored >= 5 && position.stored <= 150)
        #expect(await late.deliveries.wait(in: room, timeout: 20) { $0.count >= Int(400 - position.stored) })
        #expect(late.deliveries.offsets(in: room) == Array((position.stored + 1)...400), "no gap, no duplicate after \(position)")
    }

    /// Redis is paused (SIGSTOP) and later killed (SIGKILL) and restarted on its append-only
    /// file while a node publishes and another follows the room: every acknowledged message
    /// arrives, once, in offset order.
    @Test func aNodesDeliverySurvivesAPauseAndACrashOfRedis() async throws {
        let redis = try RedisServer.start(appendOnly: true, appendFsync: "always")
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        var configuration = testRedisConfiguration()
        configuration.commandTimeoutMillis = 800
        configuration.pingIntervalMillis = 200
        let endpoint = try RedisEndpoint(url: redis.url)
        let keyspace = RedisDeployment.freshKeyspace()
        let publisherClient = RedisClient(endpoint: endpoint, group: group, configuration: configuration)
        let followerClient = RedisClient(endpoint: endpoint, group: group, configuration: configuration)
        defer { publisherClient.close(); followerClient.close() }
        var options = RedisBrokerOptions()
        options.subscribeTimeoutMillis = 5_000
        let publisher = RedisBroker(store: RedisMessageStore(redis: publisherClient, keyspace: keyspace), options: options)
        let follower = RedisBroker(store: RedisMessageStore(redis: followerClient, keyspace: keyspace), options: options)
        defer { publisher.close(); follower.close() }
        let deliveries = DeliveryRecorder()
        follower.setDelivery(deliveries)
        publisher.setDelivery(DeliveryRecorder())
        let room = RoomKey(channel: "demo", room: "faults")
        _ = try await follower.subscribe(room)

        let acknowledged = Locked<[Int64]>([])
        let failures = Atomic<Int>(0)
        let total = 300
        let publishing = Task {
            for n in 0..<total {
                // A publish that failed may or may not have been stored: the retry with the
                // same client message id is stored at most once.
                let deadline = Date().addingTimeInterval(30)
                while Date() < deadline {
                    do {
                        let message = try await publisher.publish(draft("m\(n)", in: room), clientMessageID: "c\(n)")
                        acknowledged.withLock { $0.append(message.offset) }
                        break
                    } catch {
                        failures.add(1, ordering: .relaxed)
                        try? await Task.sleep(for: .milliseconds(50))
                    }
                }
            }
        }
        try await eventually("100 acknowledged", timeout: 20) { acknowledged.value.count >= 100 }
        redis.pause()
        try await eventually("Redis noticed down", timeout: 10) { followerClient.status.state == .down }
        redis.resume()
        try await eventually("200 acknowledged", timeout: 30) { acknowledged.value.count >= 200 }
        redis.kill()
        try redis.restart()
        await publishing.value
        let offsets = acknowledged.value
        #expect(offsets.count == total, "every message acknowledged once")
        #expect(offsets.sorted() == Array(1...Int64(total)), "acknowledged offsets are dense and unique")
        #expect(failures.load(ordering: .relaxed) > 0, "the faults were felt")
        #expect(await deliveries.wait(in: room, timeout: 30) { events in
            events.filter { if case .message = $0 { true } else { false } }.count >= total
        })
        #expect(deliveries.offsets(in: room) == Array(1...Int64(total)), "no gap, no duplicate")
        #expect(deliveries.resynchronizedRooms.contains(room), "the node rebuilt the room after reconnecting")
    }
}

/// Presence leases: a node that stops renewing loses its members everywhere; a Redis pause
/// longer than the lease loses nobody.
@Suite(.serialized) struct RedisPresenceLeaseTests {
    static func presenceOptions(_ node: String, lease: Int) -> RedisPresenceOptions {
        var options = RedisPresenceOptions(nodeID: node)
        options.leaseMillis = lease
        options.reapIntervalMillis = 100
        return options
    }

    static func fastConfiguration() -> RedisConfiguration {
        var configuration = testRedisConfiguration()
        configuration.commandTimeoutMillis = 400
        configuration.pingIntervalMillis = 150
        return configuration
    }

    @Test func aNodeThatStopsRenewingLosesItsMembersEverywhereWithinTheLease() async throws {
        let server = try SharedRedisServers.single()
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let endpoint = try RedisEndpoint(url: server.url)
        let keyspace = RedisDeployment.freshKeyspace()
        let lease = 2_000
        let deadClient = RedisClient(endpoint: endpoint, group: group, configuration: Self.fastConfiguration())
        let liveClient = RedisClient(endpoint: endpoint, group: group, configuration: Self.fastConfiguration())
        defer { deadClient.close(); liveClient.close() }
        let dead = RedisPresenceStore(redis: deadClient, keyspace: keyspace, options: Self.presenceOptions("dead", lease: lease))
        let live = RedisPresenceStore(redis: liveClient, keyspace: keyspace, options: Self.presenceOptions("live", lease: lease))
        let broker = RedisBroker(store: RedisMessageStore(redis: liveClient, keyspace: keyspace), presence: live)
        defer { broker.close() }
        let deliveries = DeliveryRecorder()
        broker.setDelivery(deliveries)
        let room = RoomKey(channel: "demo", room: "observable-lease"), other = RoomKey(channel: "demo", room: "other")
        _ = try await broker.subscribe(room)
        let ghosts = [Member(id: "g1", clientData: ["name": "ghost"]), Member(id: "g2")]
        let stays = Member(id: "s1", clientData: ["name": "stays"])
        for ghost in ghosts { #expect(try await dead.add(ghost, to: room)) }
        #expect(try await dead.add(ghosts[0], to: other))
        #expect(try await live.add(stays, to: room))
        try await eventually("the live node's reaper to be armed", timeout: 10) { live.reaperReady }

        deadClient.close()  // the node stops renewing (as if killed): it cannot even say goodbye
        let start = ContinuousClock.now
        #expect(await deliveries.wait(in: room, timeout: Double(lease) / 1000 * 3 + 5) { events in
            ghosts.allSatisfy { events.contains(.memberLeft($0)) }
        })
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .milliseconds(lease + 1_500), "leaves announced after \(elapsed)")
        #expect(try await live.members(of: room).members == [stays])
        #expect(try await live.members(of: other).total == 0)
        #expect(try await live.rooms(in: "demo") == ["observable-lease"])
        #expect(deliveries.events(in: room).filter { $0 == .memberLeft(ghosts[0]) }.count == 1, "each leave once")
    }

    /// SIGSTOP of Redis for twice the lease under two nodes' hubs: every node loses Redis;
    /// afterwards nobody's members are reaped (no leave/join storm), and a member that left
    /// during the pause leaves once, on every node.
    @Test func aRedisPauseLongerThanTheLeaseCausesNoStorm() async throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let endpoint = try RedisEndpoint(url: redis.url)
        let keyspace = RedisDeployment.freshKeyspace()
        let lease = 1_500
        struct Node {
            let client: RedisClient
            let presence: RedisPresenceStore
            let broker: RedisBroker
            let hub: Hub
        }
        func node(_ name: String, renewEvery renew: Int) -> Node {
            let client = RedisClient(endpoint: endpoint, group: group, configuration: Self.fastConfiguration())
            var options = Self.presenceOptions(name, lease: lease)
            options.renewIntervalMillis = renew
            let presence = RedisPresenceStore(redis: client, keyspace: keyspace, options: options)
            let broker = RedisBroker(store: RedisMessageStore(redis: client, keyspace: keyspace), presence: presence)
            return Node(client: client, presence: presence, broker: broker, hub: Hub(broker: broker, presence: presence))
        }
        // Nodes that come back at different times: b is back well before a renews again (a
        // reaper that did not wait for a lease of good health would reap a's members).
        let a = node("a", renewEvery: 700), b = node("b", renewEvery: 200)
        defer {
            for n in [a, b] { n.broker.close(); n.client.close() }
        }
        let room = RoomKey(channel: "demo", room: "observable-pause")
        let a1 = Member(id: "a1"), a2 = Member(id: "a2"), b1 = Member(id: "b1")
        let inboxes = [EventInbox(), EventInbox(), EventInbox()]
        try a.hub.subscribe(1, as: a1, to: room, inbox: inboxes[0])
        try await eventually("a1 in", timeout: 10) { inboxes[0].subscribed }
        try a.hub.subscribe(2, as: a2, to: room, inbox: inboxes[1])
        try await eventually("a2 in", timeout: 10) { inboxes[1].subscribed }
        try b.hub.subscribe(3, as: b1, to: room, inbox: inboxes[2])
        try await eventually("everybody sees everybody", timeout: 10) {
            inboxes[2].subscribed && a.hub.members(of: room).count == 3 && b.hub.members(of: room).count == 3
        }
        try await eventually("both reapers armed", timeout: 10) { a.presence.reaperReady && b.presence.reaperReady }
        let before = inboxes.map { $0.events.count }

        redis.pause()
        try await eventually("both nodes notice", timeout: 10) { !a.presence.isHealthy && !b.presence.isHealthy }
        // a2 leaves while Redis is away: the removal fails, and must still happen afterwards.
        #expect(a.hub.unsubscribe(2, from: room))
        let pausedAt = ContinuousClock.now
        try await eventually("a pause longer than the lease", timeout: 10) { ContinuousClock.now - pausedAt > .milliseconds(lease * 2) }
        redis.resume()

        let passes = [a, b].map { $0.presence.reapPasses }
        try await eventually("both healthy, with their reapers back at work", timeout: 20) {
            a.presence.reaperReady && b.presence.reaperReady
                && a.presence.reapPasses >= passes[0] + 3 && b.presence.reapPasses >= passes[1] + 3
        }
        try await eventually("a2's leave everywhere", timeout: 10) {
            [inboxes[0], inboxes[2]].allSatisfy { $0.events.contains(.memberLeft(a2)) }
        }
        #expect(try await a.presence.members(of: room).members == [a1, b1])
        #expect(a.hub.members(of: room) == [a1, b1])
        #expect(b.hub.members(of: room) == [a1, b1])
        for index in [0, 2] {
            let after = Array(inboxes[index].events.dropFirst(before[index]))
            #expect(after == [.memberLeft(a2)], "session \(index): only a2's leave, got \(after)")
        }
        #expect(a.presence.reassertions >= 1 && b.presence.reassertions >= 1)
    }
}

/// A session's inbox that keeps the room events it is given.
final class EventInbox: Inbox {
    private let log = Mutex<(subscribed: Bool, events: [RoomEvent])>((false, []))
    func post(_ delivery: Delivery) {
        log.withLock { log in
            switch delivery {
            case .subscribed(_, let snapshot): log.subscribed = snapshot.failure == nil
            case .event(_, let event): log.events.append(event)
            case .unsubscribed, .replay, .perform: break
            }
        }
    }
    var subscribed: Bool { log.withLock { $0.subscribed } }
    var events: [RoomEvent] { log.withLock { $0.events } }
}
