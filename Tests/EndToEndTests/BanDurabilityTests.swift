import Foundation
import ParleyCore
@testable import ParleyServer
import ParleyTestSupport
import Testing

/// Bans over real sockets: what needs a restart on the same data directory, or a real proxy
/// peer address (in-process admin tests are in Tests/ParleyServerTests/AdminInProcessTests.swift).
@Suite(.serialized) struct BanDurabilityTests {
    static func start(_ adjust: (inout ServerConfiguration) -> Void = { _ in }) throws -> ParleyServer {
        try startTestServer { c in
            c.adminToken = adminToken
            adjust(&c)
        }
    }

    /// Behind a trusted proxy, the client is the one its RFC 7239 `Forwarded` header names:
    /// an address ban holds on it, and a neighbour is not caught by it.
    @Test func aBanHoldsOnTheClientATrustedProxyNamesInForwarded() async throws {
        let server = try Self.start { $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!] }
        defer { server.shutdown() }
        _ = try await admin(server, "POST", "/bans", body: #"{"ip": "203.0.113.77", "seconds": 60}"#, expect: 201)
        let banned = try await httpRequest(port: server.httpPort, "GET", "/healthz", headers: [("Forwarded", #"for="203.0.113.77:5000";proto=https"#)])
        #expect(banned.status == 403 && banned.body.contains("banned"), "\(banned.status) \(banned.body)")
        let neighbour = try await httpRequest(port: server.httpPort, "GET", "/healthz", headers: [("Forwarded", "for=203.0.113.78")])
        #expect(neighbour.status == 200)
    }

    /// Bans are kept in the data directory: a restarted (or crashed) server still has them.
    @Test func aBanOutlivesARestart() async throws {
        let first = try Self.start()
        let directory = first.configuration.dataDirectory
        let added = try await admin(first, "POST", "/bans", body: #"{"name": "mallory", "seconds": 600, "reason": "spam"}"#, expect: 201)
        first.shutdown(drain: .zero, timeout: .seconds(1))
        let second = try Self.start { $0.dataDirectory = directory }
        defer { second.shutdown() }
        let bans = try await admin(second, "GET", "/bans")
        #expect(bans["bans"]?.arrayValue?.first?["id"] == added["ban"]?["id"])
        #expect(bans["bans"]?.arrayValue?.first?["reason"] == "spam")
        let again = try TestSocket(port: second.linePort)
        try again.send("iam:mallory\n")
        #expect(try await again.nextLine() == "error: banned from this server; bye")
    }
}
