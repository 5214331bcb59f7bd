import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

@Suite(.serialized) struct NativeLimitsTests {
    @Test func publishRateIsLimited() throws {
        let server = try startTestServer { $0.nativeRatePerSecond = 1; $0.nativeBurst = 2 }
        defer { server.shutdown() }
        let client = try NativeClient.connect(server)
        for n in 1...3 { try client.send(["type": "publish", "room": "r", "message": "x", "callback": .number(JSONNumber(n))]) }
        // Receipts come once stored, so the immediate refusal may overtake them.
        var replies: [Int: JSONValue] = [:]
        while replies.count < 3 {
            let reply = try client.next { $0["callback"] != nil }
            replies[try #require(reply["callback"]?.intValue)] = reply
        }
        #expect(replies[1]?["error"] == nil)
        #expect(replies[1]?["offset"] == 1)
        #expect(replies[2]?["error"] == nil)
        #expect(replies[2]?["offset"] == 2)
        #expect(replies[3]?["error"] == "rate limit exceeded")
    }

    @Test func roomsPerConnectionAreLimited() throws {
        let server = try startTestServer { $0.nativeMaxRooms = 2 }
        defer { server.shutdown() }
        let client = try NativeClient.connect(server)
        #expect(try client.subscribe("a") == ["callback": 1])
        #expect(try client.subscribe("b") == ["callback": 2])
        #expect(try client.subscribe("c")["error"]?.stringValue?.contains("too many rooms") == true)
        // Subscribing again to a room it is in is fine.
        #expect(try client.subscribe("a") == ["callback": 4])
    }

    @Test func silentPeerIsPingedThenClosed() throws {
        let server = try startTestServer { $0.webSocketPingIntervalMillis = 100 }
        defer { server.shutdown() }
        let lively = try NativeClient.connect(server)
        let silent = try TestWebSocket(port: server.httpPort)
        // The lively client reads (and so answers pings) for a while and stays connected.
        #expect(lively.ws.nothingArrives(within: 0.6))
        // The silent one never read, never ponged: closed without ceremony.
        #expect(silent.socket.waitForClose(timeout: 3))
        try lively.send(["type": "subscribe", "room": "r", "callback": 1])
        #expect(try lively.next() == ["callback": 1])
    }

    @Test func httpRequestAndIdleTimeouts() throws {
        let server = try startTestServer { $0.httpRequestTimeoutMillis = 200; $0.httpIdleTimeoutMillis = 300 }
        defer { server.shutdown() }
        let trickle = try TestSocket(port: server.httpPort)
        try trickle.send("GET /demo/stats HTTP/1.1\r\nHost: x\r\n")
        #expect(try trickle.readLine().hasPrefix("HTTP/1.1 408"))
        #expect(trickle.waitForClose(timeout: 3))
        let idle = try TestSocket(port: server.httpPort)
        #expect(idle.waitForClose(timeout: 3))
    }

    @Test func oversizeRESTBodyIs413() throws {
        let server = try startTestServer { $0.httpMaxBodyBytes = 100 }
        defer { server.shutdown() }
        let response = try httpRequest(port: server.httpPort, "POST", "/demo/r/publish", body: "\"" + String(repeating: "x", count: 200) + "\"")
        #expect(response.status == 413)
    }
}
