import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// Names, `client_data` and what reaches terminals (docs/security.md, "Identity and history").
@Suite(.serialized) struct IdentityLimitsTests {
    // MARK: one name rule for every door

    @Test func nativeNameWithControlCharactersIsRefusedAndTheReplyStillCarriesAClientID() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let client = try NativeClient(port: server.httpPort)
        for name in ["\u{1B}[2Jboss", "admin\u{202E}gpj.exe", "   "] {
            try client.send(NativeClient.handshake(channel: "demo", clientData: ["name": .string(name)]))
            let reply = try await client.next()
            #expect(reply["error"]?.stringValue?.hasPrefix("client_data.name:") == true, "\(name.debugDescription): \(reply)")
            // The Scaledrone Swift SDK force-casts client_id, error or not.
            #expect(reply["client_id"]?.stringValue?.isEmpty == false)
            #expect(reply["callback"] == 0)
        }
        // The connection stays usable: a good handshake goes through.
        try client.send(NativeClient.handshake(channel: "demo", clientData: ["name": "boss", "color": "#112233"]))
        try client.accept(handshakeReply: try await client.next())
        #expect(try await client.subscribe("observable-room")["error"] == nil)
    }

    @Test func lineNameWithBidiOverrideIsRefused() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let socket = try TestSocket(port: server.server.linePort)
        try socket.send("iam:admin\u{202E}gpj.exe\n")
        #expect(try socket.readLine().hasPrefix("error: a name must not contain"))
        try socket.send("iam:" + String(repeating: "x", count: 65) + "\n")
        #expect(try socket.readLine().hasPrefix("error: name too long"))
        try socket.send([UInt8]("iam:bad".utf8) + [0xFF, 0xFE] + [10])
        #expect(try socket.readLine() == "error: a name must be valid UTF-8")
        try socket.send("iam:dan\n")
        #expect(try socket.readLine() == "dan has joined")
    }

    // MARK: client_data and member lists

    @Test func oversizedClientDataIsRefusedWithAClientID() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let client = try NativeClient(port: server.httpPort)
        let blob = String(repeating: "x", count: 5_000)
        try client.send(NativeClient.handshake(channel: "demo", clientData: ["name": "big", "avatar": .string(blob)]))
        let reply = try await client.next()
        #expect(reply["error"]?.stringValue?.hasPrefix("client_data too large") == true, "\(reply["error"] ?? .null)")
        #expect(reply["client_id"]?.stringValue?.isEmpty == false)
        #expect(reply["callback"] == 0)
        // Refused, not cut off: the same connection handshakes with something smaller.
        try client.send(NativeClient.handshake(channel: "demo", clientData: ["name": "big", "avatar": .string(String(blob.prefix(3_000)))]))
        try client.accept(handshakeReply: try await client.next())
    }

    @Test func memberListForAJoinerIsCutAtItsByteBudget() async throws {
        let server = try startTestServer { $0.maxMembersListedBytes = 2_048 }
        defer { server.shutdown() }
        var clients: [NativeClient] = []
        for n in 0..<20 {
            let client = try await NativeClient.connect(server, clientData: ["name": .string("member\(n)"),
                                                                             "bio": .string(String(repeating: "b", count: 300))])
            _ = try await client.subscribe("observable-crowd")
            clients.append(client)
        }
        let late = try await NativeClient.connect(server, clientData: ["name": "late"])
        _ = try await late.subscribe("observable-crowd")
        let members = try await late.next { $0["type"] == "observable_members" }
        let listed = try #require(members["data"]?.arrayValue)
        #expect(!listed.isEmpty && listed.count < 21)
        #expect(JSONValue.array(listed).jsonString.utf8.count <= 2_048)
        #expect(members["truncated"] == true)
        #expect(members["count"] == 21)
        // Listed members keep their clientData: apps identify people by it.
        #expect(listed.allSatisfy { $0["clientData"]?["name"] != nil })
    }

    // MARK: what reaches terminals

    @Test func controlSequencesFromANativeSenderReachLineUsersDefused() async throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let line = try server.lineClient(name: "carol")
        let native = try await NativeClient.connect(server.server, clientData: ["name": "alice"])
        try native.publish("\u{1B}[2J\u{1B}]0;pwned\u{7}hi\u{9B}31m \u{202E}txt.exe\u{2028}x\ny", to: server.lobby.room)
        #expect(try line.readLine(until: { $0.hasPrefix("alice:") })
                == "alice:\u{FFFD}[2J\u{FFFD}]0;pwned\u{FFFD}hi\u{FFFD}31m \u{FFFD}txt.exe\u{FFFD}x y")
        // JSON bodies too: JSON escapes controls, but leaves bidi overrides raw.
        try native.publish(["note": "a\u{202E}b"], to: server.lobby.room)
        #expect(try line.readLine(until: { $0.hasPrefix("alice:") }) == "alice:{\"note\":\"a\u{FFFD}b\"}")
    }

    /// `parley chat` in line mode (stdout a pipe), the binary itself: what others write reaches
    /// the terminal defused.
    @Test func parleyChatPrintsOthersControlSequencesDefused() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ServerProcess.binary)
        process.arguments = ["chat", "--plain", "--url", "ws://127.0.0.1:\(server.httpPort)/v3/websocket",
                             "--room", "observable-tty", "--name", "bob", "--history", "0"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let printed = PipeCollector(output)
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice"])
        _ = try await alice.subscribe("observable-tty")
        let members = try await alice.next { $0["type"] == "observable_members" }
        if members["data"]?.arrayValue?.count != 2 {
            _ = try await alice.next(timeout: 15) { $0["type"] == "observable_member_join" }
        }
        try alice.publish("\u{1B}[2J\u{1B}]0;pwned\u{7}hi\u{9B}1m \u{202E}txt.exe\u{2028}x\ny", to: "observable-tty")
        try await eventually("alice's line", timeout: 10, pollMillis: 20) { printed.value.contains("alice: ") }
        try await Task.sleep(for: .milliseconds(100))
        let line = printed.value.split(separator: "\n").first { $0.hasPrefix("alice: ") }.map(String.init)
        #expect(line == "alice: \u{FFFD}[2J\u{FFFD}]0;pwned\u{FFFD}hi\u{FFFD}1m \u{FFFD}txt.exe\u{FFFD}x y", "\(printed.value.debugDescription)")
    }
}
