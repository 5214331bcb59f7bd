import Foundation
import ParleyCore
@testable import ParleyServer
import ParleyTestSupport
import Testing

/// The diagnostic endpoints for the protocols' conformance suites (`make conformance` runs
/// the suites themselves): a bare Engine.IO 4 echo server, and the Socket.IO test
/// application. Both are off by default.
@Suite(.serialized) struct SocketIODiagnosticEndpointTests {
    static func echoServer() throws -> ParleyServer {
        try startTestServer {
            $0.engineIOEchoPath = "/engine.io/"
            $0.socketIOPingIntervalMillis = 300
            $0.socketIOPingTimeoutMillis = 200
        }
    }

    @Test func offByDefault() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        #expect(try httpRequest(port: server.httpPort, "GET", "/engine.io/?EIO=4&transport=polling").status == 404)
        // SocketChat, not the test application, is on /socket.io/.
        let ws = try socketIOClient(server)
        try ws.sendText("42[\"message\",1]")
        try ws.sendText("421[\"message-with-ack\",1]")
        #expect(try ws.receiveText().hasPrefix("431[{\"error\":\"unknown event"))
    }

    @Test func engineIOEchoOverPollingWithHandshakeErrors() throws {
        let server = try Self.echoServer()
        defer { server.shutdown() }
        let port = server.httpPort
        let open = try httpRequest(port: port, "GET", "/engine.io/?EIO=4&transport=polling")
        #expect(open.status == 200)
        let handshake = try JSONParser.parse(String(open.body.dropFirst()))
        #expect(handshake.objectValue?.keys.sorted() == ["maxPayload", "pingInterval", "pingTimeout", "sid", "upgrades"])
        #expect(handshake["pingInterval"] == 300 && handshake["pingTimeout"] == 200)
        let sid = try #require(handshake["sid"]?.stringValue)
        let query = "/engine.io/?EIO=4&transport=polling&sid=\(sid)"
        #expect(try httpRequest(port: port, "POST", query, body: Array("4hello\u{1e}bAQIDBA==".utf8)).body == "ok")
        #expect(try httpRequest(port: port, "GET", query).body == "4hello\u{1e}bAQIDBA==")
        // Handshake errors: 400 with {"code","message"}; EIO is required (4 only).
        for (target, method, code) in [("/engine.io/?transport=polling", "GET", 5), ("/engine.io/?EIO=abc&transport=polling", "GET", 5),
                                       ("/engine.io/?EIO=3&transport=polling", "GET", 5), ("/engine.io/?EIO=4", "GET", 0),
                                       ("/engine.io/?EIO=4&transport=abc", "GET", 0), ("/engine.io/?EIO=4&transport=polling", "POST", 2),
                                       ("/engine.io/?EIO=4&transport=polling", "PUT", 2)] {
            let response = try httpRequest(port: port, method, target, body: method == "GET" ? nil : [])
            #expect(response.status == 400, "\(method) \(target)")
            #expect(try JSONParser.parse(response.body)["code"]?.intValue == code, "\(method) \(target): \(response.body)")
        }
        // An invalid packet closes the session.
        let bad = try PollingClient.open(port: port, version: 4, path: "/engine.io/")
        #expect(try bad.post(["abc"]).status == 400)
        #expect(try bad.get().status == 400)
        // A close packet: a waiting GET gets a noop, then the session is gone.
        let closing = try PollingClient.open(port: port, version: 4, path: "/engine.io/")
        let held = try HeldRequest(port: port, "GET", "/engine.io/?\(closing.query)")
        try server.settle()
        try closing.post(["1"])
        #expect(try held.response().body == "6")
        #expect(try closing.get().status == 400)
        // Duplicate polls: the first gets the close packet, the second 400, then the session is gone.
        let twice = try PollingClient.open(port: port, version: 4, path: "/engine.io/")
        let first = try HeldRequest(port: port, "GET", "/engine.io/?\(twice.query)")
        try server.settle()
        #expect(try twice.get().status == 400)
        #expect(try first.response().body == "1")
        #expect(try twice.get().status == 400)
        // Heartbeat: the server pings; without a pong the session ends.
        let beat = try PollingClient.open(port: port, version: 4, path: "/engine.io/")
        for _ in 0..<3 {
            #expect(try beat.poll() == ["2"])
            try beat.post(["3"])
        }
        let silent = try PollingClient.open(port: port, version: 4, path: "/engine.io/")
        try eventuallyBlocking("the silent session timed out") { try silent.get(timeout: 2).status == 400 }
    }

    @Test func engineIOEchoOverWebSocketAndUpgrade() throws {
        let server = try Self.echoServer()
        defer { server.shutdown() }
        let port = server.httpPort
        let ws = try TestWebSocket(port: port, path: "/engine.io/?EIO=4&transport=websocket")
        let open = try JSONParser.parse(String(try ws.receiveText().dropFirst()))
        #expect(open["upgrades"] == [])
        try ws.sendText("4hello")
        #expect(try ws.receiveText() == "4hello")
        try ws.sendBinary([1, 2, 3, 4])
        #expect(try ws.receiveBinary() == [1, 2, 3, 4])
        try ws.sendText("abc")
        #expect(try ws.waitForClose() != nil)
        // The upgrade; afterwards polling and a second WebSocket with the same sid are refused.
        let client = try PollingClient.open(port: port, version: 4, path: "/engine.io/")
        let upgrade = try TestWebSocket(port: port, path: "/engine.io/?EIO=4&transport=websocket&sid=\(client.sid)")
        try upgrade.sendText("2probe")
        #expect(try upgrade.receiveText() == "3probe")
        #expect(try client.get().body == "6")
        try upgrade.sendText("5")
        try upgrade.sendText("4hello")
        // The server pings every 300 ms here; the upgrade's settle time (up to 250 ms after
        // the `5`) lets a ping come between the echoes.
        #expect(try upgrade.receiveText(until: { $0 != "2" }) == "4hello")
        #expect(try client.get().status == 400)
        let second = try TestWebSocket(port: port, path: "/engine.io/?EIO=4&transport=websocket&sid=\(client.sid)")
        #expect(try second.waitForClose() != nil)
        try upgrade.sendText("4still")
        #expect(try upgrade.receiveText(until: { $0 != "2" }) == "4still")
        // A WebSocket close packet ends the session.
        try upgrade.sendText("1")
        #expect(try upgrade.waitForClose() != nil)
    }

    @Test func socketIOTestApplication() throws {
        let server = try startTestServer {
            $0.socketIOTestApp = true
            $0.socketIOConnectTimeoutMillis = 300
            $0.socketIOPingIntervalMillis = 10_000
        }
        defer { server.shutdown() }
        let port = server.httpPort
        // Socket.IO v5 only: no EIO, or EIO=3, is refused.
        #expect(try httpRequest(port: port, "GET", "/socket.io/?transport=polling").status == 400)
        func connected(_ connect: String) throws -> (TestWebSocket, String, String) {
            let ws = try TestWebSocket(port: port, path: "/socket.io/?EIO=4&transport=websocket")
            _ = try ws.receiveText()
            try ws.sendText(connect)
            return (ws, try ws.receiveText(), try ws.receiveText())
        }
        let (root, reply, auth) = try connected("40")
        #expect(try JSONParser.parse(String(reply.dropFirst(2))).objectValue?.keys.sorted() == ["sid"])
        #expect(auth == "42[\"auth\",{}]")
        let (_, customReply, customAuth) = try connected("40/custom,{\"token\":\"abc\"}")
        #expect(customReply.hasPrefix("40/custom,{\"sid\":"))
        #expect(customAuth == "42/custom,[\"auth\",{\"token\":\"abc\"}]")
        try root.sendText("42[\"message\",1,\"2\",{\"3\":[true]}]")
        #expect(try root.receiveText() == "42[\"message-back\",1,\"2\",{\"3\":[true]}]")
        try root.sendText("42456[\"message-with-ack\",1,\"2\",{\"3\":[false]}]")
        #expect(try root.receiveText() == "43456[1,\"2\",{\"3\":[false]}]")
        try root.sendText("452-[\"message\",{\"_placeholder\":true,\"num\":0},{\"_placeholder\":true,\"num\":1}]")
        try root.sendBinary([1, 2, 3])
        try root.sendBinary([4, 5, 6])
        #expect(try root.receiveText() == "452-[\"message-back\",{\"_placeholder\":true,\"num\":0},{\"_placeholder\":true,\"num\":1}]")
        #expect(try root.receiveBinary() == [1, 2, 3])
        #expect(try root.receiveBinary() == [4, 5, 6])
        // Disconnecting the namespace sends nothing; messages to it afterwards close the connection.
        let (other, _, _) = try connected("40")
        try other.sendText("40/custom")
        _ = try other.receiveText()
        _ = try other.receiveText()
        try other.sendText("41/custom")
        try other.sendText("42[\"message\",\"to main\"]")
        #expect(try other.receiveText() == "42[\"message-back\",\"to main\"]")
        // An unknown namespace is refused; an invalid packet closes the connection.
        let stranger = try TestWebSocket(port: port, path: "/socket.io/?EIO=4&transport=websocket")
        _ = try stranger.receiveText()
        try stranger.sendText("40/random")
        #expect(try stranger.receiveText() == "44/random,{\"message\":\"Invalid namespace\"}")
        for garbage in ["4abc", "42{}", "42abc[\"message-with-ack\",1]"] {
            let (victim, _, _) = try connected("40")
            try victim.sendText(garbage)
            #expect(try victim.waitForClose() != nil, "\(garbage)")
        }
        // No CONNECT: closed after the connect timeout (counted as a handshake timeout).
        let silent = try TestWebSocket(port: port, path: "/socket.io/?EIO=4&transport=websocket")
        _ = try silent.receiveText()
        #expect(try silent.waitForClose(timeout: 3) != nil)
        #expect(server.core.limits.count(.handshakeTimeout) >= 1)
    }
}
