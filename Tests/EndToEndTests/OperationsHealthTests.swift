import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// `/healthz` and `/readyz`: ready with a usable store, 503 with a reason when the store
/// fails or while the server drains before it stops (plain answers are tested in-process:
/// Tests/ParleyServerTests/OperationsInProcessTests).
@Suite(.serialized) struct OperationsHealthTests {
    @Test func readinessTurns503WhenTheStoreFailsAndBackWhenItRecovers() async throws {
        let (server, faults) = try ParleyServer.withInjectableFaults(.forTests())
        defer { server.shutdown() }
        let client = try await NativeClient.connect(server)
        faults.failAllAppends()
        #expect(try await client.publishAcknowledged("lost", to: "r")["error"] != nil)
        let down = try await operationsRequest(server, "GET", "/readyz")
        #expect(down.status == 503)
        #expect(down.body == "not ready\nstore: the last write failed: disk full (injected failure)\n")
        #expect(try await operationsRequest(server, "GET", "/healthz").status == 200, "the process still serves")
        faults.stopFailing()
        #expect(try await client.publishAcknowledged("back", to: "r")["offset"] == 1)
        // An answer is given again for half a second.
        try await eventually("/readyz ready again", timeout: 5, pollMillis: 100) {
            try await operationsRequest(server, "GET", "/readyz").status == 200
        }
    }

    /// A check that never answers makes `/readyz` say so after its timeout instead of hanging.
    @Test func aStuckCheckIsReportedAfterItsTimeout() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        // A check that waits until the test ends (ending the stream lets it go, so nothing
        // is left suspended for ever).
        let (stuck, release) = AsyncStream<Void>.makeStream()
        defer { release.finish() }
        server.addReadinessCheck("redis") {
            for await _ in stuck {}
            return nil
        }
        let started = Date()
        let response = try await operationsRequest(server, "GET", "/readyz")
        #expect(response.status == 503)
        #expect(response.body.contains("redis: no answer within 2000 ms"))
        #expect(response.body.contains("store: ok"))
        #expect(Date().timeIntervalSince(started) < 4.5)
    }

    /// During a graceful shutdown `/readyz` turns 503 first, for the drain time, while the
    /// server still serves everything else; then clients are told to go and it stops.
    @Test func readinessTurns503DuringTheDrainWhileEverythingElseServes() async throws {
        let server = try startTestServer { $0.drainMillis = 1_500; $0.shutdownGraceMillis = 1_000 }
        let watcher = try await NativeClient.connect(server)
        _ = try await watcher.subscribe("r")
        let publisher = try await NativeClient.connect(server)
        let started = Date()
        let stopping = BackgroundThread { server.shutdown() }
        try await eventually("/readyz says 503") {
            (try? await operationsRequest(server, "GET", "/readyz"))?.status == 503
        }
        let draining = try await operationsRequest(server, "GET", "/readyz")
        #expect(draining.body == "not ready\nshutting down: draining connections before the server stops\n")
        #expect(metric(server.metricsText(), "parley_draining") == 1)
        // Still serving: probes, new connections, publishes.
        #expect(try await operationsRequest(server, "GET", "/healthz").status == 200)
        let late = try await NativeClient.connect(server)
        #expect(try await late.publishAcknowledged("still here", to: "r")["offset"] == 1)
        #expect(try await watcher.next { $0["type"] == "publish" }["message"] == "still here")
        _ = publisher
        // Then the goodbye (1001) and the end, after the drain and within the grace.
        #expect(try await watcher.ws.closeCode(timeout: 10) == 1001)
        _ = try stopping.result(timeout: 10)
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 1.4, "stopped before the drain time: \(elapsed) s")
        #expect(elapsed < 6, "took \(elapsed) s")
    }
}
