import Foundation
import ParleyCore
import ParleyIO
@testable import ParleyServer
import ParleyTestSupport
import Testing

/// One HTTP request (`Connection: close`) with a bearer token and a JSON body when given.
func operationsRequest(_ server: InProcessServer, _ method: String, _ target: String, token: String? = nil,
                       body: String? = nil) async throws -> HTTPTestResponse {
    try await server.request(method, target, headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [], json: body ?? "")
}

/// The value of one sample of a Prometheus text (`name` or `name{labels}`, exactly).
func metric(_ text: String, _ sample: String) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(sample + " ") {
        return Double(line.dropFirst(sample.count + 1))
    }
    return nil
}

let metricsToken = "metrics-token-0123456789abcdef"

/// `/healthz`, `/readyz` and `/metrics` after a scripted conversation, in-process: every
/// number the script implies (the store's failures, stuck checks and the drain stay in
/// Tests/EndToEndTests/OperationsHealthTests).
@Suite struct OperationsInProcessTests {
    @Test func healthAndReadinessAnswerPlainText() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let health = try await operationsRequest(server, "GET", "/healthz")
        #expect(health.status == 200 && health.body == "ok\n")
        let ready = try await operationsRequest(server, "GET", "/readyz")
        #expect(ready.status == 200)
        #expect(ready.body == "ready\nstore: ok\n")
        #expect(try await operationsRequest(server, "POST", "/readyz").status == 405)
    }

    /// `/readyz` needs no token and is not rate-limited: requests at once share one
    /// evaluation of the checks, and an answer is given again for half a second.
    @Test func readinessRequestsShareOneEvaluation() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let evaluations = Locked(0)
        server.server.addReadinessCheck("counted") {
            evaluations.withLock { $0 += 1 }
            try? await Task.sleep(for: .milliseconds(50))
            return nil
        }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 { group.addTask { try await operationsRequest(server, "GET", "/readyz").status } }
            for try await status in group { #expect(status == 200) }
        }
        // One evaluation each (two when this machine is slow enough to spread the requests
        // over the reuse time), not twenty.
        #expect(evaluations.value <= 2, "\(evaluations.value) evaluations")
        #expect(try await operationsRequest(server, "GET", "/readyz").body == "ready\nstore: ok\ncounted: ok\n")
        let before = evaluations.value
        try await Task.sleep(for: .milliseconds(Readiness.reuseMillis + 100))
        #expect(try await operationsRequest(server, "GET", "/readyz").status == 200)
        #expect(evaluations.value == before + 1, "a stale answer is not given again")
    }

    @Test func metricsAfterAScriptedConversation() async throws {
        let server = try InProcessServer { c in
            var slow = ChannelSettings(id: "slow")
            slow.publishRate = 0.5  // burst 1
            c.channels = [slow]
            c.openChannels = true
            c.nativeRatePerSecond = 1_000_000; c.nativeBurst = 1_000_000
        }
        defer { server.stop() }
        let alice = try await server.native(clientData: ["name": "alice"])
        let bob = try await server.native(clientData: ["name": "bob"])
        _ = try await alice.subscribe("r")
        _ = try await bob.subscribe("r")
        for n in 1...3 { #expect(try await alice.publishAcknowledged(.string("m\(n)"), to: "r")["offset"]?.intValue == n) }
        #expect(try await operationsRequest(server, "POST", "/demo/r/publish", body: "\"from rest\"").status == 200)
        // Alice's own pushes went by while she waited for her receipts; bob counts his.
        var seen = 0
        while seen < 4 { if try await bob.next()["type"] == "publish" { seen += 1 } }
        let carol = try await server.lineClient(name: "carol")
        let dave = try await server.lineClient(name: "dave")
        _ = try await carol.readLine(until: { $0 == "dave has joined" })
        carol.send("msg:one\nmsg:two\n")
        for socket in [carol, dave] { _ = try await socket.readLine(until: { $0 == "carol:two" }) }
        let (eve, _) = try await server.nativeHandshake(channel: "slow")
        #expect(try await eve.publishAcknowledged("first", to: "s")["offset"] == 1)
        #expect(try await eve.publishAcknowledged("second", to: "s")["error"] == "rate limit exceeded")

        // Every loop has written what it had (alice may live on the other one).
        try await eventually("all deliveries counted") {
            metric(server.server.metricsText(), #"parley_messages_delivered_total{door="native"}"#) == 8
        }
        let response = try await operationsRequest(server, "GET", "/metrics")
        #expect(response.status == 200)
        let text = response.body
        #expect(metric(text, #"parley_messages_received_total{door="native"}"#) == 4)
        #expect(metric(text, #"parley_messages_received_total{door="line"}"#) == 2)
        #expect(metric(text, #"parley_messages_received_total{door="http"}"#) == 1)
        #expect(metric(text, #"parley_publishes_refused_total{reason="rate_limited"}"#) == 1)
        #expect(metric(text, #"parley_publishes_refused_total{reason="store_failed"}"#) == 0)
        // alice and bob each got the four messages of `r`; carol got dave's join and both her
        // lines, dave both lines (the joiner's own join comes with its snapshot).
        #expect(metric(text, #"parley_messages_delivered_total{door="native"}"#) == 8)
        #expect(metric(text, #"parley_messages_delivered_total{door="line"}"#) == 5)
        #expect(metric(text, #"parley_connections{door="native"}"#) == 3)
        #expect(metric(text, #"parley_connections{door="line"}"#) == 2)
        #expect(metric(text, #"parley_connections{door="http"}"#) == 1, "the /metrics request itself")
        #expect(metric(text, "parley_open_connections") == 6)
        #expect(metric(text, #"parley_connections_accepted_total{door="line"}"#) == 2)
        #expect((metric(text, #"parley_connections_accepted_total{door="http"}"#) ?? 0) >= 5)
        #expect(metric(text, "parley_identified_clients") == 5)
        // Seven messages were stored (r: 4, the lobby: 2, s: 1), each timed once.
        #expect(metric(text, "parley_store_commit_seconds_count") == 7)
        #expect(metric(text, #"parley_store_commit_seconds_bucket{le="+Inf"}"#) == 7)
        #expect(metric(text, "parley_store_queue_depth") == 0)
        #expect(metric(text, "parley_store_errors_total") == 0)
        // Each stored message with subscribers is timed once per loop that has some.
        let fanOut = try #require(metric(text, "parley_fanout_latency_seconds_count"))
        #expect((6...12).contains(Int(fanOut)), "\(fanOut)")
        #expect(metric(text, #"parley_fanout_latency_seconds_bucket{le="+Inf"}"#) == fanOut)
        #expect(metric(text, "parley_room_members") == 4)
        #expect((metric(text, "parley_rooms_in_memory") ?? 0) >= 2)
        #expect((metric(text, "parley_received_bytes_total") ?? 0) > 500)
        #expect((metric(text, "parley_sent_bytes_total") ?? 0) > 500)
        #expect((metric(text, "process_resident_memory_bytes") ?? 0) > 1_000_000)
        #expect((metric(text, "process_open_fds") ?? 0) > 5)
        #expect((metric(text, "process_max_fds") ?? 0) > 0)
        #expect(metric(text, "parley_uptime_seconds") != nil)
        #expect(metric(text, "parley_draining") == 0)
        #expect(text.contains("parley_build_info{version=\"\(BuildInfo.version)\",commit=\""))
        // The kept lines every test and doc relies on.
        #expect(text.contains("parley_limit_breaches_total{limit=\"message_rate\"} 1\n"))
        // Every family has its HELP and TYPE.
        let families = Set(text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { String($0.prefix { $0 != "{" && $0 != " " }) })
        for family in families {
            let base = ["_bucket", "_sum", "_count"].reduce(family) { $0.hasSuffix($1) ? String($0.dropLast($1.count)) : $0 }
            #expect(text.contains("# TYPE \(base) "), "\(family) has no TYPE line")
        }

        alice.peer.reset()
        try await eventually("alice's connection counted out") {
            metric(server.server.metricsText(), #"parley_connections{door="native"}"#) == 2
        }
    }

    /// With `metrics.token`, `/metrics` needs it and is then not rate-limited; without one it
    /// is open and counts against the REST rate limit like any request.
    @Test func aProtectedEndpointNeedsItsTokenAndSkipsTheRateLimit() async throws {
        let protected = try InProcessServer { $0.metricsToken = metricsToken; $0.restRatePerSecond = 1; $0.restBurst = 2 }
        defer { protected.stop() }
        #expect(try await operationsRequest(protected, "GET", "/metrics").status == 401)
        #expect(try await operationsRequest(protected, "GET", "/metrics", token: "wrong-token-0123456789").status == 401)
        for _ in 1...6 { #expect(try await operationsRequest(protected, "GET", "/metrics", token: metricsToken).status == 200) }
        // Wrong tokens are rate-limited (the two above used the burst).
        #expect(try await operationsRequest(protected, "GET", "/metrics").status == 429)

        let open = try InProcessServer { $0.restRatePerSecond = 1; $0.restBurst = 2 }
        defer { open.stop() }
        #expect(try await operationsRequest(open, "GET", "/metrics").status == 200)
        #expect(try await operationsRequest(open, "GET", "/metrics").status == 200)
        #expect(try await operationsRequest(open, "GET", "/metrics").status == 429)
        // Probes are never rate-limited.
        for _ in 1...5 { #expect(try await operationsRequest(open, "GET", "/healthz").status == 200) }
    }

    /// A metrics provider's lines are part of every answer (cluster mode adds its own).
    @Test func providersAddTheirLines() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        server.server.addMetrics { out in
            out.family("parley_redis_connected", "gauge", help: "Whether the Redis connection is up.")
            out.sample("parley_redis_connected", 1)
        }
        let text = try await operationsRequest(server, "GET", "/metrics").body
        #expect(text.contains("# TYPE parley_redis_connected gauge\nparley_redis_connected 1\n"))
    }
}
