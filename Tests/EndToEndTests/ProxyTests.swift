import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// Per-IP limits behind a reverse proxy (`--trusted-proxies`, `--line-proxy-protocol`) and
/// IPv6 clients grouped by their /64. The test process plays the proxy from 127.0.0.1.
@Suite(.serialized) struct ProxyTests {
    /// A REST request, awaited without blocking a thread of the test pool (the server answers
    /// REST requests from a task, on that same pool).
    private func get(_ server: ParleyServer, forwardedFor: String?) async throws -> Int {
        let headers = forwardedFor.map { [("X-Forwarded-For", $0)] } ?? []
        return try await httpRequest(port: server.httpPort, "GET", "/demo/stats", headers: headers).status
    }

    @Test func restRateCountsEachForwardedClientBehindATrustedProxy() async throws {
        let server = try startTestServer {
            $0.restRatePerSecond = 0.01; $0.restBurst = 2
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.0/8")!]
        }
        defer { server.shutdown() }
        #expect(try await get(server, forwardedFor: "203.0.113.1") == 200)
        #expect(try await get(server, forwardedFor: "198.51.100.9, 203.0.113.1") == 200)  // a client's own entry is not trusted
        #expect(try await get(server, forwardedFor: "203.0.113.1") == 429)
        // Another client behind the same proxy has its own budget.
        #expect(try await get(server, forwardedFor: "203.0.113.2") == 200)
        #expect(try await get(server, forwardedFor: "203.0.113.2") == 200)
        #expect(try await get(server, forwardedFor: "203.0.113.2") == 429)
    }

    @Test func forwardedForFromAnUntrustedPeerIsIgnored() async throws {
        let server = try startTestServer { $0.restRatePerSecond = 0.01; $0.restBurst = 2 }
        defer { server.shutdown() }
        #expect(try await get(server, forwardedFor: "203.0.113.1") == 200)
        #expect(try await get(server, forwardedFor: "203.0.113.2") == 200)
        #expect(try await get(server, forwardedFor: "203.0.113.3") == 429)
    }

    @Test func ipv6ClientsOfOneSlash64ShareTheirLimits() async throws {
        let server = try startTestServer {
            $0.restRatePerSecond = 0.01; $0.restBurst = 2
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!]
        }
        defer { server.shutdown() }
        #expect(try await get(server, forwardedFor: "2001:db8:1:2::1") == 200)
        #expect(try await get(server, forwardedFor: "2001:db8:1:2:aaaa:bbbb:cccc:dddd") == 200)
        #expect(try await get(server, forwardedFor: "2001:db8:1:2::99") == 429)  // a fresh address of the same /64
        #expect(try await get(server, forwardedFor: "2001:db8:1:3::1") == 200)   // the next /64 is someone else
    }

    @Test func lineConnectionsFromATrustedProxyCountTheirClientsFromThePROXYHeader() async throws {
        let server = try startTestServer {
            $0.maxConnectionsPerIP = 1
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!]
            $0.lineProxyProtocol = true
        }
        defer { server.shutdown() }
        let alice = try TestSocket(port: server.linePort)
        try alice.send("PROXY TCP4 203.0.113.1 127.0.0.1 40001 8081\r\niam:alice\n")
        _ = try alice.readLine(until: { $0 == "alice has joined" })
        // A second client through the same proxy: under its own address, so admitted.
        let bob = try TestSocket(port: server.linePort)
        try bob.send(ProxyHeaderBytes.v2(source: [203, 0, 113, 2], port: 40002) + Array("iam:bob\n".utf8))
        _ = try bob.readLine(until: { $0 == "bob has joined" })
        // Alice's address again: over its limit of one.
        let again = try TestSocket(port: server.linePort)
        try again.send("PROXY TCP4 203.0.113.1 127.0.0.1 40003 8081\r\niam:alice2\n")
        #expect(try await again.nextLine() == "error: too many connections from your address (limit 1)")
        #expect(await again.closed(within: 3))
        // From a trusted proxy the header is required: a connection without one is closed.
        let bare = try TestSocket(port: server.linePort)
        try bare.send("iam:eve\n")
        #expect(try await bare.nextLine() == "error: not a PROXY header; bye")
        #expect(await bare.closed(within: 3))
    }

    @Test func aWebSocketUpgradeThroughAProxyCountsItsClientPerIP() async throws {
        let server = try startTestServer {
            $0.maxConnectionsPerIP = 1
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!]
        }
        defer { server.shutdown() }
        func upgrade(from client: String) throws -> TestSocket {
            let socket = try TestSocket(port: server.httpPort)
            try socket.send("GET /v3/websocket HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-Forwarded-For: \(client)\r\n\r\n")
            return socket
        }
        let first = try upgrade(from: "203.0.113.1")
        #expect(try await first.nextLine().hasPrefix("HTTP/1.1 101"))
        let again = try upgrade(from: "203.0.113.1")
        #expect(try await again.nextLine().hasPrefix("HTTP/1.1 503"))
        #expect(await again.closed(within: 3))
        let other = try upgrade(from: "203.0.113.2")
        #expect(try await other.nextLine().hasPrefix("HTTP/1.1 101"))
        _ = first
    }

    @Test func withoutLineProxyProtocolAHeaderIsJustALine() async throws {
        let server = try startTestServer { $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!] }
        defer { server.shutdown() }
        let socket = try TestSocket(port: server.linePort)
        try socket.send("PROXY TCP4 203.0.113.1 127.0.0.1 40001 8081\r\niam:carol\n")
        _ = try socket.readLine(until: { $0 == "carol has joined" })
    }
}

enum ProxyHeaderBytes {
    static func v2(source: [UInt8], port: UInt16) -> [UInt8] {
        [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x21, 0x11, 0x00, 12]
            + source + [127, 0, 0, 1, UInt8(port >> 8), UInt8(port & 0xFF), 0x1F, 0x91]
    }
}
