import Foundation
import Testing
import ParleyCore
import ParleyServer
import ParleyTestSupport

/// A node on Redis Sentinel (a master, a replica, three Sentinels) while the master is
/// SIGKILLed under a steady stream of publishes: the node follows the promoted replica and
/// publishing resumes within the Sentinel timeout plus a few seconds. Acknowledged messages
/// missing from history afterwards are counted (and printed as `sentinel-failover …`).
@Suite(.serialized) struct SentinelFailoverTests {
    /// `replicasAck` 0: acknowledged once on the master (asynchronous replication may lose
    /// the last ones); 1: once on a replica too (`WAIT`), so nothing acknowledged is lost.
    /// With 1 there are two replicas: after the failover the new master still has one.
    @Test(arguments: [0, 1]) func publishingFollowsAFailover(replicasAck: Int) throws {
        let deployment = try RedisSentinelDeployment.start(replicas: replicasAck + 1)
        defer { deployment.stop() }
        let node = try startTestServer { configuration in
            configuration.redisSentinels = deployment.sentinelList
            configuration.redisSentinelMaster = deployment.masterName
            configuration.redisKeyPrefix = "sentinel-\(UUID().uuidString.prefix(8))"
            configuration.nodeID = "sentinel-node"
            configuration.presenceLeaseMillis = 3_000
            configuration.redisReplicasAck = replicasAck
            configuration.redisReplicasAckTimeoutMillis = 500
            configuration.nativeRatePerSecond = 1_000_000
            configuration.nativeBurst = 1_000_000
        }
        defer { node.shutdown() }
        #expect(node.listeningLines.contains { $0.contains("redis-sentinel://") && $0.contains(deployment.masterName) }, "\(node.listeningLines)")
        let client = try NativeClient.connect(node, clientData: ["name": "ann"])
        try client.subscribe("r")

        var acknowledged: [String] = []
        var failed = 0
        var callback = 1
        // Publishes go out in windows (PARLEY_FAILOVER_WINDOW, default 16) without waiting for
        // each receipt, so several are in flight when the master dies, as under real load.
        let window = ProcessInfo.processInfo.environment["PARLEY_FAILOVER_WINDOW"].flatMap(Int.init).map { max(1, min(1_000, $0)) } ?? 16
        /// One window of publishes and their receipts; true when all were acknowledged.
        func publish() throws -> Bool {
            var waiting: [Int: String] = [:]
            for _ in 0..<window {
                waiting[callback] = "m\(callback)"
                try client.send(["type": "publish", "room": "r", "message": .string("m\(callback)"), "callback": .number(JSONNumber(callback))])
                callback += 1
            }
            var allAcknowledged = true
            let deadline = Date().addingTimeInterval(15)
            while !waiting.isEmpty {
                let frame = try client.next(timeout: max(0.01, deadline.timeIntervalSinceNow))
                guard let number = frame["callback"]?.intValue, let text = waiting.removeValue(forKey: number) else { continue }
                if frame["error"] == nil && frame["offset"] != nil {
                    acknowledged.append(text)
                } else {
                    failed += 1
                    allAcknowledged = false
                }
            }
            return allAcknowledged
        }
        for _ in 0..<4 { #expect(try publish()) }

        let killed = Date()
        deployment.master.kill()
        // Keep publishing: some fail while no master answers, then they go through again.
        var resumedAfter: Double?
        var sinceResumed = 0
        while Date().timeIntervalSince(killed) < 25 && sinceResumed < 5 {
            let ok = try publish()
            if ok, Date().timeIntervalSince(killed) > Double(deployment.downAfterMillis) / 1000, failed > 0 {
                if resumedAfter == nil { resumedAfter = Date().timeIntervalSince(killed) }
                sinceResumed += 1
            } else if !ok {
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        let resumed = try #require(resumedAfter, "publishing did not resume within 25 s of the SIGKILL")
        #expect(resumed < Double(deployment.downAfterMillis) / 1000 + 10, "resumed after \(resumed) s")
        // The Sentinel asked may learn of the switch a moment after the one that led it.
        try eventuallyBlocking("Sentinel names a former replica as the master", timeout: 10, pollMillis: 100) {
            let promoted = try deployment.masterPort()
            return deployment.replicas.contains { $0.port == promoted }
        }

        // Deliveries come through the new master's pub/sub too (the broker resubscribed).
        try client.send(["type": "publish", "room": "r", "message": "final", "callback": .number(JSONNumber(callback))])
        let push = try client.next(timeout: 10) { $0["type"] == "publish" && $0["message"] == "final" }
        #expect(push["offset"] != nil)

        let stored = Set(try client.allHistory("r").compactMap { $0["message"]?.stringValue })
        let lost = acknowledged.filter { !stored.contains($0) }
        print("sentinel-failover replicas-ack=\(replicasAck) window=\(window) acknowledged=\(acknowledged.count) failed=\(failed) "
              + "acknowledged-but-lost=\(lost.count) resumed-after=\(String(format: "%.2f", resumed))s")
        if replicasAck >= 1 { #expect(lost.isEmpty, "acknowledged by a replica, then lost: \(lost)") }
        // The last windows, all after the failover, are there whatever the setting.
        #expect(acknowledged.suffix(5 * window).allSatisfy(stored.contains))
    }
}
