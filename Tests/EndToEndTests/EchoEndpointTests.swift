import Foundation
import ParleyServer
import ParleyTestSupport
import ParleyWebSocket
import Testing

/// The diagnostic echo endpoint (`--ws-echo-path`): off by default, and when on, a plain
/// echo through the native door's codec, limits and deflate negotiation.
@Suite(.serialized) struct EchoEndpointTests {
    private static let upgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

    @Test func offByDefault() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        #expect(server.configuration.webSocketEchoPath == nil)
        let upgrade = try httpRequest(port: server.httpPort, "", "", raw: "GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\n" + Self.upgrade)
        #expect(upgrade.status == 404)
        #expect(try httpRequest(port: server.httpPort, "GET", "/echo").status == 404)
    }

    @Test func echoesTextAndBinary() throws {
        let server = try startTestServer { $0.webSocketEchoPath = "/echo" }
        defer { server.shutdown() }
        let ws = try TestWebSocket(port: server.httpPort, path: "/echo")
        #expect(!ws.usesDeflate)
        try ws.sendText("hello, échö ✓")
        #expect(try ws.receiveText() == "hello, échö ✓")
        try ws.sendBinary([0, 1, 2, 0xFF, 0xFE])
        #expect(try ws.receiveBinary() == [0, 1, 2, 0xFF, 0xFE])
        try ws.sendText("")
        #expect(try ws.receiveText() == "")
        try ws.close()
        #expect(try ws.waitForClose() == 1000)
        // A plain GET on the echo path is told to upgrade, like the native door.
        #expect(try httpRequest(port: server.httpPort, "GET", "/echo").status == 426)
    }

    @Test func echoesCompressedAndHonoursTheMessageLimit() throws {
        let server = try startTestServer {
            $0.webSocketEchoPath = "/echo"
            $0.webSocketMaxMessageSize = 4096
        }
        defer { server.shutdown() }
        let ws = try TestWebSocket(port: server.httpPort, path: "/echo", deflate: true)
        #expect(ws.usesDeflate)
        let long = String(repeating: "parley ", count: 500)
        try ws.sendText(long)
        #expect(try ws.receiveText() == long)
        let bytes = (0..<3000).map { UInt8($0 & 0xFF) }
        try ws.sendBinary(bytes)
        #expect(try ws.receiveBinary() == bytes)
        try ws.sendBinary([UInt8](repeating: 7, count: 5000))
        #expect(try ws.waitForClose() == 1009)
    }

    /// Every door gives a closed connection's place back at the gate, the per-IP count
    /// included (the echo door once gave back only the total, so an address that had used it
    /// a few times was refused for good).
    @Test func closedEchoConnectionsGiveTheirPlaceBack() throws {
        let server = try startTestServer {
            $0.webSocketEchoPath = "/echo"
            $0.maxConnectionsPerIP = 3
        }
        defer { server.shutdown() }
        for round in 0..<3 {
            let ws = try TestWebSocket(port: server.httpPort, path: "/echo")
            try ws.sendText("round \(round)")
            #expect(try ws.receiveText() == "round \(round)")
            try ws.close()
            #expect(try ws.waitForClose() == 1000)
        }
        // The server has released all three once only the /metrics request itself is open.
        try eventuallyBlocking("one open connection", timeout: 5, pollMillis: 20) {
            let metrics = try httpRequest(port: server.httpPort, "GET", "/metrics").body
            let open = Int(metrics.split(separator: "\n").first { $0.hasPrefix("parley_open_connections ") }?
                .split(separator: " ").last ?? "") ?? -1
            return open == 1
        }
        // Three at once from this address: all admitted.
        let sockets = try (0..<3).map { _ in try TestWebSocket(port: server.httpPort, path: "/echo") }
        for (index, ws) in sockets.enumerated() {
            try ws.sendText("again \(index)")
            #expect(try ws.receiveText() == "again \(index)")
        }
    }

    @Test func flagsParse() throws {
        let parsed = try #require(try ServerConfiguration.parse(
            arguments: ["--ws-echo-path", "/echo", "--max-message-size=16777216"], environment: [:]))
        #expect(parsed.webSocketEchoPath == "/echo")
        #expect(parsed.webSocketMaxMessageSize == 16 << 20)
        let fromEnv = try #require(try ServerConfiguration.parse(arguments: [], environment: ["PARLEY_WS_ECHO_PATH": "/diag"]))
        #expect(fromEnv.webSocketEchoPath == "/diag")
        #expect(ServerConfiguration().webSocketMaxMessageSize == 1 << 20)
        #expect(throws: ServerConfiguration.UsageError.self) {
            try ServerConfiguration.parse(arguments: ["--ws-echo-path", "echo"], environment: [:])
        }
    }
}
