import Foundation
import Testing
import ParleyCore
import ParleyIO
import ParleyRedis
import ParleyTestSupport

/// `--redis-replicas-ack`: an append is acknowledged only once N replicas have it (`WAIT`).
@Suite(.serialized) struct RedisReplicasAckTests {
    @Test func appendsWaitForReplicas() async throws {
        let master = try RedisServer.start()
        defer { master.stop() }
        let replica = try RedisServer.start(extraArguments: ["--replicaof", "127.0.0.1", "\(master.port)"])
        defer { replica.stop() }
        try await eventually("the replica to sync", timeout: 20, pollMillis: 50) {
            (try replica.cli("INFO", "replication")).contains("master_link_status:up")
        }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let client = RedisClient(endpoint: try RedisEndpoint(url: master.url), group: group)
        defer { client.close() }
        func store(replicas: Int) -> RedisMessageStore {
            var options = RedisStoreOptions()
            options.retentionIntervalMillis = 0
            options.replicasToAcknowledge = replicas
            options.replicasTimeoutMillis = 300
            return RedisMessageStore(redis: client, keyspace: try! RedisKeyspace(prefix: "ack-\(replicas)-\(UUID().uuidString.prefix(6))"),
                                     options: options)
        }
        let room = RoomKey(channel: "demo", room: "r")
        func message(_ offset: Int64) -> Message {
            Message(id: "m\(offset)", offset: offset, timestampMillis: 1_700_000_000_000, room: room, sender: nil, body: .string("text \(offset)"))
        }

        // One replica asked for, one there: acknowledged, and the replica has it.
        let one = store(replicas: 1)
        try await one.append(message(1))
        let broker = RedisBroker(store: one)
        defer { broker.close() }
        let published = try await broker.publish(message(0), clientMessageID: "c1")
        #expect(published.offset == 2)

        // Two asked for, one there: refused after the timeout, though on the master.
        let two = store(replicas: 2)
        let start = ContinuousClock.now
        do {
            try await two.append(message(1))
            Issue.record("an append acknowledged by 1 replica of 2")
        } catch {
            #expect(error.code == .unavailable)
            #expect(error.message.contains("1 of 2 replicas"), "\(error)")
        }
        #expect(ContinuousClock.now - start >= .milliseconds(250))

        // The replica stopped answering: nothing is acknowledged with 1 asked for, and a
        // store that asks for none still is.
        replica.pause()
        defer { replica.resume() }
        await #expect(throws: ParleyError.self) { try await one.append(message(3)) }
        let none = store(replicas: 0)
        try await none.append(message(1))
    }
}
