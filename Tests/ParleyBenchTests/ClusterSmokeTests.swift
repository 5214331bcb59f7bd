import Foundation
import Testing
import ParleyServer
import ParleyTestSupport
@testable import ParleyBench

/// The benches with several servers, at toy size against two in-process cluster nodes on a
/// real Redis: correctness only (members spread, nothing lost, latency split by node).
@Suite(.serialized) struct ClusterSmokeTests {
    static func twoNodes() throws -> (ParleyServer, ParleyServer) {
        let redis = try SharedRedisServers.single()
        let prefix = "bench-\(UUID().uuidString.prefix(8))"
        func node(_ name: String) throws -> ParleyServer {
            try ParleyServer(configuration: .forTests {
                $0.nativeRatePerSecond = 10_000
                $0.nativeBurst = 20_000
                $0.redisURL = redis.url
                $0.redisKeyPrefix = prefix
                $0.nodeID = name
            })
        }
        let a = try node("bench-a")
        do {
            return (a, try node("bench-b"))
        } catch {
            a.shutdown(timeout: .seconds(1))
            throw error
        }
    }

    static func url(_ server: ParleyServer) -> BenchURL {
        BenchURL(host: "127.0.0.1", port: server.httpPort, path: "/v3/websocket")
    }

    @Test func severalURLsAreParsedInOrder() throws {
        let fanout = try BenchCommand.parseFanout(["--url", "ws://127.0.0.1:1/v3/websocket", "--url", "ws://127.0.0.1:2/v3/websocket",
                                                   "--members", "5"])
        #expect(fanout.urls.map(\.port) == [1, 2])
        let measured = try BenchCommand.parseFanout(["--url", "ws://127.0.0.1:1/", "--url", "ws://127.0.0.1:2/",
                                                     "--server-pid", "10", "--server-pid", "11"])
        #expect(measured.urls.count == 2 && measured.serverPIDs == [10, 11])
        #expect(throws: (any Error).self) { try BenchCommand.parseFanout(["--url", "ws://127.0.0.1:1/", "--server-pid", "4294967296"]) }
        // Publishers on the first server; the others round robin.
        #expect(fanout.urlIndex(connection: 0, isPublisher: true) == 0)
        #expect(fanout.urlIndex(connection: 3, isPublisher: true) == 0)
        #expect((0..<4).map { fanout.urlIndex(connection: $0, isPublisher: false) } == [0, 1, 0, 1])
        let idle = try BenchCommand.parseIdle(["--url", "ws://127.0.0.1:1/", "--url", "ws://127.0.0.1:2/", "--url", "ws://127.0.0.1:3/",
                                               "--connections", "9", "--server-pid", "10", "--server-pid", "11"])
        #expect(idle.urls.map(\.port) == [1, 2, 3])
        #expect(idle.serverPIDs == [10, 11])
        #expect(throws: (any Error).self) { try BenchCommand.parseIdle(["--connections", "9"]) }
    }

    @Test func fanoutAcrossTwoNodes() throws {
        let (a, b) = try Self.twoNodes()
        defer { a.shutdown(timeout: .seconds(1)); b.shutdown(timeout: .seconds(1)) }
        var o = FanoutOptions()
        o.urls = [Self.url(a), Self.url(b)]
        o.members = 20
        o.rate = .perSecond(200)
        o.durationSeconds = 0.5
        o.warmupSeconds = 0.2
        o.drainSeconds = 10
        o.setupTimeoutSeconds = 20
        // Both nodes live in this process: its CPU is read once per given pid and summed.
        o.serverPIDs = [getpid(), getpid()]
        let r = FanoutRun.run(o)
        #expect(r.isClean, "\(r.table)")
        #expect(r.delivered == r.sent * 20 && r.sent > 0)
        #expect(r.membersByURL == [10, 10])
        #expect(r.latencyByURL.count == 2 && r.latencyByURL.allSatisfy { $0.count > 0 })
        #expect(r.latencyByURL.reduce(0) { $0 + $1.count } == r.latency.count)
        #expect(r.json.contains("\"by_url\":[{\"url\":\"127.0.0.1:\(a.httpPort)/v3/websocket\",\"members\":10"), "\(r.json)")
        #expect(r.table.contains("(publishers here)"))
        #expect((r.serverCPUSeconds ?? 0) > 0 && (r.serverCPUSeconds ?? 0).isFinite, "CPU summed over both pids")
        #expect(r.json.contains("\"deliveries_per_server_cpu_s\":"))
    }

    @Test func idleAcrossTwoNodesSumsTheirMemory() throws {
        let (a, b) = try Self.twoNodes()
        defer { a.shutdown(timeout: .seconds(1)); b.shutdown(timeout: .seconds(1)) }
        var o = IdleOptions()
        o.urls = [Self.url(a), Self.url(b)]
        o.connections = 20
        o.reportAt = [10]
        // Both nodes live in this process: the sum counts it twice, which is what is checked.
        o.serverPIDs = [getpid(), getpid()]
        o.setupTimeoutSeconds = 20
        let r = IdleRun.run(o)
        #expect(r.isClean, "\(r.table)")
        #expect(r.connected == 20)
        #expect(r.checkpoints.map(\.connections) == [10, 20])
        let single = residentKiB(pid: getpid()) ?? 0
        #expect((r.checkpoints.last?.serverKiB ?? 0) > single, "the sum of two pids")
        #expect(r.json.contains("\"server_pids\":[\(getpid()),\(getpid())]"))
    }
}
