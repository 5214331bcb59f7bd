import Foundation
import Testing
import ParleyCore
import ParleyIO
@testable import ParleyRedis
import ParleyTestSupport

/// Against a real redis-server on a free port.
@Suite(.serialized) struct RedisClientTests {
    @Test func tenThousandPipelinedCommandsAreAnsweredInOrder() async throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let connection = LoopBound(RedisConnection(endpoint: try RedisEndpoint(url: redis.url), loop: loop), on: loop)
        defer { connection.run { $0.close() } }
        let replies = Locked<[String]>([])
        let pendingAfterSending = try await awaitCallback("the commands to be sent") { (done: @escaping @Sendable (Int) -> Void) in
            connection.run { connection in
                connection.start()
                // All in one loop turn: every command is written before any reply is read.
                for index in 0..<10_000 {
                    connection.send(RedisCommand("ECHO", .string("m\(index)"))) { result in
                        replies.withLock { $0.append((try? result.get().string) ?? "error: \(result)") }
                    }
                }
                done(connection.pendingCommandCount)
            }
        }
        #expect(pendingAfterSending == 10_000)
        try await eventually("10,000 replies", timeout: 30) { replies.value.count == 10_000 }
        #expect(replies.value == (0..<10_000).map { "m\($0)" })
    }

    @Test func commandsFromAnyThreadUseEveryLoop() async throws {
        let fixture = try RedisFixture.start(loops: 2)
        defer { fixture.stop() }
        let client = fixture.client
        let done = Locked(0)
        for index in 0..<1_000 {
            client.send(RedisCommand("SET", .string("key:\(index)"), .integer(Int64(index)))) { result in
                if case .success(.simpleString("OK")) = result { done.withLock { $0 += 1 } }
            }
        }
        try await eventually("1,000 SETs", timeout: 10) { done.value == 1_000 }
        #expect(try await client.call("GET", "key:777").int == 777)
        #expect(try await client.call("DBSIZE").int == 1_000)
        // Both loops' connections are up.
        try await eventually("both connections ready", timeout: 10) { client.status.readyConnections == 2 }
        #expect(client.status.state == .ready)
        // The async form.
        #expect(try await client.send("INCRBY", "counter", 5).int == 5)
    }

    @Test func resp3RepliesAndTheirRESP2Forms() async throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        var resp2 = fastConfiguration()
        resp2.protocolPreference = .resp2
        let endpoint = try RedisEndpoint(url: redis.url)
        let client3 = RedisClient(endpoint: endpoint, group: group, configuration: fastConfiguration())
        let client2 = RedisClient(endpoint: endpoint, group: group, configuration: resp2)
        defer { client3.close(); client2.close() }
        try await client3.call("HSET", "h", "a", "1", "b", "2")
        try await client3.call("ZADD", "z", "1.5", "m")

        let map = try await client3.call("HGETALL", "h")
        guard case .map = map else { Issue.record("RESP3 HGETALL is not a map: \(map)"); return }
        let flat = try await client2.call("HGETALL", "h")
        guard case .array = flat else { Issue.record("RESP2 HGETALL is not an array: \(flat)"); return }
        for reply in [map, flat] {
            let pairs = try #require(reply.pairs)
            #expect(Dictionary(uniqueKeysWithValues: pairs.map { ($0.key.string!, $0.value.int!) }) == ["a": 1, "b": 2])
        }
        #expect(try await client3.call("ZSCORE", "z", "m") == .double(1.5))
        #expect(try await client2.call("ZSCORE", "z", "m") == .bulkString(Array("1.5".utf8)))
        #expect(try await client2.call("ZSCORE", "z", "m").double == 1.5)
        #expect(try await client3.call("GET", "missing") == .null)
        #expect(try await client2.call("GET", "missing") == .null)

        let versions = try await awaitCallback { (done: @escaping @Sendable ([Int]) -> Void) in
            let loop = group.loops[0]
            let a = LoopBound(RedisConnection(endpoint: endpoint, loop: loop), on: loop)
            let b = LoopBound(RedisConnection(endpoint: endpoint, configuration: resp2, loop: loop), on: loop)
            a.run { a in
                a.send(RedisCommand("PING")) { _ in
                    b.runNow { b in
                        b.send(RedisCommand("PING")) { _ in
                            done([a.protocolVersion, b.protocolVersion])
                            a.close()
                            b.close()
                        }
                    }
                }
            }
        }
        #expect(versions == [3, 2])
    }

    /// A command sent once the client's loops have stopped is answered (closed), not dropped:
    /// a task awaiting it while the node stops must not wait forever.
    @Test func aCommandAfterTheLoopsStoppedIsAnsweredClosed() async throws {
        let group = EventLoopGroup(loopCount: 1)
        let client = RedisClient(endpoint: try RedisEndpoint(url: "redis://127.0.0.1:1"), group: group)
        group.shutdown()
        let result = try await awaitCallback("the answer", timeout: 5) { (done: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) in
            client.send(RedisCommand("PING"), completion: done)
        }
        #expect(throws: RedisError.self) { try result.get() }
        if case .failure(let error) = result { #expect(error.code == .closed) }
        let batch = try await awaitCallback("the batch's answers", timeout: 5) { (done: @escaping @Sendable ([Result<RedisValue, RedisError>]) -> Void) in
            client.send(batch: [RedisCommand("PING"), RedisCommand("PING")], completion: done)
        }
        #expect(batch.count == 2)
        // A subscribe too (a subscriber's core and the broker's shards live on the loops).
        let subscriber = client.makeSubscriber(on: group.loops[0]) { _ in }
        let subscribed = try await awaitCallback("the subscribe's answer", timeout: 5) { (done: @escaping @Sendable (Result<Void, RedisError>) -> Void) in
            subscriber.subscribe(RedisChannel(name: "c", isSharded: false), completion: done)
        }
        if case .failure(let error) = subscribed { #expect(error.code == .closed) } else { Issue.record("subscribed on a stopped loop") }
        let broker = RedisBroker(store: RedisMessageStore(redis: client, keyspace: try RedisKeyspace(prefix: "stopped")))
        let joined = try await awaitCallback("the broker's answer", timeout: 5) { (done: @escaping @Sendable (Result<RoomPosition, ParleyError>) -> Void) in
            broker.subscribe(RoomKey(channel: "demo", room: "r"), completion: done)
        }
        if case .failure(let error) = joined { #expect(error.code == .unavailable) } else { Issue.record("a broker subscribe on a stopped loop") }
    }

    @Test func serverErrorsCarryRedisText() async throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let client = RedisClient(endpoint: try RedisEndpoint(url: redis.url), group: group)
        defer { client.close() }
        try await client.call("SET", "text", "abc")
        let result = try await client.result(RedisCommand("INCR", "text"))
        guard case .failure(let error) = result else { Issue.record("INCR on text succeeded"); return }
        #expect(error.code == .server)
        #expect(error.serverCode == "ERR")
        #expect(error.message.contains("not an integer"))
        let unknown = try await client.result(RedisCommand("NOSUCHCOMMAND"))
        #expect((try? unknown.get()) == nil)
        // The connection is fine after errors.
        #expect(try await client.call("PING") == .simpleString("PONG"))
    }

    @Test func databaseAndPasswordFromTheURL() async throws {
        let redis = try RedisServer.start(extraArguments: ["--requirepass", "s3cret"])
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        for preference in [RedisProtocolPreference.resp3IfAvailable, .resp2] {
            var configuration = fastConfiguration()
            configuration.protocolPreference = preference
            let client = RedisClient(endpoint: try RedisEndpoint(url: "redis://:s3cret@127.0.0.1:\(redis.port)/3"),
                                     group: group, configuration: configuration)
            try await client.call("SET", "where", "db3")
            client.close()
        }
        #expect(try redis.cli("-a", "s3cret", "--no-auth-warning", "-n", "3", "GET", "where") == "db3")
        #expect(try redis.cli("-a", "s3cret", "--no-auth-warning", "-n", "0", "EXISTS", "where") == "0")

        // A wrong password: the client reports down with Redis's reason, commands fail clearly.
        let wrong = RedisClient(endpoint: try RedisEndpoint(url: "redis://:nope@127.0.0.1:\(redis.port)"),
                                group: group, configuration: fastConfiguration())
        defer { wrong.close() }
        try await eventually("the client to be down", timeout: 10) { wrong.status.state == .down }
        #expect(wrong.status.message?.contains("WRONGPASS") == true)
        let result = try await wrong.result(RedisCommand("PING"))
        guard case .failure(let error) = result else { Issue.record("PING with a wrong password succeeded"); return }
        #expect(error.code == .connection)
        #expect(error.message.contains("WRONGPASS"))
    }

    @Test func aFullQueueRefusesAtOnce() async throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        var configuration = fastConfiguration()
        configuration.maxPendingCommands = 10
        let loop = group.loops[0]
        let connection = LoopBound(RedisConnection(endpoint: try RedisEndpoint(url: redis.url), configuration: configuration, loop: loop), on: loop)
        defer { connection.run { $0.close() } }
        let results = Locked<[Result<RedisValue, RedisError>]>([])
        connection.run { connection in
            for _ in 0..<25 {
                connection.send(RedisCommand("PING")) { result in results.withLock { $0.append(result) } }
            }
        }
        try await eventually("25 results", timeout: 10) { results.value.count == 25 }
        let refused = results.value.filter { if case .failure(let error) = $0 { return error.code == .queueFull } else { return false } }
        #expect(refused.count == 15)
        #expect(results.value.filter { (try? $0.get()) == .simpleString("PONG") }.count == 10)
    }

    @Test func aCommandWithoutReplyTimesOutAndTheConnectionRecovers() async throws {
        let fixture = try RedisFixture.start()
        defer { fixture.stop() }
        let client = fixture.client
        try await client.call("PING")
        let start = ContinuousClock.now
        // BLPOP blocks for 5 s; the command allows 200 ms.
        let result = try await client.result(RedisCommand(["BLPOP", "nothing", 5], timeoutMillis: 200))
        let elapsed = ContinuousClock.now - start
        guard case .failure(let error) = result else { Issue.record("BLPOP did not time out: \(result)"); return }
        #expect(error.code == .timeout)
        #expect(elapsed < .seconds(2))
        // Nothing came back on that connection since the command: it was deemed unresponsive
        // and is reconnected; commands flow again.
        try await eventually("a working connection again", timeout: 10) {
            client.status.state == .ready && client.status.reconnects >= 1
        }
        #expect(try await client.call("PING") == .simpleString("PONG"))
    }

    @Test func aRedisThatIsGoneFailsCommandsClearlyAndQuickly() async throws {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let port = try RedisServer.freePort()  // nothing listens there
        let events = Locked<[RedisConnectionEvent]>([])
        let client = RedisClient(endpoint: RedisEndpoint(port: port), group: group, configuration: fastConfiguration()) { _, event in
            events.withLock { $0.append(event) }
        }
        defer { client.close() }
        try await eventually("the client to be down", timeout: 10) { client.status.state == .down }
        #expect(client.status.message?.contains("ECONNREFUSED") == true)
        let start = ContinuousClock.now
        let result = try await client.result(RedisCommand("PING"))
        guard case .failure(let error) = result else { Issue.record("PING succeeded with no server"); return }
        #expect(error.code == .connection)
        #expect(error.message.contains("127.0.0.1:\(port)"))
        #expect(ContinuousClock.now - start < .seconds(2))
        #expect(events.value.first == .connecting)
        #expect(events.value.contains { if case .down = $0 { return true } else { return false } })
    }
}
