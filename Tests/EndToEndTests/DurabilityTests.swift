import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Synchronization
import Testing

extension NativeClient {
    /// Sends `command` with a fresh callback and returns the reply to it (skipping pushes).
    func request(_ fields: JSONObject, callback: Int, timeout: Double = 10) throws -> JSONValue {
        try send(.object(JSONObject(Array(fields) + [("callback", .number(JSONNumber(callback)))])))
        return try next(timeout: timeout) { $0["callback"]?.intValue == callback }
    }

    /// Pages back through a room's whole history with `history` and returns it oldest first.
    func allHistory(_ room: String, pageSize: Int = 1_000, firstCallback: Int = 1_000_000) throws -> [JSONValue] {
        var pages: [[JSONValue]] = [], before: Int?, callback = firstCallback
        while true {
            var command: JSONObject = ["type": "history", "room": .string(room), "limit": .number(JSONNumber(pageSize))]
            if let before { command = JSONObject(Array(command) + [("before", .number(JSONNumber(before)))]) }
            let reply = try request(command, callback: callback)
            callback += 1
            guard reply["error"] == nil, let messages = reply["messages"]?.arrayValue else {
                throw TestSocket.Failure("history failed: \(reply)")
            }
            pages.append(messages)
            guard reply["has_more"] == true, let oldest = messages.first?["offset"]?.intValue else { break }
            before = oldest
        }
        return pages.reversed().flatMap { $0 }
    }
}

@Suite struct DurabilityTests {
    @Test func resumeWithSinceGetsExactlyTheMissedMessagesThenLive() throws {
        let server = try startTestServer { $0.nativeRatePerSecond = 1_000_000; $0.nativeBurst = 1_000_000 }
        defer { server.shutdown() }
        let reader = try NativeClient.connect(server)
        try reader.subscribe("resume")
        try reader.send(["type": "publish", "room": "resume", "message": "before", "callback": 90])
        // Stored, then delivered, then acknowledged: the push comes before the receipt.
        let push = try reader.next()
        #expect(push["offset"] == 1)
        #expect(try reader.next() == ["callback": 90, "id": try #require(push["id"]), "offset": 1])
        reader.ws.abort()

        let writer = try NativeClient.connect(server)
        for n in 1...500 {
            try writer.send(["type": "publish", "room": "resume", "message": .string("m\(n)"), "callback": .number(JSONNumber(n))])
        }
        for n in 1...500 { _ = try writer.next { $0["callback"]?.intValue == n } }
        // Reconnect with `since` while more is being published: the seam must hold.
        let again = try NativeClient.connect(server)
        try again.send(["type": "subscribe", "room": "resume", "since": 1, "callback": 1])
        for n in 501...550 { try writer.publish(.string("m\(n)"), to: "resume") }
        #expect(try again.next { $0["callback"] != nil } == ["callback": 1])
        var received: [JSONValue] = []
        while received.count < 550 {
            let push = try again.next()
            #expect(push["type"] == "publish", "unexpected \(push)")
            received.append(push)
        }
        #expect(received.map { $0["offset"]?.intValue } == Array(2...551))
        #expect(received.map { $0["message"]?.stringValue } == (1...550).map { "m\($0)" })
        // No duplicate behind them: a message published now is the next thing it gets.
        try writer.publish("marker", to: "resume")
        let next = try again.next()
        #expect(next["type"] == "publish" && next["message"] == "marker" && next["offset"] == 552, "\(next)")
    }

    @Test func sameMessageIDIsStoredOnceAndEveryRetryGetsTheSameReply() throws {
        let directory = NSTemporaryDirectory() + "parley-idem-\(UUID().uuidString)"
        var server = try startTestServer { $0.dataDirectory = directory }
        let watcher = try NativeClient.connect(server)
        try watcher.subscribe("idem")
        let client = try NativeClient.connect(server)
        let publish: JSONObject = ["type": "publish", "room": "idem", "message": "once", "message_id": "client-42"]
        let replies = try (1...3).map { try client.request(publish, callback: $0) }
        let first = try #require(replies.first)
        #expect(first["error"] == nil)
        #expect(first["offset"] == 1)
        for reply in replies { #expect(reply["id"] == first["id"] && reply["offset"] == first["offset"]) }
        #expect(try watcher.next()["offset"] == 1)
        #expect(try client.allHistory("idem").map { $0["message"] } == ["once"])
        // A different id is a different message, and the next thing the watcher gets (the
        // retries were answered before it was sent, and delivered nothing).
        #expect(try client.request(["type": "publish", "room": "idem", "message": "two", "message_id": "client-43"], callback: 4)["offset"] == 2)
        let next = try watcher.next()
        #expect(next["offset"] == 2 && next["message"] == "two", "\(next)")
        server.shutdown()

        // After a restart the retry is still recognised.
        server = try startTestServer { $0.dataDirectory = directory }
        defer { server.shutdown() }
        let later = try NativeClient.connect(server)
        let retry = try later.request(publish, callback: 1)
        #expect(retry["id"] == first["id"] && retry["offset"] == 1)
        #expect(try later.allHistory("idem").map { $0["message"] } == ["once", "two"])
    }

    @Test func pagingThroughTenThousandMessagesReturnsEachOnce() throws {
        // Twelve history requests at once: more than the default burst of ten.
        let server = try startTestServer { $0.historyRatePerSecond = 1_000; $0.historyBurst = 1_000 }
        defer { server.shutdown() }
        let key = RoomKey(channel: "demo", room: "paging")
        let done = DispatchSemaphore(value: 0)
        for n in 1...10_000 {
            try server.hub.publish(.number(JSONNumber(n)), to: key, from: nil) { _ in if n == 10_000 { done.signal() } }
        }
        #expect(done.wait(timeout: .now() + 30) == .success)
        let client = try NativeClient.connect(server)
        let all = try client.allHistory("paging", pageSize: 1_000)
        #expect(all.count == 10_000)
        #expect(all.map { $0["offset"]?.intValue } == Array(1...10_000))
        #expect(all.map { $0["message"]?.intValue } == Array(1...10_000))
        // The limit is capped, and an empty room has no more.
        let capped = try client.request(["type": "history", "room": "paging", "limit": 5_000], callback: 1)
        #expect(capped["messages"]?.arrayValue?.count == 1_000)
        #expect(capped["has_more"] == true)
        #expect(try client.request(["type": "history", "room": "empty", "limit": 10], callback: 2) == ["callback": 2, "messages": [], "has_more": false])
    }

    @Test func aChannelsHistorySettingsLimitItsRetention() throws {
        let directory = NSTemporaryDirectory() + "parley-retention-\(UUID().uuidString)"
        var short = ChannelSettings(id: "short")
        short.retentionCount = 2
        let configure: (inout ServerConfiguration) -> Void = {
            $0.dataDirectory = directory
            $0.channels = [short]
            $0.openChannels = true
        }
        var server = try startTestServer(configure)
        for channel in ["short", "demo"] {
            let client = try NativeClient.connect(server, channel: channel)
            for n in 1...5 { _ = try client.request(["type": "publish", "room": "r", "message": .string("m\(n)")], callback: n) }
        }
        server.shutdown()
        // Retention runs when the store opens (and then in the background).
        server = try startTestServer(configure)
        defer { server.shutdown() }
        func kept(_ channel: String) throws -> [JSONValue] {
            let client = try NativeClient.connect(server, channel: channel)
            let page = try client.request(["type": "history", "room": "r", "limit": 100], callback: 1)
            return page["messages"]?.arrayValue?.compactMap { $0["message"] } ?? []
        }
        // It runs on the store's writer thread right after startup has read the offsets, so
        // it may finish after the server is serving: wait for it.
        try eventuallyBlocking("retention of channel short at open", pollMillis: 20) { try kept("short") == ["m4", "m5"] }
        #expect(try kept("short") == ["m4", "m5"])
        #expect(try kept("demo") == ["m1", "m2", "m3", "m4", "m5"])
    }

    @Test func historySurvivesARestartAndOffsetsContinue() throws {
        let directory = NSTemporaryDirectory() + "parley-restart-\(UUID().uuidString)"
        var server = try startTestServer { $0.dataDirectory = directory }
        let client = try NativeClient.connect(server)
        for n in 1...3 { _ = try client.request(["type": "publish", "room": "keep", "message": .string("m\(n)")], callback: n) }
        try client.send(["type": "publish", "room": "keep", "message": ["typing": true]])
        server.shutdown()
        server = try startTestServer { $0.dataDirectory = directory }
        defer { server.shutdown() }
        let again = try NativeClient.connect(server)
        try again.subscribe("keep", historyCount: 10)
        let history = try (0..<3).map { _ in try again.next() }
        #expect(history.map { $0["type"] } == ["history_message", "history_message", "history_message"])
        #expect(history.map { $0["message"] } == ["m1", "m2", "m3"])
        #expect(history.map { $0["index"] } == [0, 1, 2])
        // Nothing more (the typing flag was never stored): its own next message comes next,
        // delivered before it is acknowledged.
        try again.send(["type": "publish", "room": "keep", "message": "m4", "callback": 9])
        let push = try again.next()
        #expect(push["type"] == "publish" && push["message"] == "m4" && push["offset"] == 4, "\(push)")
        let reply = try again.next()
        #expect(reply["callback"] == 9 && reply["offset"] == 4, "\(reply)")
    }

    /// Line member ids come from per-process connection numbers, and the author check
    /// compares member ids: after a restart the first line connection has the number the
    /// first had before, but not its id, so it cannot edit that user's message.
    @Test func aLineUserOfAnEarlierProcessIsNobodyTheNextOneCanBe() throws {
        let directory = NSTemporaryDirectory() + "parley-restart-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var server = try startTestServer { $0.dataDirectory = directory; $0.joinHistory = 5 }
        let mallory = try TestSocket(port: server.linePort)
        try mallory.send("iam:mallory\n")
        _ = try mallory.readLine(until: { $0 == "mallory has joined" })
        try mallory.send("msg:original\n")
        _ = try mallory.readLine(until: { $0 == "mallory:original" })
        server.shutdown()
        server = try startTestServer { $0.dataDirectory = directory; $0.joinHistory = 5 }
        defer { server.shutdown() }
        let eve = try TestSocket(port: server.linePort)
        try eve.send("iam:eve\n")
        _ = try eve.readLine(until: { $0 == "eve has joined" })
        try eve.send("edit:rewritten\n")
        let answer = try eve.readLine(until: { $0.hasPrefix("error") || $0.contains("rewritten") })
        #expect(answer == "error: you have no message to edit here", "\(answer)")
    }

    @Test func lineUserGetsRecentLobbyMessagesBeforeItsJoin() throws {
        let server = try TestServer.start { $0.joinHistory = 3 }
        defer { server.stop() }
        let alice = try server.lineClient(name: "alice")
        for n in 1...5 { try alice.send("msg:hello \(n)\n") }
        try alice.send("msg:done\n")
        _ = try alice.readLine(until: { $0 == "alice:done" })
        try server.server.hub.publish(["typing": true], to: server.lobby, from: nil)
        let bob = try TestSocket(port: server.server.linePort)
        try bob.send("iam:bob\n")
        #expect(try bob.readLine() == "alice:hello 4")
        #expect(try bob.readLine() == "alice:hello 5")
        #expect(try bob.readLine() == "alice:done")
        #expect(try bob.readLine() == "bob has joined")
    }

    @Test func unusableDataDirectoryStopsStartupNamingThePath() throws {
        let file = NSTemporaryDirectory() + "parley-file-\(UUID().uuidString)"
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: file))
        #expect { try startTestServer { $0.dataDirectory = file } } throws: { "\($0)".contains(file) }
        let nested = file + "/below"
        #expect { try startTestServer { $0.dataDirectory = nested } } throws: { "\($0)".contains(nested) }

        let corrupt = NSTemporaryDirectory() + "parley-corrupt-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: corrupt, withIntermediateDirectories: true)
        try Data(repeating: 7, count: 8192).write(to: URL(fileURLWithPath: corrupt + "/parley.sqlite3"))
        #expect { try startTestServer { $0.dataDirectory = corrupt } } throws: { "\($0)".contains(corrupt + "/parley.sqlite3") }
    }
}
