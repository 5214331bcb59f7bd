import Foundation
import ParleyCore
@testable import ParleyServer
import ParleyTestSupport
import Testing

/// A Socket.IO client over a plain WebSocket, connected to `/` (and identified when
/// `nickname` is given).
func socketIOClient(_ server: ParleyServer, nickname: String? = nil, version: Int = 4) throws -> TestWebSocket {
    let ws = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=\(version)&transport=websocket")
    #expect(try ws.receiveText().hasPrefix("0{"))
    if version == 4 { try ws.sendText("40") }
    #expect(try ws.receiveText().hasPrefix("40"))
    if let nickname {
        try ws.sendText("42[\"connectUser\",\"\(nickname)\"]")
        _ = try ws.receiveText(until: { eventArguments($0, "userConnectUpdate")?.first?["nickname"] == .string(nickname) })
    }
    return ws
}

/// What a client sees of the Socket.IO door's answers: acks, never an event named `error`.
@Suite(.serialized) struct SocketIOAnswerTests {
    @Test func unknownEventsGetAnAckErrorOrAreIgnoredCountedAndLoggedOncePerConnection() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let ws = try socketIOClient(server, nickname: "una")
        for _ in 0..<3 { try ws.sendText("42[\"noSuchEvent\",1]") }
        try ws.sendText("42[\"chatMessage\"]")  // known, but without its arguments
        try ws.sendText("427[\"noSuchEvent\"]")
        let ack = try ws.receiveText(until: { $0.hasPrefix("43") })
        #expect(ack.hasPrefix("437[{\"error\":\"unknown event \\\"noSuchEvent\\\""), "\(ack)")
        let counters = server.socketIOShared.counters
        #expect(counters.count(.unknownEvent) == 3)
        #expect(counters.count(.refused) == 1)
        #expect(server.socketIOShared.log.count == 1, "logged once per connection: \(server.socketIOShared.log.recent)")
        #expect(server.socketIOShared.log.recent.first?.contains("unknown event") == true)
        let other = try socketIOClient(server)
        try other.sendText("42[\"alsoUnknown\"]")
        try other.sendText("428[\"alsoUnknown\"]")
        _ = try other.receiveText(until: { $0.hasPrefix("438") })
        #expect(server.socketIOShared.log.count == 2)
        // Nothing named `error` ever came, and /metrics has the counts.
        try ws.sendText("429[\"chatMessage\",\"una\",\"sync\"]")
        #expect(try ws.receiveText(until: { $0.hasPrefix("439") }) == "439[]")
        let metrics = try httpRequest(port: server.httpPort, "GET", "/metrics")
        #expect(metrics.body.contains("parley_socketio_ignored_events_total{reason=\"unknown_event\"} 4\n"), "\(metrics.body)")
        #expect(metrics.body.contains("parley_socketio_ignored_events_total{reason=\"refused\"} 1\n"))
    }

    @Test func rateLimitedMessagesAreDroppedAndCountedOrAckedWithAnError() throws {
        let server = try startTestServer {
            $0.nativeRatePerSecond = 1
            $0.nativeBurst = 2
            $0.rateAbuseFactor = 1_000
        }
        defer { server.shutdown() }
        let ws = try socketIOClient(server, nickname: "rita")
        var texts: [String] = []
        for n in 0..<5 { try ws.sendText("42[\"chatMessage\",\"rita\",\"m\(n)\"]") }
        try ws.sendText("4250[\"startType\",\"rita\"]")
        let refused = try ws.receiveText(until: { text in texts.append(text); return text.hasPrefix("4350") })
        #expect(refused == "4350[{\"error\":\"rate limit exceeded\"}]")
        #expect(!texts.contains { eventArguments($0, "error") != nil }, "\(texts)")
        #expect(server.socketIOShared.counters.count(.rateLimited) >= 3)
        #expect(texts.filter { eventArguments($0, "newChatMessage") != nil }.count <= 2)
    }

    /// Every acknowledgement means stored: a chatMessage is acked once the store has it, with
    /// an error when it could not be stored, and what was not stored reaches nobody.
    @Test func chatMessageAcksSayStoredAndFailuresAreErrorsThatDeliverNothing() throws {
        let (server, faults) = try ParleyServer.withInjectableFaults(.forTests())
        defer { server.shutdown() }
        let watcher = try socketIOClient(server, nickname: "watcher")
        let writer = try socketIOClient(server, nickname: "writer")
        _ = try watcher.receiveText(until: { eventArguments($0, "userConnectUpdate")?.first?["nickname"] == "writer" })
        try writer.sendText("421[\"chatMessage\",\"writer\",\"kept\"]")
        #expect(try writer.receiveText(until: { $0.hasPrefix("431") }) == "431[]")
        #expect(eventArguments(try watcher.receiveText(until: { eventArguments($0, "newChatMessage") != nil }), "newChatMessage")?[1] == "kept")
        faults.failAllAppends()
        try writer.sendText("422[\"chatMessage\",\"writer\",\"lost\"]")
        let failed = try writer.receiveText(until: { $0.hasPrefix("432") })
        #expect(failed.hasPrefix("432[{\"error\":\"not stored: disk full"), "\(failed)")
        try writer.sendText("42[\"chatMessage\",\"writer\",\"lost too\"]")
        try eventuallyBlocking("the unacked failure counted") { server.socketIOShared.counters.count(.refused) == 1 }
        faults.stopFailing()
        try writer.sendText("423[\"chatMessage\",\"writer\",\"back\"]")
        #expect(try writer.receiveText(until: { $0.hasPrefix("433") }) == "433[]")
        // The watcher's next message is the one after the failures.
        let next = try watcher.receiveText(until: { eventArguments($0, "newChatMessage") != nil })
        #expect(eventArguments(next, "newChatMessage")?[1] == "back", "\(next)")
    }

    @Test func theAckWaitsForTheStore() throws {
        let store = GatedStore()
        let server = try ParleyServer(configuration: .forTests()) { _ in store }
        defer { server.shutdown() }
        let writer = try socketIOClient(server, nickname: "gated")
        try writer.sendText("425[\"chatMessage\",\"gated\",\"held\"]")
        #expect(throws: (any Error).self) { try writer.receiveText(timeout: 0.3, until: { $0.hasPrefix("435") }) }
        store.release()
        #expect(try writer.receiveText(until: { $0.hasPrefix("435") }) == "435[]")
    }
}

/// Long-polling sessions under the connection policy: counted, capped, expired, rate-limited.
@Suite(.serialized) struct SocketIOPollingPolicyTests {
    @Test func pollingSessionsCountAgainstMaxConnectionsAndAnUpgradeIsCountedOnce() throws {
        // A handshake needs its HTTP connection's place and the new session's: 3 sessions fit
        // under 4 connections, a fourth does not.
        let server = try startTestServer { $0.maxConnections = 4 }
        defer { server.shutdown() }
        // Each request is on a connection of its own (Connection: close), so only the sessions
        // stay counted.
        let a = try PollingClient.open(port: server.httpPort, version: 4)
        let b = try PollingClient.open(port: server.httpPort, version: 4)
        try eventuallyBlocking("two sessions counted") { server.openConnectionCount == 2 }
        _ = try PollingClient.open(port: server.httpPort, version: 3)
        try eventuallyBlocking("three sessions counted") { server.openConnectionCount == 3 }
        let refused = try httpRequest(port: server.httpPort, "GET", "/socket.io/?EIO=4&transport=polling")
        #expect(refused.status == 503, "\(refused)")
        #expect(refused.body.contains("server is full"))
        // The refused request's HTTP connection held a place until the server closed it.
        try eventuallyBlocking("the refused request's place given back") { server.openConnectionCount == 3 }
        // A session that ends gives its place back.
        let bye = try a.post(["1"])
        #expect(bye.status == 200, "\(bye)")
        try eventuallyBlocking("a's place given back") { server.openConnectionCount == 2 }
        // An upgrade: the WebSocket connection's place counts the session; its polling place goes.
        let ws = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket&sid=\(b.sid)")
        try ws.sendText("2probe")
        #expect(try ws.receiveText() == "3probe")
        try ws.sendText("5")
        try eventuallyBlocking("the upgraded session counted once") {
            server.openConnectionCount == 2 && server.socketIOShared.pollingSessions.load(ordering: .relaxed) == 1
        }
        ws.abort()
        try eventuallyBlocking("its place given back with its WebSocket") { server.openConnectionCount == 1 }
    }

    @Test func pollingSessionsCountPerIPAndAreCapped() throws {
        let server = try startTestServer { $0.maxConnectionsPerIP = 3; $0.socketIOMaxPollingSessions = 1_000 }
        defer { server.shutdown() }
        _ = try PollingClient.open(port: server.httpPort, version: 4)
        _ = try PollingClient.open(port: server.httpPort, version: 4)
        try eventuallyBlocking("both counted") { server.openConnectionCount == 2 }
        let refused = try httpRequest(port: server.httpPort, "GET", "/socket.io/?EIO=4&transport=polling")
        #expect(refused.status == 503)
        #expect(server.core.limits.count(.maxConnectionsPerIP) >= 1)
        let capped = try startTestServer { $0.socketIOMaxPollingSessions = 2 }
        defer { capped.shutdown() }
        _ = try PollingClient.open(port: capped.httpPort, version: 4)
        _ = try PollingClient.open(port: capped.httpPort, version: 4)
        let over = try httpRequest(port: capped.httpPort, "GET", "/socket.io/?EIO=4&transport=polling")
        #expect(over.status == 503)
        #expect(over.body.contains("too many long-polling sessions"))
        #expect(capped.core.limits.count(.pollingSessions) == 1)
        // WebSocket-only sessions are not polling sessions.
        _ = try socketIOClient(capped)
    }

    /// A client that keeps its session alive with EIO3 pings but never polls is gone: the
    /// session ends after pingInterval + pingTimeout without a GET.
    @Test func abandonedPollingSessionsExpire() throws {
        let server = try startTestServer {
            $0.socketIOPingIntervalMillis = 200
            $0.socketIOPingTimeoutMillis = 200
            $0.socketIOPollingRatePerSecond = 1_000_000
        }
        defer { server.shutdown() }
        let client = try PollingClient.open(port: server.httpPort, version: 3)
        let started = Date()
        try eventuallyBlocking("the session without polls ended") { try client.post(["2"]).status == 400 }
        #expect(Date().timeIntervalSince(started) < 3)
        try eventuallyBlocking("its place given back") { server.openConnectionCount == 0 }
        // One that polls lives on past the allowance: 2 s of allowance here, so a busy machine
        // cannot put that much time between two of the client's polls; it polls for 3 s.
        let lenient = try startTestServer {
            $0.socketIOPingIntervalMillis = 1_000
            $0.socketIOPingTimeoutMillis = 1_000
            $0.socketIOPollingRatePerSecond = 1_000_000
        }
        defer { lenient.shutdown() }
        let polling = try PollingClient.open(port: lenient.httpPort, version: 3)
        let deadline = Date().addingTimeInterval(3)
        while Date() < deadline {
            try polling.post(["2"])
            #expect(try polling.poll(timeout: 2) == ["3"])
        }
        #expect(try polling.post(["2"]).status == 200)
    }

    @Test func pollingRequestsAreRateLimitedPerAddressBeforeRouting() throws {
        let server = try startTestServer { $0.socketIOPollingRatePerSecond = 2 }
        defer { server.shutdown() }
        var statuses: [Int] = []
        for _ in 0..<10 {
            statuses.append(try httpRequest(port: server.httpPort, "GET", "/socket.io/?EIO=4&transport=polling&sid=none").status)
        }
        #expect(statuses.prefix(4).allSatisfy { $0 == 400 }, "\(statuses)")
        #expect(statuses.contains(429))
        #expect(server.core.limits.count(.pollingRate) >= 1)
    }
}

/// Publisher back-pressure on the Socket.IO door: a sender to a room whose deliveries are
/// behind is slowed (WebSocket: not read; polling: its POST answered late); other rooms go on.
@Suite(.serialized) struct SocketIOBackPressureTests {
    /// The index of the loop that owns Engine.IO session `sid`.
    static func loopIndex(of sid: String, in server: ParleyServer) throws -> Int? {
        let found = Locked<Int?>(nil)
        for loop in server.group.loops {
            let done = DispatchSemaphore(value: 0)
            loop.execute {
                if server.socketIOShared.loops[loop].sessions[sid] != nil { found.withLock { $0 = loop.index } }
                done.signal()
            }
            guard done.wait(timeout: .now() + 5) == .success else { throw TimeoutError(what: "a loop", seconds: 5) }
        }
        return found.value
    }

    /// A WebSocket Socket.IO client whose session lives on a loop other than `avoid`.
    static func client(elsewhereThan avoid: Int, _ server: ParleyServer) throws -> (TestWebSocket, String) {
        for _ in 0..<16 {
            let ws = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
            let sid = try #require(try JSONParser.parse(String(try ws.receiveText().dropFirst()))["sid"]?.stringValue)
            if try loopIndex(of: sid, in: server) != avoid {
                try ws.sendText("40")
                _ = try ws.receiveText()
                return (ws, sid)
            }
            ws.abort()
        }
        throw TestSocket.Failure("no connection landed on another loop")
    }

    @Test func aSlowRoomStopsReadingItsWebSocketPublisherUntilItCatchesUp() throws {
        let server = try startTestServer { $0.roomBacklog = 4; $0.nativeRatePerSecond = 1_000_000; $0.nativeBurst = 1_000_000 }
        defer { server.shutdown() }
        let listener = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
        let listenerSID = try #require(try JSONParser.parse(String(try listener.receiveText().dropFirst()))["sid"]?.stringValue)
        try listener.sendText("40")
        _ = try listener.receiveText()
        try listener.sendText("42[\"connectUser\",\"listener\"]")
        _ = try listener.receiveText(until: { eventArguments($0, "userConnectUpdate") != nil })
        let slow = try #require(try Self.loopIndex(of: listenerSID, in: server))
        let (publisher, _) = try Self.client(elsewhereThan: slow, server)
        // The listener's loop is held: the lobby's deliveries to it pile up.
        let release = DispatchSemaphore(value: 0)
        server.group.loops[slow].execute { _ = release.wait(timeout: .now() + 20) }
        for n in 0..<40 {
            try publisher.sendText("42[\"chatMessage\",\"pub\",\"m\(n)\"]")
        }
        try eventuallyBlocking("the publisher throttled") { server.core.limits.count(.publisherThrottled) >= 1 }
        release.signal()
        var received: [String] = []
        while received.count < 40 {
            let text = try listener.receiveText(timeout: 10, until: { eventArguments($0, "newChatMessage") != nil })
            received.append(eventArguments(text, "newChatMessage")?[1].stringValue ?? "")
        }
        #expect(received == (0..<40).map { "m\($0)" }, "every message, in order, once the room caught up")
    }

    @Test func aSlowRoomHoldsItsPollingPublishersPostAnswer() throws {
        let server = try startTestServer { $0.roomBacklog = 4; $0.nativeRatePerSecond = 1_000_000; $0.nativeBurst = 1_000_000 }
        defer { server.shutdown() }
        let listener = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
        let listenerSID = try #require(try JSONParser.parse(String(try listener.receiveText().dropFirst()))["sid"]?.stringValue)
        try listener.sendText("40")
        _ = try listener.receiveText()
        try listener.sendText("42[\"connectUser\",\"listener\"]")
        _ = try listener.receiveText(until: { eventArguments($0, "userConnectUpdate") != nil })
        let slow = try #require(try Self.loopIndex(of: listenerSID, in: server))
        var publisher: PollingClient?
        for _ in 0..<16 where publisher == nil {
            let candidate = try PollingClient.open(port: server.httpPort, version: 4)
            if try Self.loopIndex(of: candidate.sid, in: server) != slow { publisher = candidate }
        }
        let client = try #require(publisher)
        try client.post(["40"])
        // Keep-alive connections made now (the listener may live on the loop about to be
        // held); the one on a loop that is not held answers a preflight at once.
        func preflight(_ connection: HTTPTestClient, timeout: Double) -> Bool {
            guard (try? connection.send("OPTIONS", "/socket.io/?EIO=4&transport=polling", close: false)) != nil,
                  (try? connection.nextResponse(timeout: timeout))?.status == 204 else { return false }
            connection.socket.clearBuffer()
            return true
        }
        let candidates = try (0..<6).map { _ in try HTTPTestClient(port: server.httpPort) }
        for candidate in candidates { #expect(preflight(candidate, timeout: 5)) }
        let release = DispatchSemaphore(value: 0)
        server.group.loops[slow].execute { _ = release.wait(timeout: .now() + 20) }
        let body = (0..<20).map { "42[\"chatMessage\",\"pub\",\"p\($0)\"]" }.joined(separator: "\u{1e}")
        let live = candidates.first { preflight($0, timeout: 0.5) }
        let post = try #require(live)
        try post.send("POST", "/socket.io/?\(client.query)", body: Array(body.utf8), close: false)
        try eventuallyBlocking("the publisher throttled") { server.core.limits.count(.publisherThrottled) >= 1 }
        // (The held loop would block `settle`; a short look must do.)
        #expect(try post.socket.fill(timeout: 0.3) && post.socket.buffered.isEmpty, "no answer while the room is behind")
        release.signal()
        #expect(try post.nextResponse(timeout: 10).status == 200)
        var received = 0
        while received < 20 {
            _ = try listener.receiveText(timeout: 10, until: { eventArguments($0, "newChatMessage") != nil })
            received += 1
        }
    }
}

extension ParleyServer {
    /// The Socket.IO door's shared state (sessions, counters, log, each loop's Engine.IO state).
    var socketIOShared: SocketIOShared {
        guard let door = core.doors.all.lazy.compactMap({ $0 as? SocketIODoor }).first else { fatalError("no Socket.IO door") }
        return door.shared
    }
}
