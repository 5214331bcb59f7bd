import Foundation
import ParleyCore
import ParleyIO
import ParleyServer
import ParleyTestSupport
import Testing

/// Names, `client_data`, member lists, what reaches terminals (docs/security.md, "Identity
/// and history"), the native door's rates and room limit, history budgets and rates, the
/// REST body limit: in-process. The rate buckets refill by the server's manual clock.
@Suite struct IdentityAndNativeLimitsInProcessTests {
    @Test func nativeNameWithControlCharactersIsRefusedAndTheReplyStillCarriesAClientID() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let client = try await InProcessNative.open(server)
        for name in ["\u{1B}[2Jboss", "admin\u{202E}gpj.exe", "   "] {
            client.send(NativeCommands.handshake(channel: "demo", clientData: ["name": .string(name)]))
            let reply = try await client.next()
            #expect(reply["error"]?.stringValue?.hasPrefix("client_data.name:") == true, "\(name.debugDescription): \(reply)")
            // The Scaledrone Swift SDK force-casts client_id, error or not.
            #expect(reply["client_id"]?.stringValue?.isEmpty == false)
            #expect(reply["callback"] == 0)
        }
        // The connection stays usable: a good handshake goes through.
        client.send(NativeCommands.handshake(channel: "demo", clientData: ["name": "boss", "color": "#112233"]))
        try client.accept(handshakeReply: try await client.next())
        #expect(try await client.subscribe("observable-room")["error"] == nil)
    }

    @Test func lineNameWithBidiOverrideIsRefused() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let socket = try await server.line()
        socket.send("iam:admin\u{202E}gpj.exe\n")
        #expect(try await socket.readLine().hasPrefix("error: a name must not contain"))
        socket.send("iam:" + String(repeating: "x", count: 65) + "\n")
        #expect(try await socket.readLine().hasPrefix("error: name too long"))
        socket.send([UInt8]("iam:bad".utf8) + [0xFF, 0xFE] + [10])
        #expect(try await socket.readLine() == "error: a name must be valid UTF-8")
        socket.send("iam:dan\n")
        #expect(try await socket.readLine() == "dan has joined")
    }

    // MARK: client_data and member lists

    @Test func oversizedClientDataIsRefusedWithAClientID() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let client = try await InProcessNative.open(server)
        let blob = String(repeating: "x", count: 5_000)
        client.send(NativeCommands.handshake(channel: "demo", clientData: ["name": "big", "avatar": .string(blob)]))
        let reply = try await client.next()
        #expect(reply["error"]?.stringValue?.hasPrefix("client_data too large") == true, "\(reply["error"] ?? .null)")
        #expect(reply["client_id"]?.stringValue?.isEmpty == false)
        #expect(reply["callback"] == 0)
        // Refused, not cut off: the same connection handshakes with something smaller.
        client.send(NativeCommands.handshake(channel: "demo", clientData: ["name": "big", "avatar": .string(String(blob.prefix(3_000)))]))
        try client.accept(handshakeReply: try await client.next())
    }

    @Test func memberListForAJoinerIsCutAtItsByteBudget() async throws {
        let server = try InProcessServer { $0.maxMembersListedBytes = 2_048 }
        defer { server.stop() }
        var clients: [InProcessNative] = []
        for n in 0..<20 {
            let client = try await server.native(clientData: ["name": .string("member\(n)"),
                                                                             "bio": .string(String(repeating: "b", count: 300))])
            _ = try await client.subscribe("observable-crowd")
            clients.append(client)
        }
        let late = try await server.native(clientData: ["name": "late"])
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
        let server = try InProcessServer()
        defer { server.stop() }
        let line = try await server.lineClient(name: "carol")
        let native = try await server.native(clientData: ["name": "alice"])
        native.publish("\u{1B}[2J\u{1B}]0;pwned\u{7}hi\u{9B}31m \u{202E}txt.exe\u{2028}x\ny", to: server.lobby.room)
        #expect(try await line.readLine(until: { $0.hasPrefix("alice:") })
                == "alice:\u{FFFD}[2J\u{FFFD}]0;pwned\u{FFFD}hi\u{FFFD}31m \u{FFFD}txt.exe\u{FFFD}x y")
        // JSON bodies too: JSON escapes controls, but leaves bidi overrides raw.
        native.publish(["note": "a\u{202E}b"], to: server.lobby.room)
        #expect(try await line.readLine(until: { $0.hasPrefix("alice:") }) == "alice:{\"note\":\"a\u{FFFD}b\"}")
    }

    @Test func publishRateIsLimited() async throws {
        let server = try InProcessServer { $0.nativeRatePerSecond = 1; $0.nativeBurst = 2 }
        defer { server.stop() }
        let client = try await server.native()
        for n in 1...3 { client.send(["type": "publish", "room": "r", "message": "x", "callback": .number(JSONNumber(n))]) }
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
        let server = try InProcessServer { $0.nativeRatePerSecond = 1; $0.nativeBurst = 1 }
        defer { server.stop() }
        let clock = server.clock
        let client = try await server.native()
        func publish(_ n: Int) async throws -> JSONValue {
            client.send(["type": "publish", "room": "r", "message": "x", "callback": .number(JSONNumber(n))])
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
        let server = try InProcessServer { $0.nativeMaxRooms = 2 }
        defer { server.stop() }
        let client = try await server.native()
        #expect(try await client.subscribe("a") == ["callback": 1])
        #expect(try await client.subscribe("b") == ["callback": 2])
        #expect(try await client.subscribe("c")["error"]?.stringValue?.contains("too many rooms") == true)
        // Subscribing again to a room it is in is fine.
        #expect(try await client.subscribe("a") == ["callback": 4])
    }

    @Test func oversizeRESTBodyIs413() async throws {
        let server = try InProcessServer { $0.httpMaxBodyBytes = 100 }
        defer { server.stop() }
        let response = try await server.request("POST", "/demo/r/publish", json: "\"" + String(repeating: "x", count: 200) + "\"")
        #expect(response.status == 413)
    }

    // MARK: history replies have a byte budget and history requests a rate: 200 stored
    // messages of 900 KiB and six requests on one connection grew the server by 1.46 GB.

    @Test func historyPagesEndAtTheirByteBudgetAndSayThereIsMore() async throws {
        let server = try InProcessServer { $0.historyPageBytes = 64 << 10 }
        defer { server.stop() }
        let client = try await server.native(clientData: ["name": "alice"])
        let big = String(repeating: "x", count: 20_000)
        for n in 1...10 {
            client.send(["type": "publish", "room": "r", "message": .string(big), "callback": .number(JSONNumber(100 + n))])
            _ = try await client.next { $0["callback"]?.intValue == 100 + n }
        }
        client.send(["type": "history", "room": "r", "limit": 100, "callback": 1])
        let page = try await client.next { $0["callback"] == 1 }
        let messages = try #require(page["messages"]?.arrayValue)
        #expect(messages.compactMap { $0["offset"]?.intValue } == [8, 9, 10])
        #expect(page["has_more"] == true)
        // Paging on from there gets the rest, page by page.
        client.send(["type": "history", "room": "r", "before": 8, "limit": 100, "callback": 2])
        let next = try await client.next { $0["callback"] == 2 }
        #expect(next["messages"]?.arrayValue?.compactMap { $0["offset"]?.intValue } == [5, 6, 7])
        #expect(next["has_more"] == true)
        // A subscribe's history_count has the same budget.
        let late = try await server.native()
        _ = try await late.subscribe("r", historyCount: 10)
        var indexes: [Int] = []
        while let pushed = try? await late.next(timeout: 0.5), pushed["type"] == "history_message" {
            indexes.append(try #require(pushed["index"]?.intValue))
        }
        #expect(indexes == [0, 1, 2])
    }

    @Test func historyRequestsAreRateLimitedPerConnection() async throws {
        let server = try InProcessServer { $0.historyRatePerSecond = 1; $0.historyBurst = 2 }
        defer { server.stop() }
        let client = try await server.native()
        for n in 1...3 { client.send(["type": "history", "room": "r", "callback": .number(JSONNumber(n))]) }
        var replies: [Int: JSONValue] = [:]
        while replies.count < 3 {
            let reply = try await client.next { $0["callback"] != nil }
            replies[try #require(reply["callback"]?.intValue)] = reply
        }
        #expect(replies[1]?["error"] == nil && replies[2]?["error"] == nil)
        #expect(replies[3]?["error"]?.stringValue?.hasPrefix("history rate limit exceeded") == true)
        // Publishing is not affected: the buckets are separate.
        client.send(["type": "publish", "room": "r", "message": "hi", "callback": 9])
        #expect(try await client.next { $0["callback"] == 9 }["error"] == nil)
        // Another connection has its own bucket.
        let other = try await server.native()
        other.send(["type": "history", "room": "r", "callback": 1])
        #expect(try await other.next { $0["callback"] == 1 }["error"] == nil)
    }
}
