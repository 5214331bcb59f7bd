import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

@Suite(.serialized) struct NativeLimitsTests {
    @Test func publishRateIsLimited() async throws {
        let server = try startTestServer { $0.nativeRatePerSecond = 1; $0.nativeBurst = 2 }
        defer { server.shutdown() }
        let client = try await NativeClient.connect(server)
        for n in 1...3 { try client.send(["type": "publish", "room": "r", "message": "x", "callback": .number(JSONNumber(n))]) }
        // Receipts come once stored, so the immediate refusal may overtake them.
        var replies: [Int: JSONValue] = [:]
        while replies.count < 3 {
            let reply = try await client.next { $0["callback"] != nil }
            replies[try #require(reply["callback"]?.intValue)] = reply
        }
        #expect(replies[1]?["error"] == nil)
        #expect(replies[1]?["offset"] == 1)
        #expect(replies[2]?["error"] == nil)
        #expect(replies[2]?["offset"] == 2)
        #expect(replies[3]?["error"] == "rate limit exceeded")
    }

    /// The server takes a manual clock: the rate bucket refills when the test moves it, not
    /// when real time passes.
    @Test func theRateRefillsByTheServersClock() async throws {
        let clock = ManualClock()
        let server = try ParleyServer(configuration: .forTests { $0.nativeRatePerSecond = 1; $0.nativeBurst = 1 },
                                      clock: clock, store: { $0 })
        defer { server.shutdown() }
        let client = try await NativeClient.connect(server)
        func publish(_ n: Int) async throws -> JSONValue {
            try client.send(["type": "publish", "room": "r", "message": "x", "callback": .number(JSONNumber(n))])
            return try await client.next { $0["callback"] == .number(JSONNumber(n)) }
        }
        #expect(try await publish(1)["error"] == nil)
        #expect(try await publish(2)["error"] == "rate limit exceeded")
        #expect(try await publish(3)["error"] == "rate limit exceeded")
        clock.advance(millis: 1_000)
        let stored = try await publish(4)
        #expect(stored["error"] == nil)
        #expect(stored["offset"] == 2)
    }

    @Test func roomsPerConnectionAreLimited() async throws {
        let server = try startTestServer { $0.nativeMaxRooms = 2 }
        defer { server.shutdown() }
        let client = try await NativeClient.connect(server)
        #expect(try await client.subscribe("a") == ["callback": 1])
        #expect(try await client.subscribe("b") == ["callback": 2])
        #expect(try await client.subscribe("c")["error"]?.stringValue?.contains("too many rooms") == true)
        // Subscribing again to a room it is in is fine.
        #expect(try await client.subscribe("a") == ["callback": 4])
    }

    @Test func silentPeerIsPingedThenClosed() async throws {
        let server = try startTestServer { $0.webSocketPingIntervalMillis = 300 }
        defer { server.shutdown() }
        let lively = try await NativeClient.connect(server)
        let silent = try TestWebSocket(port: server.httpPort)
        // The lively client keeps reading (and so answers pings) the whole time the silent one
        // is being given up on, and stays connected.
        // It reads on a thread of its own: a busy test pool must not make it miss the pings.
        let livelyWS = lively.ws
        let stop = Locked(false)
        let livelyReads = BackgroundThread { () -> (texts: [String], closed: Bool) in
            var texts: [String] = []
            while !stop.value && !livelyWS.isClosedForReading {
                if let text = try? livelyWS.receiveText(timeout: 0.05) { texts.append(text) }
            }
            return (texts, livelyWS.isClosedForReading)
        }
        // The silent one never read, never ponged: closed without ceremony.
        let silentClosed = await silent.socket.closed(within: 2.8)
        stop.withLock { $0 = true }
        #expect(silentClosed)
        let (texts, livelyClosed) = try livelyReads.result(timeout: 10)
        #expect(texts.isEmpty && !livelyClosed, "the lively client got \(texts), closed: \(livelyClosed)")
        // Still there: the reply to a request made now is the next thing it gets.
        try lively.send(["type": "subscribe", "room": "r", "callback": 1])
        #expect(try await lively.next() == ["callback": 1])
    }

    @Test func httpRequestAndIdleTimeouts() async throws {
        let server = try startTestServer { $0.httpRequestTimeoutMillis = 200; $0.httpIdleTimeoutMillis = 300 }
        defer { server.shutdown() }
        let trickle = try TestSocket(port: server.httpPort)
        try trickle.send("GET /demo/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        #expect(try await trickle.nextLine().hasPrefix("HTTP/1.1 408"))
        #expect(await trickle.closed(within: 3))
        let idle = try TestSocket(port: server.httpPort)
        #expect(await idle.closed(within: 3))
    }

    @Test func oversizeRESTBodyIs413() async throws {
        let server = try startTestServer { $0.httpMaxBodyBytes = 100 }
        defer { server.shutdown() }
        let response = try await httpRequest(port: server.httpPort, "POST", "/demo/r/publish", json: "\"" + String(repeating: "x", count: 200) + "\"")
        #expect(response.status == 413)
    }
}
