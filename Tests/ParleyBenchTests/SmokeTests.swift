import Foundation
import Testing
import ParleyServer
import ParleyTestSupport
@testable import ParleyBench

/// Each scenario at toy size against an in-process server on 127.0.0.1 port 0: correctness
/// only (nothing lost or duplicated, every latency recorded), never speed.
@Suite(.serialized) struct SmokeTests {
    static func server() throws -> ParleyServer {
        try ParleyServer(configuration: .forTests {
            $0.nativeRatePerSecond = 10_000
            $0.nativeBurst = 20_000
            $0.lineRatePerSecond = 10_000
            $0.lineBurst = 20_000
        })
    }

    func check(_ r: FanoutResult) {
        #expect(r.isClean, "\(r.table)")
        #expect(r.lost == 0 && r.duplicated == 0 && r.errors == 0)
        #expect(r.sent > 0)
        #expect(r.delivered == r.sent * r.options.members)
        #expect(Int(r.latency.count) == r.measuredDelivered)
        #expect(r.measuredDelivered > 0)
    }

    func options(_ server: ParleyServer, _ door: BenchDoor) -> FanoutOptions {
        var o = FanoutOptions()
        o.door = door
        o.url = door == .line ? BenchURL(host: "127.0.0.1", port: server.linePort)
                              : BenchURL(host: "127.0.0.1", port: server.httpPort, path: "/v3/websocket")
        o.durationSeconds = 0.5
        o.warmupSeconds = 0.2
        o.drainSeconds = 5
        o.setupTimeoutSeconds = 20
        return o
    }

    @Test func fanoutNative() throws {
        let server = try Self.server()
        defer { server.shutdown(timeout: .seconds(1)) }
        var o = options(server, .native)
        o.members = 20
        o.rate = .perSecond(200)
        check(FanoutRun.run(o))
    }

    @Test func fanoutNativeClosedLoop() throws {
        let server = try Self.server()
        defer { server.shutdown(timeout: .seconds(1)) }
        var o = options(server, .native)
        o.members = 10
        o.rate = .max
        o.window = 4
        check(FanoutRun.run(o))
    }

    @Test func chatLikeManyRooms() throws {
        let server = try Self.server()
        defer { server.shutdown(timeout: .seconds(1)) }
        var o = options(server, .native)
        o.rooms = 20
        o.members = 5
        o.publishers = 20
        o.rate = .perSecond(400)
        check(FanoutRun.run(o))
    }

    @Test func fanoutLine() throws {
        let server = try Self.server()
        defer { server.shutdown(timeout: .seconds(1)) }
        var o = options(server, .line)
        o.members = 10
        o.rate = .perSecond(100)
        check(FanoutRun.run(o))
    }

    @Test func lossAndErrorsAreReported() throws {
        // The default native rate limit (50/s, burst 100) refuses most of 1,000/s: the bench
        // must say so rather than report a good run.
        var c = ServerConfiguration()
        c.httpPort = 0
        c.linePort = 0
        c.loops = .fixed(1)
        let server = try ParleyServer(configuration: c)
        defer { server.shutdown(timeout: .seconds(1)) }
        var o = options(server, .native)
        o.members = 3
        o.rate = .perSecond(1_000)
        o.drainSeconds = 0.5
        let r = FanoutRun.run(o)
        #expect(!r.isClean)
        #expect(r.lost > 0 && r.errors > 0)
        #expect(r.table.hasPrefix("FAILED"))
        #expect(r.json.hasPrefix("{\"ok\":false"))
    }

    @Test func idleAcrossSourceAddresses() throws {
        let server = try Self.server()
        defer { server.shutdown(timeout: .seconds(1)) }
        var o = IdleOptions()
        o.url = BenchURL(host: "127.0.0.1", port: server.httpPort, path: "/v3/websocket")
        o.connections = 30
        o.perAddress = 10   // 127.0.0.1, .2, .3
        o.reportAt = [10, 20]
        o.serverPID = getpid()
        o.setupTimeoutSeconds = 20
        let r = IdleRun.run(o)
        #expect(r.isClean, "\(r.table)")
        #expect(r.connected == 30)
        #expect(r.checkpoints.map(\.connections) == [10, 20, 30])
        #expect(r.checkpoints.allSatisfy { $0.serverKiB != nil })
    }
}
