import Foundation
import Testing
import ParleyCore
@testable import ParleyServer
import ParleyTestSupport

/// Per-address budgets hold across the nodes of a cluster, not once per node: an address
/// that spent its publish bytes through one node is refused by the others too.
@Suite(.serialized) struct ClusterBudgetTests {
    @Test func anAddressSpendsItsPublishBytesOnceAcrossNodes() async throws {
        // 1,000 bytes a second, a burst of 4,000.
        let (a, b) = try ClusterTests.twoNodes { $0.publishBytesPerIPPerSecond = 1_000 }
        defer { a.shutdown(); b.shutdown() }
        let big = "\"" + String(repeating: "x", count: 3_000) + "\""
        // Through A: the first fits, the second goes into debt, the third is refused.
        #expect(try await httpRequest(port: a.httpPort, "POST", "/demo/r/publish", json: big).status == 200)
        #expect(try await httpRequest(port: a.httpPort, "POST", "/demo/r/publish", json: big).status == 200)
        #expect(try await httpRequest(port: a.httpPort, "POST", "/demo/r/publish", json: big).status == 429)
        // Through B, which has spent nothing of it itself: its first publish goes (a node
        // decides on its own bucket), and once the nodes' reports are in (every 250 ms) B
        // refuses too, though small publishes at 100 bytes a second are well inside what B
        // alone would allow. Before the buckets were shared B took them all.
        #expect(try await httpRequest(port: b.httpPort, "POST", "/demo/r/publish", json: big).status == 200)
        var refusal = ""
        try await eventually("node B refuses the address", timeout: 3, pollMillis: 100) {
            let response = try await httpRequest(port: b.httpPort, "POST", "/demo/r/publish", json: "\"hi\"")
            if response.status == 429 { refusal = response.body }
            return response.status == 429
        }
        #expect(refusal.hasPrefix("publish byte budget of your address spent"), "\(refusal)")
        let metrics = try await httpRequest(port: b.httpPort, "GET", "/metrics")
        #expect(metrics.body.contains("parley_cluster_budget_reports_total "))
        #expect(!metrics.body.contains("parley_cluster_budget_reports_total 0\n"))
    }
}
