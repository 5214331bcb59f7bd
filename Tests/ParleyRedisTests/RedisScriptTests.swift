import Foundation
import Testing
import ParleyIO
@testable import ParleyRedis
import ParleyTestSupport

/// Lua scripts against a real redis-server.
@Suite(.serialized) struct RedisScriptTests {
    /// An atomic publish the way the Redis backends will do it: idempotency key, offset,
    /// stream append with trimming, pub/sub, all in one script on one hash tag.
    static let publish = RedisScript("""
        local known = redis.call('GET', KEYS[3])
        if known then return {0, tonumber(known)} end
        local offset = redis.call('INCR', KEYS[1])
        redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], tostring(offset) .. '-1', 'body', ARGV[1])
        redis.call('SET', KEYS[3], offset, 'PX', ARGV[3])
        redis.call('SPUBLISH', KEYS[4], offset .. ':' .. ARGV[1])
        return {1, offset}
        """)

    func publishKeys(_ room: String, _ messageID: String) -> [RedisArgument] {
        [.string("{\(room)}:offset"), .string("{\(room)}:stream"), .string("{\(room)}:id:\(messageID)"), .string("{\(room)}:channel")]
    }

    func commandStats(_ redis: RedisServer, _ command: String) throws -> (calls: Int, failed: Int) {
        let line = try redis.cli("INFO", "commandstats").split(whereSeparator: \.isNewline).first { $0.hasPrefix("cmdstat_\(command):") }
        guard let line else { return (0, 0) }
        func field(_ name: String) -> Int {
            line.split(separator: ",").first { $0.contains("\(name)=") }.flatMap { Int($0.split(separator: "=").last!) } ?? 0
        }
        return (field("calls"), field("failed_calls"))
    }

    @Test func evalshaFallsBackToEvalOnNOSCRIPT() async throws {
        let fixture = try RedisFixture.start()
        defer { fixture.stop() }
        let (redis, client) = (fixture.redis, fixture.client)
        let script = RedisScript("return {KEYS[1], ARGV[1], 42}")

        // Never loaded: EVALSHA fails with NOSCRIPT, EVAL runs it (and caches it).
        let first = try await client.evaluate(script, keys: ["k"], arguments: ["a"])
        #expect(first == .array([.bulkString(Array("k".utf8)), .bulkString(Array("a".utf8)), .integer(42)]))
        #expect(try commandStats(redis, "eval").calls == 1)
        #expect(try commandStats(redis, "evalsha").calls == 1)
        // Cached now: EVALSHA alone.
        _ = try await client.evaluate(script, keys: ["k"], arguments: ["b"])
        #expect(try commandStats(redis, "eval").calls == 1)
        #expect(try commandStats(redis, "evalsha").calls == 2)
        // Flushed (or a restarted Redis): the fallback again.
        try await client.call("SCRIPT", "FLUSH")
        _ = try await client.evaluate(script, keys: ["k"], arguments: ["c"])
        #expect(try commandStats(redis, "eval").calls == 2)

        // SCRIPT LOAD agrees with the locally computed digest.
        try await client.load(RedisScript("return 'loaded'"))
        #expect(try await client.call("EVALSHA", .string(RedisScript("return 'loaded'").sha1), 0) == .bulkString(Array("loaded".utf8)))

        // Script errors come back as server errors with Redis's text.
        let failing = try await awaitCallback { done in client.evaluate(RedisScript("return redis.call('INCR', KEYS[1])"), keys: ["text"], completion: done) } as Result<RedisValue, RedisError>
        #expect((try? failing.get()) == .integer(1))
        try await client.call("SET", "text", "abc")
        let error = try await awaitCallback { done in client.evaluate(RedisScript("return redis.call('INCR', KEYS[1])"), keys: ["text"], completion: done) } as Result<RedisValue, RedisError>
        guard case .failure(let failure) = error else { Issue.record("INCR on text succeeded"); return }
        #expect(failure.code == .server)
        #expect(failure.message.contains("not an integer"))
    }

    @Test func anAtomicIdempotentPublish() async throws {
        let fixture = try RedisFixture.start()
        defer { fixture.stop() }
        let (group, client) = (fixture.group, fixture.client)
        let log = SubscriberLog()
        let subscriber = client.makeSubscriber(on: group.loops[0], handler: log.handler)
        defer { subscriber.close() }
        try await subscribe(subscriber, .sharded("{ch/lobby}:channel"))

        func publish(_ body: String, id: String) async throws -> RedisValue {
            try await client.evaluate(Self.publish, keys: publishKeys("ch/lobby", id), arguments: [.string(body), 1000, 60_000])
        }
        #expect(try await publish("hi", id: "m1") == .array([.integer(1), .integer(1)]))
        #expect(try await publish("again", id: "m2") == .array([.integer(1), .integer(2)]))
        #expect(try await publish("hi", id: "m1") == .array([.integer(0), .integer(1)]))  // a retry: no new offset
        try await eventually("two deliveries", timeout: 10) { log.messages.count == 2 }
        #expect(log.messages(on: .sharded("{ch/lobby}:channel")) == ["1:hi", "2:again"])
        #expect(try await client.call("XLEN", "{ch/lobby}:stream").int == 2)
    }

    /// Scripts named in the configuration are loaded on every (re)connect, so `EVALSHA` never
    /// meets `NOSCRIPT` (whose `EVAL` fallback could let a later script overtake an earlier
    /// one), even after Redis restarted with an empty script cache.
    @Test func configuredScriptsAreLoadedOnEveryConnect() async throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let script = RedisScript("return ARGV[1]")
        var configuration = fastConfiguration()
        configuration.scriptsToLoad = [script, RedisScript("return 2")]
        let client = RedisClient(endpoint: try RedisEndpoint(url: redis.url), group: group, configuration: configuration)
        defer { client.close() }
        #expect(try await client.evaluate(script, arguments: ["one"]) == .bulkString(Array("one".utf8)))
        redis.kill()
        try redis.restart()
        try await eventually("the client to reconnect", timeout: 10) { client.status.state == .ready && client.status.reconnects >= 1 }
        #expect(try await client.evaluate(script, arguments: ["two"]) == .bulkString(Array("two".utf8)))
        #expect(try commandStats(redis, "evalsha") == (1, 0), "EVALSHA found the script at once")
        #expect(try commandStats(redis, "eval").calls == 0)
    }
}
