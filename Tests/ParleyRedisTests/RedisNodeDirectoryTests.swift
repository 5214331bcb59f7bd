import Foundation
import Testing
import ParleyIO
@testable import ParleyRedis
import ParleyTestSupport

/// Where nodes are reached, and the cluster's relay secret, against a real redis-server.
@Suite(.serialized) struct RedisNodeDirectoryTests {
    @Test func nodesFindEachOtherAndShareOneSecret() async throws {
        let fixture = try RedisFixture.start()
        defer { fixture.stop() }
        let client = fixture.client
        let keyspace = try RedisKeyspace(prefix: "t")
        let a = RedisNodeDirectory(redis: client, keyspace: keyspace), b = RedisNodeDirectory(redis: client, keyspace: keyspace)
        // The first node's candidate becomes the secret; the second reads it, not its own.
        let first = try await awaitCallback { done in a.loadSecret(candidate: "secret-of-a", completion: done) }.get()
        let second = try await awaitCallback { done in b.loadSecret(candidate: "secret-of-b", completion: done) }.get()
        #expect(first == "secret-of-a" && second == "secret-of-a" && b.secret == "secret-of-a")
        // A registered node is found; one that never registered, or whose lease ran out, is not.
        let registered = try await awaitCallback { (done: @escaping @Sendable (Bool) -> Void) in
            a.register(node: "a", address: "127.0.0.1:8001", leaseMillis: 1_000) { done($0 == nil) }
        }
        #expect(registered)
        #expect(await awaitCallback { done in b.address(of: "a", nowMillis: 0, completion: done) } == "127.0.0.1:8001")
        #expect(await awaitCallback { done in b.address(of: "ghost", nowMillis: 0, completion: done) } == nil)
        // (A lease of a second: a shorter one could run out before the first read on a busy machine.)
        try await Task.sleep(for: .milliseconds(1_200))
        // The cached answer holds for a moment, then the expired lease shows.
        #expect(await awaitCallback { done in b.address(of: "a", nowMillis: 1, completion: done) } == "127.0.0.1:8001")
        #expect(await awaitCallback { done in b.address(of: "a", nowMillis: RedisNodeDirectory.cacheMillis + 1, completion: done) } == nil)
        #expect(try await client.call("GET", "t:relay:secret").string == "secret-of-a")
        // Lost (a failover to a replica without it): the nodes put theirs back, and a newcomer
        // adopts it rather than making another.
        try await client.call("DEL", "t:relay:secret")
        b.reassertSecret()
        try await Task.sleep(for: .milliseconds(100))
        let newcomer = RedisNodeDirectory(redis: client, keyspace: keyspace)
        #expect(try await awaitCallback { done in newcomer.loadSecret(candidate: "secret-of-c", completion: done) }.get() == "secret-of-a")
    }
}

private func awaitCallback<T: Sendable>(_ start: (@escaping @Sendable (T) -> Void) -> Void) async -> T {
    await withCheckedContinuation { continuation in start { continuation.resume(returning: $0) } }
}
