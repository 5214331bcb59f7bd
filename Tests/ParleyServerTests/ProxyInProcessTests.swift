import Foundation
import ParleyCore
import ParleyIO
import ParleyServer
import ParleyTestSupport
import Testing

/// Per-IP limits behind a reverse proxy (`--trusted-proxies`, `--line-proxy-protocol`) and
/// IPv6 clients grouped by their /64, in-process: every in-memory connection comes from
/// 127.0.0.1, the proxy.
@Suite struct ProxyInProcessTests {
    /// A REST request from the proxy's address (127.0.0.1), naming `forwardedFor`.
    private func get(_ server: InProcessServer, forwardedFor: String?) async throws -> Int {
        let headers = forwardedFor.map { [("X-Forwarded-For", $0)] } ?? []
        return try await server.request("GET", "/demo/stats", headers: headers).status
    }

    @Test func restRateCountsEachForwardedClientBehindATrustedProxy() async throws {
        let server = try InProcessServer {
            $0.restRatePerSecond = 0.01; $0.restBurst = 2
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.0/8")!]
        }
        defer { server.stop() }
        #expect(try await get(server, forwardedFor: "203.0.113.1") == 200)
        #expect(try await get(server, forwardedFor: "198.51.100.9, 203.0.113.1") == 200)  // a client's own entry is not trusted
        #expect(try await get(server, forwardedFor: "203.0.113.1") == 429)
        // Another client behind the same proxy has its own budget.
        #expect(try await get(server, forwardedFor: "203.0.113.2") == 200)
        #expect(try await get(server, forwardedFor: "203.0.113.2") == 200)
        #expect(try await get(server, forwardedFor: "203.0.113.2") == 429)
    }

    @Test func forwardedForFromAnUntrustedPeerIsIgnored() async throws {
        let server = try InProcessServer { $0.restRatePerSecond = 0.01; $0.restBurst = 2 }
        defer { server.stop() }
        #expect(try await get(server, forwardedFor: "203.0.113.1") == 200)
        #expect(try await get(server, forwardedFor: "203.0.113.2") == 200)
        #expect(try await get(server, forwardedFor: "203.0.113.3") == 429)
    }

    @Test func ipv6ClientsOfOneSlash64ShareTheirLimits() async throws {
        let server = try InProcessServer {
            $0.restRatePerSecond = 0.01; $0.restBurst = 2
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!]
        }
        defer { server.stop() }
        #expect(try await get(server, forwardedFor: "2001:db8:1:2::1") == 200)
        #expect(try await get(server, forwardedFor: "2001:db8:1:2:aaaa:bbbb:cccc:dddd") == 200)
        #expect(try await get(server, forwardedFor: "2001:db8:1:2::99") == 429)  // a fresh address of the same /64
        #expect(try await get(server, forwardedFor: "2001:db8:1:3::1") == 200)   // the next /64 is someone else
    }

    @Test func lineConnectionsFromATrustedProxyCountTheirClientsFromThePROXYHeader() async throws {
        let server = try InProcessServer {
            $0.maxConnectionsPerIP = 1
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!]
            $0.lineProxyProtocol = true
        }
        defer { server.stop() }
        let alice = try await server.line()
        alice.send("PROXY TCP4 203.0.113.1 127.0.0.1 40001 8081\r\niam:alice\n")
        _ = try await alice.readLine(until: { $0 == "alice has joined" })
        // A second client through the same proxy: under its own address, so admitted.
        let bob = try await server.line()
        bob.send(ProxyHeaderBytes.v2(source: [203, 0, 113, 2], port: 40002) + Array("iam:bob\n".utf8))
        _ = try await bob.readLine(until: { $0 == "bob has joined" })
        // Alice's address again: over its limit of one.
        let again = try await server.line()
        again.send("PROXY TCP4 203.0.113.1 127.0.0.1 40003 8081\r\niam:alice2\n")
        #expect(try await again.readLine() == "error: too many connections from your address (limit 1)")
        try await again.waitForClose()
        // From a trusted proxy the header is required: a connection without one is closed.
        let bare = try await server.line()
        bare.send("iam:eve\n")
        #expect(try await bare.readLine() == "error: not a PROXY header; bye")
        try await bare.waitForClose()
    }

    @Test func aWebSocketUpgradeThroughAProxyCountsItsClientPerIP() async throws {
        let server = try InProcessServer {
            $0.maxConnectionsPerIP = 1
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!]
        }
        defer { server.stop() }
        func upgrade(from client: String) async throws -> InMemoryPeer {
            let socket = try await server.http()
            socket.send("GET /v3/websocket HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-Forwarded-For: \(client)\r\n\r\n")
            return socket
        }
        let first = try await upgrade(from: "203.0.113.1")
        #expect(try await first.readLine().hasPrefix("HTTP/1.1 101"))
        let again = try await upgrade(from: "203.0.113.1")
        #expect(try await again.readLine().hasPrefix("HTTP/1.1 503"))
        try await again.waitForClose()
        let other = try await upgrade(from: "203.0.113.2")
        #expect(try await other.readLine().hasPrefix("HTTP/1.1 101"))
        _ = first
    }

    @Test func withoutLineProxyProtocolAHeaderIsJustALine() async throws {
        let server = try InProcessServer { $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!] }
        defer { server.stop() }
        let socket = try await server.line()
        socket.send("PROXY TCP4 203.0.113.1 127.0.0.1 40001 8081\r\niam:carol\n")
        _ = try await socket.readLine(until: { $0 == "carol has joined" })
    }
}

enum ProxyHeaderBytes {
    static func v2(source: [UInt8], port: UInt16) -> [UInt8] {
        [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x21, 0x11, 0x00, 12]
            + source + [127, 0, 0, 1, UInt8(port >> 8), UInt8(port & 0xFF), 0x1F, 0x91]
    }
}
