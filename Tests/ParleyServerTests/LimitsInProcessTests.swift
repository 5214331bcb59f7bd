import Foundation
import ParleyCore
import ParleyIO
@testable import ParleyServer
import ParleyTestSupport
import ParleyWebSocket
import Testing

/// The abuse limits of README.md, "Limits", that need no wall-clock time, breached
/// in-process: admission (total and per address), rate and abuse with a manual clock, list
/// and room limits, the REST rate, their counters in `/metrics`. The timers (handshake, idle)
/// and what needs real sockets (floods under load, half-open connections, a FIN after 1008)
/// stay in Tests/EndToEndTests/AbuseLimitsTests.
@Suite struct LimitsInProcessTests {
    /// `parley_limit_breaches_total{limit="NAME"}` as `/metrics` shows it, read in process.
    /// Messages a client has sent all but the end of are held by the server: together they
    /// may hold --inbound-buffer-bytes (beyond 64 KiB each); a connection that needs more past
    /// it is closed 1013, and what it held is given back. Honest clients go on.
    @Test func unfinishedMessagesShareOneServerWideBudget() async throws {
        let server = try InProcessServer { $0.inboundBufferBytes = 1 << 20 }
        defer { server.stop() }
        let honest = try await server.native(ip: "198.51.100.1")
        // Each hoarder sends all but the last 10 bytes of a 300 KiB message, and waits.
        let payload = [UInt8](repeating: 0x61, count: 300 << 10)
        let frame = WebSocketFrameEncoder.encode(opcode: .text, payload: payload, maskingKey: 0x1234_5678)
        var hoarders: [InProcessNative] = []
        for n in 0..<6 {
            let hoarder = try await InProcessNative.open(server, ip: "203.0.113.\(n + 1)")
            hoarder.peer.send(Array(frame.dropLast(10)))
            hoarders.append(hoarder)
            try await eventually("hoarder \(n) is held or refused") {
                hoarder.ws.closeCode != nil || hoarder.peer.closeReason != nil
                    || server.server.core.inboundBudget.bytesHeld >= (n + 1) * (290 << 10)
                    || server.server.core.inboundBudget.connectionsRefused > 0
            }
        }
        // Three fit in 1 MiB (900 KiB); the fourth passes it and is closed.
        #expect(server.server.core.inboundBudget.connectionsRefused >= 1)
        #expect(server.server.core.inboundBudget.bytesHeld <= (1 << 20) + (300 << 10))
        let refused = hoarders[3]
        await #expect(throws: (any Error).self) { _ = try await refused.ws.nextText(timeout: 5) }
        #expect(refused.ws.closeCode == 1013, "closed with \(refused.ws.closeCode.map(String.init) ?? "no code")")
        #expect(refused.ws.closeReason.contains("too many unfinished messages"))
        // The honest client chats on, and a small message from a held hoarder still counts.
        #expect(try await honest.publishAcknowledged("still here", to: "r")["error"] == nil)
        // A hoarder that finishes its message gives its share back (it is answered: not JSON).
        hoarders[0].peer.send(Array(frame.suffix(10)))
        _ = try await hoarders[0].next()
        for hoarder in hoarders { hoarder.peer.reset() }
        try await eventually("every byte given back") { server.server.core.inboundBudget.bytesHeld == 0 }
        let closes = server.server.core.inboundBudget.connectionsRefused
        #expect(server.server.metricsText().contains("parley_inbound_budget_closes_total \(closes)\n"))
    }

    /// HTTP request bodies (REST, Socket.IO polling) count in the same budget: a body sent all
    /// but its end is held until it is complete; past the budget the connection that needs
    /// more gets 503 and is closed. The WebSocket and HTTP doors share one bound.
    @Test func unfinishedRequestBodiesShareTheSameBudget() async throws {
        let server = try InProcessServer { $0.inboundBufferBytes = 1 << 20 }
        defer { server.stop() }
        // 300 KiB of a 310 KiB JSON body each.
        let head = "POST /demo/r/publish HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(310 << 10)\r\n\r\n"
        let part = Array(head.utf8) + [UInt8](repeating: 0x20, count: 300 << 10)
        var peers: [InMemoryPeer] = []
        for n in 0..<5 {
            let peer = try await server.http(ip: "203.0.113.\(n + 1)")
            peer.send(part)
            peers.append(peer)
            try await eventually("body \(n) is held or refused") {
                peer.closeReason != nil || server.server.core.inboundBudget.bytesHeld >= (n + 1) * (300 << 10)
                    || server.server.core.inboundBudget.connectionsRefused > 0
            }
        }
        // Three fit in 1 MiB; the fourth passes it: 503, closed.
        #expect(server.server.core.inboundBudget.connectionsRefused >= 1)
        let refused = try await peers[3].read(timeout: 5, "the refusal") { bytes -> String? in
            let text = String(decoding: bytes, as: UTF8.self)
            return text.contains("try again later") ? text : nil
        }
        #expect(refused.hasPrefix("HTTP/1.1 503"))
        #expect(refused.contains("Retry-After: 5"))
        #expect(refused.contains("the server holds too many unfinished requests"))
        // A WebSocket message past its free share is refused while the bodies hold the budget.
        let ws = try await InProcessNative.open(server, ip: "198.51.100.9")
        ws.peer.send(Array(WebSocketFrameEncoder.encode(opcode: .text, payload: [UInt8](repeating: 0x61, count: 200 << 10),
                                                        maskingKey: 7).dropLast(1)))
        await #expect(throws: (any Error).self) { _ = try await ws.ws.nextText(timeout: 5) }
        #expect(ws.ws.closeCode == 1013)
        // A held body that completes is answered and gives its share back.
        peers[0].send([UInt8](repeating: 0x20, count: (10 << 10) - 4) + Array("\"a\"".utf8) + [0x20])
        let answer = try await peers[0].read(timeout: 5, "the answer") { bytes -> String? in
            let text = String(decoding: bytes, as: UTF8.self)
            return text.contains("\r\n\r\n") ? text : nil
        }
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
        for peer in peers { peer.reset() }
        try await eventually("every byte given back") { server.server.core.inboundBudget.bytesHeld == 0 }
    }

    /// A Socket.IO client over long-polling, connected to `/` (the SocketChat lobby's namespace).
    static func socketChat(_ server: InProcessServer, ip: String) async throws -> InProcessPolling {
        let client = try await InProcessPolling.open(server, ip: ip)
        try await client.post(["40"])
        _ = try await client.poll(until: { $0.hasPrefix("40") })
        return client
    }

    static func breaches(_ server: InProcessServer, _ limit: String) throws -> Int {
        let metrics = server.server.metricsText()
        let prefix = "parley_limit_breaches_total{limit=\"\(limit)\"} "
        guard let line = metrics.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else {
            throw InMemoryPeer.Timeout(description: "no \(limit) in /metrics: \(metrics)")
        }
        return Int(line.dropFirst(prefix.count)) ?? -1
    }

    static func openConnections(_ server: InProcessServer) -> Int { server.server.core.gate.open.load(ordering: .relaxed) }

    @Test func lineFloodGetsErrorsThenDisconnect() async throws {
        let server = try InProcessServer { $0.lineRatePerSecond = 5; $0.lineBurst = 10 }
        defer { server.stop() }
        let peer = try await server.lineClient(name: "flood")
        peer.send(String(repeating: "msg:spam\n", count: 200))
        var sawError = false, sawDisconnect = false
        while let line = try? await peer.readLine(timeout: 3) {
            if line.hasPrefix("error: rate limit exceeded (") { sawError = true }
            if line == "error: rate limit exceeded again and again; disconnected" { sawDisconnect = true }
        }
        #expect(sawError)
        #expect(sawDisconnect)
        try await peer.waitForClose()
        #expect(try Self.breaches(server, "rate_abuse_disconnect") == 1)
    }

    @Test func maxConnectionsRefusesWithAReasonOnEachDoor() async throws {
        let server = try InProcessServer { $0.maxConnections = 2 }
        defer { server.stop() }
        let a = try await server.lineClient(name: "a")
        let b = try await server.lineClient(name: "b")
        let refused = try await server.line()
        #expect(try await refused.readLine() == "error: server is full (limit 2 connections); try again later")
        try await refused.waitForClose()
        let http = try await server.request("GET", "/demo/stats")
        #expect(http.status == 503)
        #expect(http.body.contains("server is full"))
        a.reset(); b.reset()
        try await eventually("a and b released") { Self.openConnections(server) == 0 }
        #expect(try Self.breaches(server, "max_connections") == 2)
        // Room again: let in.
        _ = try await server.lineClient(name: "c")
    }

    @Test func connectionsPerIPAreLimited() async throws {
        let server = try InProcessServer { $0.maxConnectionsPerIP = 2 }
        defer { server.stop() }
        let a = try await server.native()
        let b = try await server.lineClient(name: "b")
        let refused = try await server.line()
        #expect(try await refused.readLine() == "error: too many connections from your address (limit 2)")
        let http = try await server.request("GET", "/demo/stats")
        #expect(http.status == 503)
        #expect(http.body == "too many connections from your address (limit 2)\n")
        // Another address is not affected.
        #expect(try await server.request("GET", "/demo/stats", ip: "192.0.2.9").status == 200)
        // A slot freed is a slot available.
        b.reset()
        try await eventually("b released") { Self.openConnections(server) == 1 }
        #expect(try Self.breaches(server, "max_connections_per_ip") == 2)
        _ = try await server.lineClient(name: "b2")
        _ = a
    }

    @Test func observableMembersListIsCutWithTheRealCount() async throws {
        let server = try InProcessServer { $0.maxMembersListed = 2 }
        defer { server.stop() }
        var clients: [InProcessNative] = []
        for _ in 0..<3 {
            let client = try await server.native()
            _ = try await client.subscribe("observable-big")
            clients.append(client)
        }
        let late = try await server.native()
        _ = try await late.subscribe("observable-big")
        let members = try await late.next { $0["type"] == "observable_members" }
        #expect(members["data"]?.arrayValue?.count == 2)
        #expect(members["count"] == 4)
        // Under the limit there is no count.
        let small = try await server.native()
        _ = try await small.subscribe("observable-small")
        let few = try await small.next { $0["type"] == "observable_members" }
        #expect(few["data"]?.arrayValue?.count == 1)
        #expect(few["count"] == nil)
        #expect(try Self.breaches(server, "members_listed") == 2)  // the third joiner and the late one
    }

    @Test func restRateIsLimitedPerAddressWith429AndRefillsWithTheClock() async throws {
        let server = try InProcessServer { $0.restRatePerSecond = 1; $0.restBurst = 2 }
        defer { server.stop() }
        #expect(try await server.request("GET", "/demo/stats").status == 200)
        #expect(try await server.request("GET", "/demo/stats").status == 200)
        let peer = try await server.http()
        peer.sendRequest("GET", "/demo/stats", close: true)
        let refused = try await peer.responseAtClose()
        #expect(refused.status == 429)
        #expect(refused.header("Retry-After") == "1")
        #expect(refused.body == "too many requests (limit 1 per second per address); slow down\n")
        // Per address: another one is served.
        #expect(try await server.request("GET", "/demo/stats", ip: "192.0.2.1").status == 200)
        // Half a second is not enough for a token; a whole one is.
        server.clock.advance(millis: 500)
        #expect(try await server.request("GET", "/demo/stats").status == 429)
        server.clock.advance(millis: 500)
        #expect(try await server.request("GET", "/demo/stats").status == 200)
        #expect(try Self.breaches(server, "rest_rate") == 2)
    }

    /// The REST listings that walk a channel's rooms are open to anyone on an open channel and
    /// rated per address: requests for the same listing share one walk, whose answer is given
    /// again for a second, so many addresses asking cost one walk a second, not one each.
    @Test func channelListingsAreSharedForASecond() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await server.native(ip: "192.0.2.41")
        #expect(try await alice.subscribe("listed")["error"] == nil)
        func members(_ ip: String) async throws -> String {
            let response = try await server.request("GET", "/demo/members", ip: ip)
            #expect(response.status == 200)
            return response.body
        }
        let before = try await members("198.51.100.1")
        #expect(before.contains(alice.clientID))
        let stats = try await server.request("GET", "/demo/stats", ip: "198.51.100.1").body
        let bob = try await server.native(ip: "192.0.2.42")
        #expect(try await bob.subscribe("listed")["error"] == nil)
        // Within the second, from other addresses: the same answers, bob not yet listed.
        for n in 2...6 { #expect(try await members("198.51.100.\(n)") == before) }
        #expect(try await server.request("GET", "/demo/stats", ip: "198.51.100.7").body == stats)
        // A listing of another kind or page is its own answer.
        let rooms = try await server.request("GET", "/demo/room-members?limit=5", ip: "198.51.100.8")
        #expect(rooms.body.contains(bob.clientID))
        server.clock.advance(millis: RESTRoutes.listingReuseMillis)
        let after = try await members("198.51.100.9")
        #expect(after.contains(alice.clientID) && after.contains(bob.clientID), "\(after)")
        #expect(try await server.request("GET", "/demo/stats", ip: "198.51.100.7").body != stats)
    }

    /// Bytes published are budgeted per address over every connection and door, REST
    /// included: the per-connection message rates count messages, and one address may open
    /// a thousand connections.
    @Test func publishedBytesAreBudgetedPerAddressOnEveryDoor() async throws {
        let server = try InProcessServer { $0.publishBytesPerIPPerSecond = 64 << 10 }
        defer { server.stop() }
        let big = JSONValue.string(String(repeating: "p", count: 100 << 10))
        let first = try await server.native(ip: "192.0.2.5")
        // 300 KiB against a burst of 256 KiB: the third goes (the address had some left), and
        // leaves it in debt.
        for _ in 0..<3 { #expect(try await first.publishAcknowledged(big, to: "r")["error"] == nil) }
        let second = try await server.native(ip: "192.0.2.5")
        let refused = try await second.publishAcknowledged(.string("small"), to: "r")
        #expect(refused["error"]?.stringValue?.contains("publish byte budget of your address spent (65536 bytes per second)") == true)
        let rest = try await server.request("POST", "/demo/r/publish", json: "\"hi\"", ip: "192.0.2.5")
        #expect(rest.status == 429)
        #expect(rest.header("Retry-After") == "1")
        #expect(rest.body.hasPrefix("publish byte budget of your address spent"))
        // A reply or an edit over REST carries a body too: the same budget.
        for action in ["reply", "edit"] {
            let refusedAction = try await server.request("POST", "/demo/r/messages/x/\(action)", json: "\"hi\"", ip: "192.0.2.5")
            #expect(refusedAction.status == 429 && refusedAction.body.hasPrefix("publish byte budget"), "\(action): \(refusedAction.status)")
        }
        // Another address has its own budget, on every door.
        #expect(try await server.request("POST", "/demo/r/publish", json: "\"hi\"", ip: "198.51.100.3").status == 200)
        #expect(try await server.native(ip: "198.51.100.3").publishAcknowledged(big, to: "r")["error"] == nil)
        // The debt (about 44 KiB at 64 KiB/s) is waited off within a second.
        server.clock.advance(millis: 1_000)
        #expect(try await second.publishAcknowledged(.string("small"), to: "r")["error"] == nil)
        #expect(try Self.breaches(server, "publish_bytes") == 4)
    }

    /// The native door's handshake has the handshake timeout too, counted from the upgrade:
    /// a connection that sends no `handshake` (frames that say nothing else do not help), or
    /// on a channel that needs a token no `authenticate`, is closed with 1008; one that did
    /// stays.
    @Test func aNativeConnectionWithoutAHandshakeIsClosedInTime() async throws {
        let server = try InProcessServer {
            $0.handshakeTimeoutMillis = 300
            $0.channels = [ChannelSettings(id: "locked", secret: "s3cret-s3cret", requireAuth: true)]
        }
        defer { server.stop() }
        let silent = try await InProcessNative.open(server, ip: "192.0.2.31")
        let chatty = try await InProcessNative.open(server, ip: "192.0.2.32")
        chatty.send(["type": "subscribe", "room": "r", "callback": 1])
        #expect(try await chatty.next()["error"]?.stringValue == "handshake first")
        let unauthenticated = try await InProcessNative.open(server, ip: "192.0.2.33")
        unauthenticated.send(NativeCommands.handshake(channel: "locked", clientData: nil))
        #expect(try await unauthenticated.next()["require_auth"] == true)
        let member = try await server.native(ip: "192.0.2.34")
        for (name, client) in [("silent", silent), ("chatty", chatty), ("unauthenticated", unauthenticated)] {
            // Reading is how the close frame is seen: nothing else comes first.
            await #expect(throws: (any Error).self, "\(name)") { _ = try await client.ws.nextText(timeout: 5) }
            #expect(client.ws.closeCode == 1008 && client.ws.closeReason.contains("no handshake within"), "\(client.ws.closeReason)")
        }
        #expect(try await member.publishAcknowledged("still here", to: "r")["error"] == nil)
        #expect(try Self.breaches(server, "handshake_timeout") == 3)
    }

    /// What the native door receives that is neither a publish nor an action (charged when
    /// admitted) is charged to the address's publish byte budget too: junk that may have been a
    /// small deflated frame costs the server what it became. Past the budget the connection is
    /// closed (1008); another address chats on.
    @Test func junkIsPaidForFromThePublishByteBudget() async throws {
        let server = try InProcessServer { $0.publishBytesPerIPPerSecond = 64 << 10 }
        defer { server.stop() }
        let junk = String(repeating: "x", count: 100 << 10)
        let client = try await server.native(ip: "192.0.2.7")
        var errors = 0
        for _ in 0..<4 {
            client.ws.sendText(junk)
            guard let reply = try? await client.next(timeout: 5) else { break }
            #expect(reply["error"] != nil, "\(reply)")
            errors += 1
        }
        // 256 KiB of burst: the first two or three are answered, then the connection goes.
        #expect(errors >= 2 && errors < 4, "\(errors) answered")
        try await eventually("the connection is closed") { client.ws.closeCode != nil }
        #expect(client.ws.closeCode == 1008, "closed with \(client.ws.closeCode.map(String.init) ?? "no code")")
        #expect(client.ws.closeReason.contains("publish byte budget"))
        let other = try await server.native(ip: "198.51.100.7")
        #expect(try await other.publishAcknowledged("fine", to: "r")["error"] == nil)
        // Publishes refused before their own charge (a room nobody may use, or before the
        // handshake) are paid for the same way.
        for handshaken in [true, false] {
            let ip = handshaken ? "192.0.2.17" : "192.0.2.18"
            let refused = handshaken ? try await server.native(ip: ip) : try await InProcessNative.open(server, ip: ip)
            var answered = 0
            for _ in 0..<6 {
                refused.send(["type": "publish", "room": "~x", "message": .string(junk), "callback": 5])
                guard (try? await refused.next(timeout: 5)) != nil else { break }
                answered += 1
            }
            #expect(answered < 6, "handshaken \(handshaken): \(answered) answered")
            try await eventually("closed") { refused.ws.closeCode != nil }
            #expect(refused.ws.closeCode == 1008)
        }
        // A publish or an action padded with fields nobody reads pays for the padding.
        for type in ["publish", "delete"] {
            let padded = try await server.native(ip: type == "publish" ? "192.0.2.19" : "192.0.2.20")
            var answered = 0
            for n in 0..<6 {
                padded.send(["type": .string(type), "room": "r", "message": "x", "target": "nope", "pad": .string(junk),
                             "callback": .number(JSONNumber(n))])
                guard (try? await padded.next(timeout: 5)) != nil else { break }
                answered += 1
            }
            #expect(answered < 6, "\(type): \(answered) answered")
            try await eventually("closed") { padded.ws.closeCode != nil }
            #expect(padded.ws.closeCode == 1008)
        }
    }

    /// Message actions wait their turn one at a time on the native door; each is admitted
    /// (shape, rate, byte budget) when it arrives, so what waits has been paid for: a burst of
    /// big edits behind a slow one is refused at once past the budget, not held unchecked.
    @Test func waitingMessageActionsAreAdmittedWhenTheyArrive() async throws {
        let store = GatedStore()
        let server = try InProcessServer(store: store) { $0.publishBytesPerIPPerSecond = 64 << 10 }
        defer {
            store.release()
            server.stop()
        }
        let client = try await server.native(ip: "192.0.2.9")
        // The first action waits for the store; the edits behind it wait their turn.
        let target = try await client.holdAnAction(in: "r", store: store)
        let big = JSONValue.string(String(repeating: "e", count: 100 << 10))
        for n in 2...11 {
            client.send(["type": "edit", "room": "r", "target": .string(target), "message": big, "callback": .number(JSONNumber(n))])
        }
        // 1 MiB of edits against a burst of 256 KiB: most are refused now, with the store shut.
        var refused = 0
        while refused < 7 {
            let reply = try await client.next(timeout: 5) { $0["callback"]?.intValue ?? 0 >= 2 }
            #expect(reply["error"]?.stringValue?.hasPrefix("publish byte budget of your address spent") == true, "\(reply)")
            refused += 1
        }
        #expect(store.heldCount <= 1)
    }

    /// Joins are paced on every door (`--join-rate`): each is announced to the room's members,
    /// so a client cycling subscribe / unsubscribe (native) or `connectUser` / `exitUser`
    /// (Socket.IO) is refused past its burst, and the members hear no more than it was allowed.
    /// Publishing goes on; so does everybody else.
    @Test func joinChurnIsRefusedPastTheJoinRateOnTheNativeDoor() async throws {
        let server = try InProcessServer { $0.joinRatePerSecond = 1; $0.joinBurst = 3; $0.nativeMaxRooms = 1 }
        defer { server.stop() }
        let watcher = try await server.native(ip: "198.51.100.1")
        #expect(try await watcher.subscribe("observable-r")["error"] == nil)
        _ = try await watcher.next { $0["type"]?.stringValue == "observable_members" }
        let churner = try await server.native(ip: "203.0.113.1")
        var refusals: [String] = []
        for _ in 0..<6 {
            let reply = try await churner.subscribe("observable-r")
            if let error = reply["error"]?.stringValue { refusals.append(error); continue }
            let callback = churner.takeCallback()
            churner.send(["type": "unsubscribe", "room": "observable-r", "callback": .number(JSONNumber(callback))])
            _ = try await churner.next { $0["callback"]?.intValue == callback }
        }
        #expect(refusals == Array(repeating: "join rate limit exceeded (1 joins per second); try again shortly", count: 3))
        #expect(try Self.breaches(server, "join_rate") == 3)
        // The watcher heard three joins and three leaves, and chats on with the churner.
        #expect(try await churner.publishAcknowledged("still here", to: "observable-r")["error"] == nil)
        var joins = 0, leaves = 0
        while true {
            let event = try await watcher.next()
            let type = event["type"]?.stringValue
            if type == "observable_member_join" { joins += 1 }
            if type == "observable_member_leave" { leaves += 1 }
            if type == "publish" { break }
        }
        #expect(joins == 3 && leaves == 3)
        server.clock.advance(millis: 1_000)
        #expect(try await churner.subscribe("observable-r")["error"] == nil)
    }

    @Test func joinChurnIsRefusedPastTheJoinRateOnTheSocketIODoor() async throws {
        let server = try InProcessServer { $0.joinRatePerSecond = 1; $0.joinBurst = 2 }
        defer { server.stop() }
        let sio = try await Self.socketChat(server, ip: "203.0.113.2")
        var acks: [String] = []
        for n in 0..<4 {
            try await sio.post(["42\(n)[\"connectUser\",\"churner\"]"])
            acks.append(try await sio.poll(until: { $0.hasPrefix("43\(n)") }))
            try await sio.post(["42[\"exitUser\",\"churner\"]"])
        }
        #expect(acks == ["430[]", "431[]",
                         #"432[{"error":"join rate limit exceeded (1 joins per second); try again shortly"}]"#,
                         #"433[{"error":"join rate limit exceeded (1 joins per second); try again shortly"}]"#])
        #expect(try Self.breaches(server, "join_rate") == 2)
        server.clock.advance(millis: 1_000)
        try await sio.post(["429[\"connectUser\",\"churner\"]"])
        #expect(try await sio.poll(until: { $0.hasPrefix("439") }) == "439[]")
    }

    /// SocketChat asks that cost the server without publishing are paced like messages: a
    /// member's `connectUser` again (the whole user list back) and `exitUser` from a socket not
    /// in the lobby (in a cluster a write to Redis), whose name must be one.
    @Test func socketChatAsksThatCostTheServerArePacedLikeMessages() async throws {
        let server = try InProcessServer { $0.nativeRatePerSecond = 1; $0.nativeBurst = 2 }
        defer { server.stop() }
        let stranger = try await Self.socketChat(server, ip: "203.0.113.3")
        try await stranger.post(["420[\"exitUser\",\"\(String(repeating: "n", count: 10_000))\"]"])
        #expect(try await stranger.poll(until: { $0.hasPrefix("430") }) == #"430[{"error":"exitUser needs a valid nickname"}]"#)
        var acks: [String] = []
        for n in 1...3 {
            try await stranger.post(["42\(n)[\"exitUser\",\"ghost\"]"])
            acks.append(try await stranger.poll(until: { $0.hasPrefix("43\(n)") }))
        }
        #expect(acks == ["431[]", "432[]", #"433[{"error":"rate limit exceeded"}]"#])

        let member = try await Self.socketChat(server, ip: "203.0.113.4")
        try await member.post(["420[\"connectUser\",\"alice\"]"])
        // The join's ack, then its list (from the lobby's snapshot).
        #expect(try await member.poll(until: { $0.hasPrefix("430") }) == "430[]")
        _ = try await member.poll(until: { $0.hasPrefix(#"42["userList""#) })
        // Each admitted ask brings the list before its ack; the refused one brings none.
        var answers: [String] = []
        for n in 1...3 {
            try await member.post(["42\(n)[\"connectUser\",\"alice\"]"])
            while true {
                let packet = try await member.poll(until: { $0.hasPrefix("43\(n)") || $0.hasPrefix(#"42["userList""#) })
                answers.append(packet.hasPrefix("43") ? packet : "list")
                if packet.hasPrefix("43") { break }
            }
        }
        #expect(answers == ["list", "431[]", "list", "432[]", #"433[{"error":"rate limit exceeded"}]"#])
        // Paced like messages, not counted as messages received or publishes refused.
        #expect(server.server.metricsText().contains("parley_publishes_refused_total{reason=\"rate_limited\"} 0\n"))
    }

    /// SocketChat's `userList` (sent to every socket on each join and leave) holds at most
    /// `--max-members-listed` users and `--max-members-list-bytes` bytes, as the native door's
    /// `observable_members`; its `userTypingUpdate` (sent with every lobby message) names at
    /// most 20 typists in at most 4 KiB of names, however many type with however long names.
    @Test func socketChatListsAreBoundedHoweverManyJoinOrType() async throws {
        let server = try InProcessServer { $0.maxMembersListed = 5 }
        defer { server.stop() }
        let lobby = server.lobby.room
        var typists: [InProcessNative] = []
        for n in 0..<30 {
            // 64 characters (the name rule's most), 250 bytes.
            let name = String(format: "%02d", n) + String(repeating: "😀", count: 62)
            let native = try await server.native(clientData: ["name": .string(name)], ip: "198.51.100.\(n + 1)")
            #expect(try await native.subscribe(lobby)["error"] == nil)
            native.publish(["typing": true], to: lobby)
            typists.append(native)
        }
        let alice = try await Self.socketChat(server, ip: "203.0.113.21")
        try await alice.post(["420[\"connectUser\",\"alice\"]"])
        let list = try await alice.poll(until: { $0.hasPrefix(#"42["userList""#) })
        let users = try JSONParser.parse(String(list.dropFirst(2))).arrayValue?.last?.arrayValue ?? []
        #expect(users.count == 5, "\(users.count) users listed")
        try await alice.post(["42[\"chatMessage\",\"alice\",\"hi\"]"])
        let typing = try await alice.poll(until: { $0.hasPrefix(#"42["userTypingUpdate""#) })
        let shown = try JSONParser.parse(String(typing.dropFirst(2))).arrayValue?.last?.objectValue ?? [:]
        #expect(shown.count == 16, "\(shown.count) typists named: 4 KiB holds 16 names of 250 bytes")
        #expect(typing.utf8.count < 5 << 10)
        // The bound is reloadable: the list the next join brings follows the new one.
        var reloaded = server.configuration
        reloaded.maxMembersListed = 3
        #expect(server.server.reloadConfiguration { reloaded })
        let late = try await server.native(clientData: ["name": "late"], ip: "198.51.100.99")
        #expect(try await late.subscribe(lobby)["error"] == nil)
        server.clock.advance(millis: 1_000)
        let next = try await alice.poll(until: { $0.hasPrefix(#"42["userList""#) })
        #expect(try JSONParser.parse(String(next.dropFirst(2))).arrayValue?.last?.arrayValue?.count == 3, "\(next.prefix(200))")
        _ = typists
    }

    /// A member's list asked again names who is departed now: a departed user forgotten by an
    /// `exitUser` from a socket not in the lobby (no room event) is gone from it.
    @Test func aUserListAskedAgainFollowsTheRosterWithoutARoomEvent() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await Self.socketChat(server, ip: "203.0.113.11")
        let bob = try await Self.socketChat(server, ip: "203.0.113.12")
        try await alice.post(["420[\"connectUser\",\"alice\"]"])
        _ = try await alice.poll(until: { $0.hasPrefix("430") })
        try await bob.post(["420[\"connectUser\",\"bob\"]"])
        _ = try await bob.poll(until: { $0.hasPrefix("430") })
        try await bob.post(["41"])
        // The lists of a storm of joins and leaves are paced by the server's (manual) clock.
        server.clock.advance(millis: 1_000)
        _ = try await alice.poll(until: { $0.hasPrefix(#"42["userExitUpdate","bob"]"#) })
        func listAskedAgain(_ n: Int) async throws -> String {
            try await alice.post(["42\(n)[\"connectUser\",\"alice\"]"])
            let list = try await alice.poll(until: { $0.hasPrefix(#"42["userList""#) })
            _ = try await alice.poll(until: { $0.hasPrefix("43\(n)") })
            return list
        }
        #expect(try await listAskedAgain(1).contains(#""nickname":"bob","isConnected":false"#))
        let stranger = try await Self.socketChat(server, ip: "203.0.113.13")
        try await stranger.post(["420[\"exitUser\",\"bob\"]"])
        #expect(try await stranger.poll(until: { $0.hasPrefix("430") }) == "430[]")
        let list = try await listAskedAgain(2)
        #expect(!list.contains("bob"), "\(list)")
        #expect(list.contains(#""nickname":"alice""#))
    }

    /// Refusing a join again and again is abuse: the connection is closed, as for the message
    /// rate (the native door with 1008; the Socket.IO session ends). The line door joins once
    /// per connection and never gets there.
    @Test func joinRateAbuseClosesTheNativeConnection() async throws {
        let server = try InProcessServer {
            $0.joinRatePerSecond = 1; $0.joinBurst = 1; $0.nativeMaxRooms = 1
            $0.rateAbuseFactor = 2; $0.rateAbuseWindowMillis = 10_000
        }
        defer { server.stop() }
        let churner = try await server.native(ip: "203.0.113.21")
        #expect(try await churner.subscribe("r")["error"] == nil)
        var codes: [String] = []
        // The same room again: a join (and a snapshot) each time.
        for _ in 0..<3 {
            let reply = try await churner.subscribe("r")
            codes.append(reply["code"]?.stringValue ?? "none")
        }
        #expect(codes == ["join_rate_limited", "join_rate_limited", "rate_abuse"])
        #expect(try await churner.ws.closeCode() == 1008)
        #expect(try Self.breaches(server, "rate_abuse_disconnect") == 1)
    }

    @Test func joinRateAbuseEndsTheSocketIOSession() async throws {
        let server = try InProcessServer {
            $0.joinRatePerSecond = 1; $0.joinBurst = 1
            $0.rateAbuseFactor = 2; $0.rateAbuseWindowMillis = 10_000
        }
        defer { server.stop() }
        let sio = try await Self.socketChat(server, ip: "203.0.113.22")
        try await sio.post(["420[\"connectUser\",\"churner\"]"])
        #expect(try await sio.poll(until: { $0.hasPrefix("430") }) == "430[]")
        try await sio.post(["42[\"exitUser\",\"churner\"]"])
        var acks: [String] = []
        for n in 1...3 {
            try await sio.post(["42\(n)[\"connectUser\",\"churner\"]"])
            acks.append(try await sio.poll(until: { $0.hasPrefix("43\(n)") }))
        }
        #expect(acks == [#"431[{"error":"join rate limit exceeded (1 joins per second); try again shortly"}]"#,
                         #"432[{"error":"join rate limit exceeded (1 joins per second); try again shortly"}]"#,
                         #"433[{"error":"join rate limit exceeded"}]"#])
        #expect(try Self.breaches(server, "rate_abuse_disconnect") == 1)
        try await eventually("the session ended", timeout: 5) {
            (try? await server.request("GET", "/socket.io/?EIO=4&transport=polling&sid=\(sio.sid)", ip: "203.0.113.22", timeout: 1))?.status == 400
        }
    }

    /// History reads are charged to the address, over all its connections.
    @Test func historyBytesAreBudgetedPerAddressOverItsConnections() async throws {
        let server = try InProcessServer { $0.historyBytesPerIPPerSecond = 64 << 10 }
        defer { server.stop() }
        let writer = try await server.native(ip: "203.0.113.1")
        let big = JSONValue.string(String(repeating: "h", count: 100 << 10))
        for _ in 0..<3 { #expect(try await writer.publishAcknowledged(big, to: "h")["error"] == nil) }
        let reader = try await server.native(ip: "192.0.2.6")
        // A page of 300 KiB against a burst of 256 KiB: the address is in debt, and a fresh
        // connection from it (a request rate of its own) reads no more than the first.
        #expect(try await reader.history("h")["messages"]?.arrayValue?.count == 3)
        let fresh = try await server.native(ip: "192.0.2.6")
        for client in [reader, fresh] {
            let refused = try await client.history("h")
            #expect(refused["error"]?.stringValue?.contains("history byte budget of your address spent") == true)
        }
        #expect(try await writer.history("h")["messages"] != nil)
        // A subscribe's history_count reads history too: refused while in debt (a subscribe
        // without history goes), and what a snapshot brought is charged.
        let refusedSubscribe = try await fresh.subscribe("h", historyCount: 10)
        #expect(refusedSubscribe["error"]?.stringValue?.contains("history byte budget of your address spent") == true)
        #expect(try await fresh.subscribe("h2")["error"] == nil)
        #expect(try Self.breaches(server, "history_rate") == 3)
        server.clock.advance(millis: 1_000)
        #expect(try await fresh.history("h")["messages"]?.arrayValue?.count == 3)
        let subscriber = try await server.native(ip: "192.0.2.8")
        #expect(try await subscriber.subscribe("h", historyCount: 3)["error"] == nil)
        for _ in 0..<3 { _ = try await subscriber.next { $0["type"]?.stringValue == "history_message" } }
        #expect(try await subscriber.history("h")["error"]?.stringValue?.contains("history byte budget") == true)
    }

    /// An `inbox` page reads the newest message of each of the user's conversations from the
    /// store, the page's and the others': what it read counts against the address's history
    /// bytes, as a `history` page's messages do, even when the page sends one conversation.
    @Test func inboxPagesSpendTheAddresssHistoryBytes() async throws {
        let server = try InProcessServer { $0.historyBytesPerIPPerSecond = 64 << 10 }
        defer { server.stop() }
        let writer = try await server.native(ip: "203.0.113.31")
        let big = JSONValue.string(String(repeating: "i", count: 100 << 10))
        for room in ["i1", "i2", "i3"] { #expect(try await writer.publishAcknowledged(big, to: room)["error"] == nil) }
        let reader = try await InProcessNative.open(server, ip: "192.0.2.31")
        reader.send(["type": "handshake", "channel": "demo", "user_id": "reader", "callback": 0])
        try reader.accept(handshakeReply: try await reader.next())
        for room in ["i1", "i2", "i3"] { #expect(try await reader.subscribe(room)["error"] == nil) }
        func inbox(limit: Int = 10) async throws -> JSONValue {
            let callback = reader.takeCallback()
            reader.send(["type": "inbox", "limit": .number(JSONNumber(limit)), "callback": .number(JSONNumber(callback))])
            return try await reader.next { $0["callback"]?.intValue == callback }
        }
        // A page of one conversation read 300 KiB of newest messages and 100 KiB counting its
        // unread message, against a burst of 256 KiB: the next page waits until the 144 KiB
        // of debt are paid off (3 s at 64 KiB a second).
        let one = try await inbox(limit: 1)
        #expect(one["conversations"]?.arrayValue?.count == 1)
        #expect(one["has_more"]?.boolValue == true)
        let refused = try await inbox()
        #expect(refused["error"]?.stringValue?.contains("history byte budget of your address spent") == true, "\(refused)")
        #expect(try Self.breaches(server, "history_rate") == 1)
        server.clock.advance(millis: 2_000)
        #expect(try await inbox()["error"]?.stringValue?.contains("history byte budget of your address spent") == true)
        server.clock.advance(millis: 1_000)
        #expect(try await inbox()["conversations"]?.arrayValue?.count == 3)
        // REST reads the same page and pays the same way (an open channel needs no credentials).
        func rest() async throws -> HTTPTestResponse {
            try await server.request("GET", "/demo/users/reader/inbox?limit=1", ip: "198.51.100.31")
        }
        #expect(try await rest().status == 200)
        let spent = try await rest()
        #expect(spent.status == 429)
        #expect(spent.header("Retry-After") == "1")
        #expect(spent.body.contains("history byte budget of your address spent"), "\(spent.body.prefix(200))")
    }

    /// The line door's join history counts against the address's history bytes too; an
    /// address that has spent them still joins, without the recent lines (a line client cannot
    /// ask for them again).
    @Test func aLineJoinsHistoryIsChargedAndLeftOutOnceSpent() async throws {
        let server = try InProcessServer { $0.historyBytesPerIPPerSecond = 64 << 10 }
        defer { server.stop() }
        let writer = try await server.native(ip: "203.0.113.1")
        for n in 0..<3 {
            let line = "line \(n) " + String(repeating: "l", count: 100 << 10)
            #expect(try await writer.publishAcknowledged(.string(line), to: "observable-room")["error"] == nil)
        }
        let first = try await server.line(ip: "192.0.2.9")
        first.send("iam:first\n")
        #expect(try await first.readLine(until: { $0.contains("line 2 ") }).contains("line 2 "))
        _ = try await first.readLine(until: { $0 == "first has joined" })
        // 300 KiB read against a burst of 256 KiB: the next join from the address has none.
        let second = try await server.line(ip: "192.0.2.9")
        second.send("iam:second\n")
        #expect(try await second.readLine(until: { $0 == "second has joined" || $0.contains("line ") }) == "second has joined")
        #expect(try Self.breaches(server, "history_rate") == 1)
        // Another address gets them.
        let other = try await server.line(ip: "198.51.100.4")
        other.send("iam:other\n")
        #expect(try await other.readLine(until: { $0 == "other has joined" || $0.contains("line 0 ") }).contains("line 0 "))
    }

    @Test func metricsListEveryLimitAndOpenConnections() async throws {
        let server = try InProcessServer { $0.webSocketMaxMessageSize = 1024; $0.nativeMaxRooms = 1 }
        defer { server.stop() }
        let client = try await server.native()
        _ = try await client.subscribe("a")
        #expect(try await client.subscribe("b")["error"] != nil)
        let big = try await server.native()
        big.publish(.string(String(repeating: "x", count: 2_000)), to: "a")
        #expect(try await big.ws.closeCode() == 1009)
        try await eventually("big released") { Self.openConnections(server) == 1 }
        let metrics = try await server.request("GET", "/metrics")
        #expect(metrics.status == 200)
        for name in ["max_connections", "max_connections_per_ip", "handshake_timeout", "idle_timeout", "message_size",
                     "message_rate", "rate_abuse_disconnect", "rooms_per_connection", "members_listed", "rest_rate"] {
            #expect(metrics.body.contains("parley_limit_breaches_total{limit=\"\(name)\"} "), "\(name) missing")
        }
        #expect(metrics.body.contains("parley_open_connections 2\n"))  // `client` and the /metrics request
        #expect(metrics.body.contains("parley_limit_breaches_total{limit=\"rooms_per_connection\"} 1\n"))
        #expect(metrics.body.contains("parley_limit_breaches_total{limit=\"message_size\"} 1\n"))
    }

    @Test func limitFlagsParse() throws {
        let configuration = try #require(try ServerConfiguration.parse(arguments: [
            "--max-connections", "5", "--max-connections-per-ip", "3", "--handshake-timeout", "0.5",
            "--idle-timeout", "60", "--max-members-listed", "10", "--rest-rate", "7", "--max-body-size", "2048",
            "--socketio-max-payload", "4096", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--line-tls",
        ], environment: ["PARLEY_IDLE_TIMEOUT": "30"]))
        #expect(configuration.maxConnections == 5)
        #expect(configuration.maxConnectionsPerIP == 3)
        #expect(configuration.handshakeTimeoutMillis == 500)
        #expect(configuration.idleTimeoutMillis == 60_000)
        #expect(configuration.maxMembersListed == 10)
        #expect(configuration.restRatePerSecond == 7 && configuration.restBurst == 14)
        #expect(configuration.httpMaxBodyBytes == 2048)
        #expect(configuration.socketIOMaxPayload == 4096)
        #expect(configuration.tlsCertificateFile == "c.pem" && configuration.tlsKeyFile == "k.pem")
        #expect(configuration.lineTLS)
        let defaults = ServerConfiguration()
        #expect(defaults.maxConnections == 10_000 && defaults.maxConnectionsPerIP == 1_000)
        #expect(defaults.handshakeTimeoutMillis == 10_000 && defaults.idleTimeoutMillis == 300_000)
        #expect(defaults.maxMembersListed == 1_000 && defaults.restRatePerSecond == 20 && defaults.restBurst == 40)
        #expect(!defaults.lineTLS && defaults.tlsCertificateFile == nil)
    }

    @Test func aDoorThatWouldSpeakTLSRefusesAnInMemoryConnection() async throws {
        let (certificate, key) = try makeTestCertificate()
        let server = try InProcessServer { $0.tlsCertificateFile = certificate; $0.tlsKeyFile = key }
        defer { server.stop() }
        let peer = try await server.http()
        // No handler was set: closed at once, nothing said.
        #expect(try await peer.waitForClose() == .local)
        #expect(peer.unread.isEmpty)
        // The line door speaks TLS only with --line-tls: in memory it works.
        _ = try await server.lineClient(name: "plain")
    }
}

/// Startup with bad TLS files stops with a message naming the file (no port is needed).
@Suite struct TLSStartupTests {
    static func startupError(_ adjust: (inout ServerConfiguration) -> Void) -> String? {
        do {
            let server = try InProcessServer(adjust)
            server.stop()
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func missingFilesAndMismatchedPairsStopStartup() throws {
        let one = try makeTestCertificate(), two = try makeTestCertificate()
        let missing = Self.startupError { $0.tlsCertificateFile = "/nonexistent/cert.pem"; $0.tlsKeyFile = one.key }
        #expect(missing == "cannot read the TLS certificate file /nonexistent/cert.pem: No such file or directory")
        let mismatched = Self.startupError { $0.tlsCertificateFile = one.cert; $0.tlsKeyFile = two.key }
        // OpenSSL notices the mismatch while loading the key: "key values mismatch".
        #expect(mismatched?.contains("TLS private key \(two.key)") == true, "\(mismatched ?? "started")")
        #expect(mismatched?.contains("mismatch") == true, "\(mismatched ?? "started")")
        let notPEM = Self.startupError { $0.tlsCertificateFile = one.key; $0.tlsKeyFile = one.key }
        #expect(notPEM?.contains("cannot load TLS certificate \(one.key)") == true, "\(notPEM ?? "started")")
        let halfConfigured = Self.startupError { $0.tlsCertificateFile = one.cert }
        #expect(halfConfigured == "--tls-cert needs --tls-key (the certificate's private key)")
        let lineOnly = Self.startupError { $0.lineTLS = true }
        #expect(lineOnly == "--line-tls needs --tls-cert and --tls-key")
        #expect(Self.startupError { $0.tlsCertificateFile = one.cert; $0.tlsKeyFile = one.key } == nil)
    }
}
