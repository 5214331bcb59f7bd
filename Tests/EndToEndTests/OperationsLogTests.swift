import Foundation
import ParleyCore
import ParleyLog
import ParleyServer
import ParleyTestSupport
import Testing

/// What `parley serve` logs: start and stop, listeners, the store, connections (debug),
/// refused credentials and breaches (info, rate-limited), store errors (error); never a
/// message body or a token.
@Suite(.serialized) struct OperationsLogTests {
    static func authConfiguration() -> ServerConfiguration {
        .forTests { c in
            c.channels = [ChannelSettings(id: "acme", secret: AuthFixtures.secret, requireAuth: true)]
            c.openChannels = true
            c.lobby = RoomKey(channel: "acme", room: "observable-room")
        }
    }

    /// Open mode (any channel, no authentication, /metrics open) bound to an address other
    /// than loopback starts, but never silently: a warning at start says what is open.
    @Test func openModeOnAPublicAddressIsAWarningAtStart() throws {
        let cases: [(host: String, open: Bool, metricsToken: String?, warns: Bool)] = [
            ("0.0.0.0", true, nil, true), ("0.0.0.0", true, metricsToken, true),
            ("127.0.0.1", true, nil, false), ("0.0.0.0", false, nil, false),
        ]
        for c in cases {
            let (logger, memory) = memoryLogger(level: .info)
            let server = try ParleyServer(configuration: .forTests {
                $0.host = c.host
                $0.openChannels = c.open
                $0.metricsToken = c.metricsToken
            }, logger: logger)
            server.shutdown()
            let warnings = memory.records.filter { $0.message == "open mode on a public address" }
            #expect(warnings.count == (c.warns ? 1 : 0), "\(c)")
            #expect(warnings.allSatisfy { $0.level == .warn })
            guard c.warns else { continue }
            let line = try #require(memory.lines.first { $0.contains("open mode on a public address") })
            #expect(line.contains("address=0.0.0.0") && line.contains("any channel can be used by anyone, without authentication"), "\(line)")
            #expect(line.contains("/metrics is open") == (c.metricsToken == nil), "\(line)")
            #expect(line.contains("--config") && line.contains("127.0.0.1"), "it says what to do: \(line)")
        }
        // Loopback is any of these; everything else is public.
        for host in ["127.0.0.1", "127.1.2.3", "localhost", "::1"] {
            #expect(ServerConfiguration.forTests { $0.host = host }.openModeExposure == nil, "\(host)")
        }
        for host in ["0.0.0.0", "::", "192.168.1.5", "chat.example.com", "127.example.com"] {
            #expect(ServerConfiguration.forTests { $0.host = host }.openModeExposure != nil, "\(host)")
        }
    }

    @Test func aRefusedTokenIsLoggedWithoutTheToken() async throws {
        let (logger, memory) = memoryLogger(level: .info)
        let server = try ParleyServer(configuration: Self.authConfiguration(), logger: logger)
        defer { server.shutdown() }
        let (client, _) = try await NativeClient.handshake(server, channel: "acme")
        let forged = AuthFixtures.jwt(AuthFixtures.payload(client: client.clientID), secret: "a-guessed-secret")
        #expect(try await client.authenticate(forged)["error"]?.stringValue == "token signature does not match")
        // The same token on the REST door and the line door.
        let rest = try await operationsRequest(server, "POST", "/acme/r/publish", token: forged, body: "\"hello\"")
        #expect(rest.status == 401)
        let line = try TestSocket(port: server.linePort)
        let lineToken = AuthFixtures.jwt(AuthFixtures.payload(client: nil), secret: "a-guessed-secret")
        try line.send("auth:\(lineToken)\n")
        #expect(try await line.nextLine().hasPrefix("error: authentication failed"))

        var refusals: [String] = []
        try await eventually("three refusals logged") {
            refusals = memory.lines.filter { $0.contains("authentication failed") }
            return refusals.count >= 3
        }
        #expect(refusals.contains { $0.contains("door=native") && $0.contains("channel=acme") && $0.contains("token signature does not match") })
        #expect(refusals.contains { $0.contains("door=http") && $0.contains("channel=acme") })
        #expect(refusals.contains { $0.contains("door=line") && $0.contains("remote=127.0.0.1:") })
        // Not the token, not any of its three parts, not the secret, not the message body.
        for text in memory.lines {
            for part in (forged.split(separator: ".") + lineToken.split(separator: ".")) where part.count > 8 {
                #expect(!text.contains(part), "a token leaked into the log: \(text)")
            }
            #expect(!text.contains(AuthFixtures.secret) && !text.contains("a-guessed-secret") && !text.contains("hello"))
        }
        #expect(memory.records.filter { $0.message == "authentication failed" }.allSatisfy { $0.level == .info })
    }

    @Test func aStoreFailureIsLoggedAtErrorAndAFloodIsSummedUp() async throws {
        let (logger, memory) = memoryLogger(level: .info)
        let (server, faults) = try ParleyServer.withInjectableFaults(.forTests { $0.nativeRatePerSecond = 1_000_000; $0.nativeBurst = 1_000_000 },
                                                                     logger: logger)
        defer { server.shutdown() }
        let client = try await NativeClient.connect(server)
        faults.failAllAppends()
        let reply = try await client.publishAcknowledged("secret words", to: "full")
        #expect(reply["error"]?.stringValue?.contains("disk full") == true)
        let failure = try #require(memory.records.first { $0.message == "store append failed" })
        #expect(failure.level == .error)
        #expect(failure.metadata["room"] == "demo/full")
        #expect(failure.metadata["error"] == "disk full (injected failure)")
        // A flood of failures: a few lines, then one summary.
        for n in 1...60 { try client.publish(.string("lost \(n)"), to: "full") }
        try await eventually("the flood's summary", timeout: 10) {
            memory.records.contains { $0.message.contains("more \"store error\" lines suppressed") }
        }
        #expect(memory.records.filter { $0.message == "store append failed" }.count <= 10)
        #expect(!memory.lines.contains { $0.contains("secret words") || $0.contains("lost ") }, "message bodies are never logged")
    }

    @Test func connectionsAreLoggedAtDebugWithDoorAddressAndCloseCode() async throws {
        let (logger, memory) = memoryLogger(level: .debug)
        let server = try ParleyServer(configuration: .forTests { $0.webSocketMaxMessageSize = 1024 }, logger: logger)
        defer { server.shutdown() }
        let big = try await NativeClient.connect(server)
        try big.publish(.string(String(repeating: "x", count: 2_000)), to: "r")
        #expect(try await big.ws.closeCode() == 1009)
        let line = try server.lineClientForLogTest(name: "carol")
        line.abort()
        try await eventually("both closes logged") {
            memory.lines.contains { $0.contains("connection closed door=native") && $0.contains("code=1009") }
                && memory.lines.contains { $0.contains("connection closed door=line") && $0.contains("reason=peer_closed") }
        }
        #expect(memory.lines.contains { $0.contains("connection opened door=http remote=127.0.0.1:") })
        #expect(memory.lines.contains { $0.contains("connection opened door=line remote=127.0.0.1:") })
        #expect(memory.records.filter { $0.message.hasPrefix("connection ") }.allSatisfy { $0.level == .debug })
    }

    @Test func startAndStopListenersAndTheStoreAreLogged() throws {
        let (logger, memory) = memoryLogger(level: .info)
        let server = try ParleyServer(configuration: .forTests(), logger: logger)
        server.shutdown()
        let messages = memory.records.map(\.message)
        for expected in ["starting", "store created", "listening", "ready", "shutting down", "stopped"] {
            #expect(messages.contains(expected), "no \"\(expected)\" in \(messages)")
        }
        let listeners = memory.records.filter { $0.message == "listening" }.compactMap { $0.metadata["door"]?.description }
        #expect(listeners == ["http", "line"])
        #expect(memory.records.first { $0.message == "store created" }?.metadata["schema"] == 5, "SQLiteMessageStore.schemaVersion")
    }

    @Test func limitBreachesAreLoggedAtInfoAndRateLimited() async throws {
        let (logger, memory) = memoryLogger(level: .info)
        let server = try ParleyServer(configuration: .forTests { $0.lineMaxLength = 16 }, logger: logger)
        defer { server.shutdown() }
        let line = try TestSocket(port: server.linePort)
        let long = String(repeating: "z", count: 40) + "\n"
        try line.send(String(repeating: long, count: 200))
        var errors = 0
        while errors < 200 { if try await line.nextLine().hasPrefix("error: line too long") { errors += 1 } }
        let breaches = memory.records.filter { $0.message == "limit breached" }
        #expect(breaches.count <= 10 && breaches.count >= 1)
        #expect(breaches.allSatisfy { $0.level == .info && $0.metadata["limit"] == "message_size" })
        try await eventually("the summary of the rest", timeout: 10) {
            memory.records.contains { $0.message.contains("more \"limit message_size\" lines suppressed") }
        }
    }
}

extension ParleyServer {
    /// A line client that has joined the lobby as `name`.
    func lineClientForLogTest(name: String) throws -> TestSocket {
        let socket = try TestSocket(port: linePort)
        try socket.send("iam:\(name)\n")
        _ = try socket.readLine(until: { $0 == "\(name) has joined" })
        return socket
    }
}
