import Foundation
import Synchronization
import Testing
import ParleyCore
import ParleyLog
@testable import ParleyServer
import ParleyTestSupport

/// Two nodes in one process on one real Redis: one chat server, whichever node a client is on.
@Suite(.serialized) struct ClusterTests {
    enum RedisKind: String, CaseIterable, CustomStringConvertible {
        case redis, redisCluster
        var description: String { rawValue }
    }

    /// Two nodes of one cluster (the shared Redis or Redis Cluster, a key prefix of their own).
    static func twoNodes(on kind: RedisKind = .redis, _ adjust: (inout ServerConfiguration) -> Void = { _ in }) throws -> (ParleyServer, ParleyServer) {
        let redisURL = kind == .redis ? try SharedRedisServers.single().url : nil
        let seeds = kind == .redisCluster ? try SharedRedisServers.cluster().seedList : nil
        let prefix = "e2e-\(UUID().uuidString.prefix(8))"
        func node(_ name: String) throws -> ParleyServer {
            try startTestServer { configuration in
                configuration.redisURL = redisURL
                configuration.redisClusterSeeds = seeds
                configuration.redisKeyPrefix = prefix
                configuration.nodeID = name
                adjust(&configuration)
            }
        }
        let a = try node("node-a")
        do {
            return (a, try node("node-b"))
        } catch {
            a.shutdown()
            throw error
        }
    }

    static func socketChat(_ server: ParleyServer, as nickname: String) throws -> TestWebSocket {
        let socket = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
        _ = try socket.receiveText()
        try socket.sendText("40")
        try socket.sendText("42[\"connectUser\",\"\(nickname)\"]")
        _ = try socket.receiveText(until: { eventArguments($0, "userConnectUpdate")?.first?["nickname"] == .string(nickname) })
        return socket
    }

    static func memberIDs(_ server: ParleyServer) throws -> [String] {
        let response = try httpRequest(port: server.httpPort, "GET", "/demo/observable-room/members")
        guard response.status == 200 else { throw TestSocket.Failure("members: \(response.status) \(response.body)") }
        return (try JSONParser.parse(response.body)).arrayValue?.compactMap(\.stringValue) ?? []
    }

    @Test(arguments: RedisKind.allCases)
    func membersOnTwoNodesChatAcrossEveryDoor(kind: RedisKind) async throws {
        let (a, b) = try Self.twoNodes(on: kind)
        defer { a.shutdown(); b.shutdown() }
        #expect(a.nodeID == "node-a" && b.nodeID == "node-b")
        #expect(a.listeningLines.contains { $0.hasPrefix("cluster node node-a on \(kind == .redis ? "redis" : "redis-cluster")://127.0.0.1:") })
        let lobby = a.configuration.lobby.room

        // Socket.IO on A, native on B: each sees the other arrive.
        let sam = try Self.socketChat(a, as: "sam")
        let nina = try await NativeClient.connect(b, clientData: ["name": "nina", "color": "#00FF00"])
        try await nina.subscribe(lobby)
        let members = try await nina.next { $0["type"] == "observable_members" }
        #expect(members["data"]?.arrayValue?.compactMap { $0["clientData"]?["name"]?.stringValue } == ["sam", "nina"])
        _ = try sam.receiveText(until: { eventArguments($0, "userConnectUpdate")?.first?["nickname"] == "nina" })

        // Line users on both nodes: every door hears their joins.
        let lou = try TestSocket(port: b.linePort)
        try lou.send("iam:lou\n")
        _ = try lou.readLine(until: { $0 == "lou has joined" })
        let lea = try TestSocket(port: a.linePort)
        try lea.send("iam:lea\n")
        _ = try lea.readLine(until: { $0 == "lea has joined" })
        _ = try lou.readLine(until: { $0 == "lea has joined" })
        _ = try sam.receiveText(until: { eventArguments($0, "userConnectUpdate")?.first?["nickname"] == "lea" })
        let joined = try await nina.next { $0["type"] == "observable_member_join" && $0["data"]?["clientData"]?["name"] == "lea" }
        #expect(joined["data"]?["id"]?.stringValue?.hasPrefix("line-node-a-") == true, "line ids carry the node: \(joined)")

        // One member list, whichever node is asked, with ids unique across nodes.
        try await eventually("both nodes list the same four members", timeout: 10) {
            let onA = try Self.memberIDs(a), onB = try Self.memberIDs(b)
            return onA.count == 4 && onA == onB && Set(onA).count == 4
        }
        #expect(a.hub.members(of: a.configuration.lobby).map(\.id) == b.hub.members(of: b.configuration.lobby).map(\.id))

        // A newcomer on A gets the whole list in its snapshot, members of B included.
        let otto = try await NativeClient.connect(a, clientData: ["name": "otto"])
        try await otto.subscribe(lobby)
        let ottoSees = try await otto.next { $0["type"] == "observable_members" }
        #expect(Set(ottoSees["data"]?.arrayValue?.compactMap { $0["clientData"]?["name"]?.stringValue } ?? [])
                == ["sam", "nina", "lou", "lea", "otto"])

        // Typing crosses: Socket.IO on A → native on B; native on B → Socket.IO on A.
        try sam.sendText("42[\"startType\",\"sam\"]")
        let typing = try await nina.next { $0["type"] == "publish" }
        #expect(typing["message"] == ["typing": true])
        try nina.publish(["typing": true], to: lobby)
        let update = try sam.receiveText(until: { eventArguments($0, "userTypingUpdate")?.first?["nina"] != nil })
        #expect(eventArguments(update, "userTypingUpdate")?.first?["nina"] == 1)

        // Chat crosses every door both ways.
        try sam.sendText("42[\"chatMessage\",\"sam\",\"hi from A\"]")
        #expect(try lou.readLine(until: { $0.hasPrefix("sam:") }) == "sam:hi from A")
        #expect(try await nina.next { $0["type"] == "publish" && $0["message"]?.stringValue != nil }["message"] == "hi from A")
        try nina.publish("hi from B", to: lobby)
        let chat = try sam.receiveText(until: { eventArguments($0, "newChatMessage")?.first == "nina" })
        #expect(eventArguments(chat, "newChatMessage")?.prefix(2) == ["nina", "hi from B"])
        #expect(try lea.readLine(until: { $0.hasPrefix("nina:") }) == "nina:hi from B")
        try lou.send("msg:line on B\n")
        #expect(try lea.readLine(until: { $0.hasPrefix("lou:") }) == "lou:line on B")
        let lineChat = try sam.receiveText(until: { eventArguments($0, "newChatMessage")?.first == "lou" })
        #expect(eventArguments(lineChat, "newChatMessage")?[1] == "line on B")

        // The SocketChat user list lists everyone, whichever node they are on.
        try sam.sendText("42[\"connectUser\",\"sam\"]")
        let list = try sam.receiveText(until: { eventArguments($0, "userList") != nil })
        let nicknames = eventArguments(list, "userList")?.first?.arrayValue?.compactMap { $0["nickname"]?.stringValue } ?? []
        #expect(Set(nicknames) == ["sam", "nina", "lou", "lea", "otto"])

        // Leaving crosses too.
        lou.abort()
        #expect(try lea.readLine(until: { $0.hasPrefix("lou") }) == "lou has left")
        let exit = try sam.receiveText(until: { eventArguments($0, "userExitUpdate") != nil })
        #expect(eventArguments(exit, "userExitUpdate") == ["lou"])
        _ = try await nina.next { $0["type"] == "observable_member_leave" && $0["data"]?["clientData"]?["name"] == "lou" }
        try await eventually("lou gone from both lists", timeout: 10) {
            try Self.memberIDs(a).count == 4 && Self.memberIDs(b).count == 4
        }
    }

    @Test(arguments: RedisKind.allCases)
    func publishersOnBothNodesAreSeenInOneOrderEverywhere(kind: RedisKind) async throws {
        let (a, b) = try Self.twoNodes(on: kind) { configuration in
            configuration.nativeRatePerSecond = 100_000
            configuration.nativeBurst = 100_000
        }
        defer { a.shutdown(); b.shutdown() }
        let room = "ordering"
        let readers = [try await NativeClient.connect(a), try await NativeClient.connect(b)]
        for reader in readers { try await reader.subscribe(room) }
        let writers = [try await NativeClient.connect(a), try await NativeClient.connect(b)]
        let count = 150
        for n in 0..<count {
            for (index, writer) in writers.enumerated() { try writer.publish(.string("w\(index)-\(n)"), to: room) }
        }
        var seen: [[String]] = []
        for reader in readers {
            var texts: [String] = []
            while texts.count < 2 * count {
                let frame = try await reader.next(timeout: 20) { $0["type"] == "publish" }
                texts.append(frame["message"]?.stringValue ?? "?")
            }
            seen.append(texts)
        }
        #expect(seen[0] == seen[1], "both nodes deliver one order")
        // Each writer's own messages keep their order.
        for index in 0..<2 {
            #expect(seen[0].filter { $0.hasPrefix("w\(index)-") } == (0..<count).map { "w\(index)-\($0)" })
        }
        // History and resume come from Redis, on either node.
        let late = try await NativeClient.connect(b)
        try await late.subscribe(room, historyCount: 5)
        var history: [String] = []
        while history.count < 5 {
            let frame = try await late.next { $0["type"] == "history_message" }
            history.append(frame["message"]?.stringValue ?? "?")
        }
        #expect(history == Array(seen[0].suffix(5)))
    }

    /// What a session sends right after its join reaches everyone, itself included, after
    /// its join: the join goes round Redis before the node hears the room, and a publish sent
    /// meanwhile waits for it instead of falling between the two.
    @Test(arguments: RedisKind.allCases)
    func whatASessionSendsRightAfterItsJoinReachesEveryoneAfterTheJoin(kind: RedisKind) async throws {
        let (a, b) = try Self.twoNodes(on: kind)
        defer { a.shutdown(); b.shutdown() }
        let lobby = a.configuration.lobby.room
        let watcher = try TestSocket(port: b.linePort)
        try watcher.send("iam:wendy\n")
        _ = try watcher.readLine(until: { $0 == "wendy has joined" })
        /// The watcher's next line about `name`: its join first, then what it said.
        func watcherSees(_ name: String) throws -> [String] {
            let joined = try watcher.readLine(timeout: 10, until: { $0.hasPrefix(name) })
            let said = try watcher.readLine(timeout: 10, until: { $0.hasPrefix(name) })
            return [joined, said]
        }
        for round in 0..<3 {
            // The line door: `iam:` and `msg:` in one write.
            let dave = try TestSocket(port: a.linePort)
            try dave.send("iam:dave\(round)\nmsg:lf line \(round)\n")
            #expect(try dave.readLine(timeout: 10, until: { $0.hasPrefix("dave\(round):") }) == "dave\(round):lf line \(round)")
            #expect(try watcherSees("dave\(round)") == ["dave\(round) has joined", "dave\(round):lf line \(round)"])
            dave.abort()
            _ = try watcher.readLine(timeout: 10, until: { $0 == "dave\(round) has left" })

            // The native door: subscribe and publish without waiting for the subscription.
            let nina = try await NativeClient.connect(a, clientData: ["name": JSONValue.string("nina\(round)")])
            try nina.send(NativeClient.subscribe(lobby, historyCount: nil, callback: 900))
            try nina.publish(JSONValue.string("native \(round)"), to: lobby)
            let own = try await nina.next(timeout: 10) { $0["type"] == "publish" }
            #expect(own["message"] == JSONValue.string("native \(round)"))
            #expect(try watcherSees("nina\(round)") == ["nina\(round) has joined", "nina\(round):native \(round)"])

            // SocketChat: `connectUser` and `chatMessage` back to back.
            let sid = try TestWebSocket(port: a.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
            _ = try sid.receiveText()
            try sid.sendText("40")
            try sid.sendText("42[\"connectUser\",\"sid\(round)\"]")
            try sid.sendText("42[\"chatMessage\",\"sid\(round)\",\"sio \(round)\"]")
            let chat = try sid.receiveText(until: { eventArguments($0, "newChatMessage")?.first == .string("sid\(round)") })
            #expect(eventArguments(chat, "newChatMessage")?[1] == .string("sio \(round)"))
            #expect(try watcherSees("sid\(round)") == ["sid\(round) has joined", "sid\(round):sio \(round)"])
        }
    }

    /// A ban made through one node's admin API holds on every node, at once for new
    /// connections there and within the poll for the clients already connected there, and is
    /// listed by every node; lifting it anywhere lifts it everywhere.
    @Test(arguments: RedisKind.allCases)
    func aBanThroughOneNodeHoldsOnEveryNode(kind: RedisKind) async throws {
        let (a, b) = try Self.twoNodes(on: kind) { $0.adminToken = adminToken }
        defer { a.shutdown(); b.shutdown() }
        let onB = try TestSocket(port: b.linePort)
        try onB.send("iam:Mallory\n")
        _ = try onB.readLine(until: { $0 == "Mallory has joined" })
        let added = try await admin(a, "POST", "/bans", body: #"{"name": "mallory", "seconds": 600, "reason": "spam"}"#, expect: 201)
        // B hears of it by its poll (about a second) and disconnects its Mallory.
        #expect(try onB.readLine(timeout: 10, until: { $0.hasPrefix("disconnected") }).contains("banned: spam"))
        try await eventually("B lists the ban", timeout: 10) {
            try await admin(b, "GET", "/bans")["bans"]?.arrayValue?.first?["id"] == added["ban"]?["id"]
        }
        let again = try TestSocket(port: b.linePort)
        try again.send("iam:mallory\n")
        #expect(try again.readLine(timeout: 10) == "error: banned from this server; bye")
        // Lifted through B: A lets the name in again.
        let id = try #require(added["ban"]?["id"]?.intValue)
        _ = try await admin(b, "DELETE", "/bans/\(id)")
        try await eventually("A has lifted it", timeout: 10) { try await admin(a, "GET", "/bans")["bans"]?.arrayValue?.isEmpty == true }
        let back = try TestSocket(port: a.linePort)
        try back.send("iam:mallory\n")
        #expect(try back.readLine(timeout: 10) == "mallory has joined")
    }

    /// The admin API of any node lists every node's connections (with the node that holds
    /// each) and disconnects one held by another node, through that node.
    @Test(arguments: RedisKind.allCases)
    func theAdminAPIOfAnyNodeListsAndDisconnectsEveryNodesClients(kind: RedisKind) async throws {
        let (a, b) = try Self.twoNodes(on: kind) { $0.adminToken = adminToken }
        defer { a.shutdown(); b.shutdown() }
        let onB = try TestSocket(port: b.linePort)
        try onB.send("iam:bella\n")
        _ = try onB.readLine(until: { $0 == "bella has joined" })
        let onA = try TestSocket(port: a.linePort)
        try onA.send("iam:alba\n")
        _ = try onA.readLine(until: { $0 == "alba has joined" })
        func clients(_ json: JSONValue) -> [String: String] {
            var byName: [String: String] = [:]
            for client in json["clients"]?.arrayValue ?? [] {
                if let name = client["name"]?.stringValue, let node = client["node"]?.stringValue { byName[name] = node }
            }
            return byName
        }
        var listed = JSONValue.null
        try await eventually("A lists both nodes' clients", timeout: 10) {
            listed = try await admin(a, "GET", "/clients")
            return clients(listed) == ["alba": "node-a", "bella": "node-b"]
        }
        #expect(listed["total"]?.intValue == 2)
        #expect(listed["nodes"]?.arrayValue?.compactMap { $0["node"]?.stringValue } == ["node-a", "node-b"])
        let bella = try #require(listed["clients"]?.arrayValue?.first { $0["name"] == .string("bella") }?["id"]?.stringValue)
        // The room's members on A: bella with her door and node (the dashboard's Disconnect).
        let lobby = a.configuration.lobby
        let members = try await admin(a, "GET", "/channels/\(lobby.channel)/rooms/\(lobby.room)/members")
        let member = try #require(members["members"]?.arrayValue?.first { $0["id"] == .string(bella) })
        #expect(member["connected_here"] == false && member["node"] == .string("node-b") && member["door"] == .string("line"))
        // Disconnected through A: B carries it out within about a second.
        let asked = try await admin(a, "POST", "/clients/\(bella)/disconnect", body: #"{"reason": "cleanup"}"#, expect: 202)
        #expect(asked["node"] == .string("node-b"))
        #expect(try onB.readLine(timeout: 10, until: { $0.hasPrefix("disconnected") }).contains("cleanup"))
        try await eventually("B's list no longer has bella", timeout: 10) {
            clients(try await admin(a, "GET", "/clients")) == ["alba": "node-a"]
        }
        _ = try await admin(a, "POST", "/clients/nobody-here/disconnect", body: "{}", expect: 404)
        // A node that stops leaves the list within the entry's lifetime.
        b.shutdown()
        try await eventually("A forgets node-b", timeout: 15) {
            try await admin(a, "GET", "/clients")["nodes"]?.arrayValue?.count == 1
        }
    }

    /// The day's upload budget of an address holds across the cluster: the nodes share the
    /// files directory, so two nodes must not give one client two days' worth.
    @Test(arguments: RedisKind.allCases)
    func anAddressesUploadBudgetHoldsAcrossNodes(kind: RedisKind) async throws {
        let (a, b) = try Self.twoNodes(on: kind) {
            $0.uploadBytesPerIPPerDay = 100_000
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!]
        }
        defer { a.shutdown(); b.shutdown() }
        let text = [UInt8](repeating: UInt8(ascii: "a"), count: 60_000)
        let mallory = [("X-Forwarded-For", "203.0.113.66")]
        let first = try a.upload(text, name: "1.txt", type: "text/plain", channel: "demo", headers: mallory)
        #expect(first.status == 201, "\(first.text)")
        let second = try b.upload(text, name: "2.txt", type: "text/plain", channel: "demo", headers: mallory)
        #expect(second.status == 429 && second.text.contains("all nodes together"), "\(second.status) \(second.text)")
        // Another address still has its own, on either node.
        #expect(try b.upload(text, name: "3.txt", type: "text/plain", channel: "demo",
                             headers: [("X-Forwarded-For", "203.0.113.67")]).status == 201)
    }

    /// One SocketChat roster for the cluster: a user who drops without `exitUser` on one
    /// node is listed `isConnected: false` by the others too, and leaves the list when it
    /// exits or comes back.
    @Test(arguments: RedisKind.allCases)
    func everyNodeListsAUserWhoDroppedWithoutExitingAsDisconnected(kind: RedisKind) async throws {
        let (a, b) = try Self.twoNodes(on: kind)
        defer { a.shutdown(); b.shutdown() }
        func departedEntry(_ frame: String, _ nickname: String) -> JSONValue? {
            eventArguments(frame, "userList")?.first?.arrayValue?.first { $0["nickname"] == .string(nickname) }
        }
        let sam = try Self.socketChat(a, as: "sam")
        let nina = try Self.socketChat(b, as: "nina")
        sam.abort()
        // B hears sam leave, then (a read of Redis later) lists him as disconnected.
        let list = try nina.receiveText(timeout: 10, until: { departedEntry($0, "sam")?["isConnected"] == false })
        #expect(departedEntry(list, "sam")?["isConnected"] == false)
        // A newcomer on A, where sam was, sees the same list.
        let otto = try TestWebSocket(port: a.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
        _ = try otto.receiveText()
        try otto.sendText("40")
        try otto.sendText("42[\"connectUser\",\"otto\"]")
        _ = try otto.receiveText(timeout: 10, until: { departedEntry($0, "sam")?["isConnected"] == false })
        // sam comes back on B: connected again, for A's users as well.
        let back = try Self.socketChat(b, as: "sam")
        defer { back.abort() }
        _ = try otto.receiveText(timeout: 10, until: { departedEntry($0, "sam")?["isConnected"] == true })
    }

    /// SocketChat's order across nodes, through the lists' pacing and the roster read a leave
    /// waits for: users joining on A in one burst, then dropping (no `exitUser`) in one burst,
    /// as B's user sees them. Each `userConnectUpdate` follows a list that shows its user
    /// connected, each `userExitUpdate` a list that shows its user departed (listed
    /// disconnected: the roster, read before the list goes, has the departure).
    @Test(arguments: RedisKind.allCases)
    func burstsOfJoinsAndDropsOnOneNodeReachTheOtherEachUpdateAfterAListThatShowsIt(kind: RedisKind) async throws {
        let (a, b) = try Self.twoNodes(on: kind)
        defer { a.shutdown(); b.shutdown() }
        let nina = try Self.socketChat(b, as: "nina")
        let k = 20
        var sockets: [TestWebSocket] = []
        defer { for socket in sockets { socket.abort() } }
        for _ in 0..<k {
            let socket = try TestWebSocket(port: a.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
            _ = try socket.receiveText()
            try socket.sendText("40")
            sockets.append(socket)
        }
        var texts: [String] = []
        for (index, socket) in sockets.enumerated() { try socket.sendText("42[\"connectUser\",\"drop\(index)\"]") }
        try readSocketChatUpdates(nina, "userConnectUpdate", count: k, prefix: "drop", into: &texts, timeout: 20)
        for socket in sockets { socket.abort() }
        try readSocketChatUpdates(nina, "userExitUpdate", count: k, prefix: "drop", into: &texts, timeout: 20)
        let updates = socketChatUpdates(texts).filter { $0.nickname.hasPrefix("drop") }
        for update in updates {
            // Joined: listed connected. Dropped: still listed, disconnected.
            let listed = update.listBefore[update.nickname]
            #expect(listed == update.joined, "\(update.joined ? "userConnectUpdate" : "userExitUpdate")(\(update.nickname)) after a list with \(String(describing: listed))")
        }
        #expect(updates.count == 2 * k)
    }

    @Test func metricsAndReadinessTellRedisState() async throws {
        let (a, b) = try Self.twoNodes()
        defer { a.shutdown(); b.shutdown() }
        try await eventually("node a ready", timeout: 10) {
            let metrics = try httpRequest(port: a.httpPort, "GET", "/metrics").body
            return metrics.contains("parley_redis_up 1") && metrics.contains("parley_cluster_node_info{node_id=\"node-a\"")
        }
        let metrics = try await httpRequest(port: a.httpPort, "GET", "/metrics").body
        #expect(metrics.contains("parley_redis_reconnects_total 0"))
        #expect(metrics.contains("parley_redis_pending_commands "))
    }

    /// Redis dies under a node: clients stay connected, a publish gets a clear error naming
    /// Redis (never silence, never a hang), `/metrics` says Redis is down; when Redis is back
    /// (on its append-only file) everything works again without a restart, history included.
    @Test func whileRedisIsDownPublishesFailClearlyAndEverythingResumes() async throws {
        let redis = try RedisServer.start(appendOnly: true)
        defer { redis.stop() }
        let (logger, log) = memoryLogger(level: .info)
        let node = try ParleyServer(configuration: .forTests { configuration in
            configuration.redisURL = redis.url
            configuration.nodeID = "lonely"
            configuration.presenceLeaseMillis = 3_000
        }, logger: logger)
        defer { node.shutdown() }
        func redisLog() -> [String] {
            log.records.filter { $0.message.hasPrefix("redis ") }.map { "\($0.level) \($0.message)" }
        }
        let client = try await NativeClient.connect(node, clientData: ["name": "ann"])
        try await client.subscribe("observable-r")
        try client.send(["type": "publish", "room": "observable-r", "message": "before", "callback": 10])
        let receipt = try await client.next { $0["callback"] == 10 }
        #expect(receipt["offset"] == 1, "\(receipt)")

        try await eventually("the log says Redis is ready", timeout: 5) { redisLog().count >= 1 }
        redis.kill()
        try await eventually("metrics say Redis is down", timeout: 10) {
            try httpRequest(port: node.httpPort, "GET", "/metrics").body.contains("parley_redis_up 0")
        }
        try await eventually("the log says Redis is down", timeout: 5) { redisLog().count >= 2 }
        let start = ContinuousClock.now
        try client.send(["type": "publish", "room": "observable-r", "message": "while down", "callback": 11])
        let refused = try await client.next(timeout: 10) { $0["callback"] == 11 }
        #expect(refused["error"]?.stringValue?.contains("Redis") == true, "\(refused)")
        #expect(ContinuousClock.now - start < .seconds(6))

        try redis.restart()
        try await eventually("metrics say Redis is up", timeout: 15) {
            try httpRequest(port: node.httpPort, "GET", "/metrics").body.contains("parley_redis_up 1")
        }
        var delivered: JSONValue = .null
        // A try every 100 ms (every 5 ms ran into the publish rate limit while the node was still
        // reconnecting). In cluster mode the message can come back through Redis before the
        // reply does: it is kept if it passes while the reply is awaited.
        try await eventually("a publish works again", timeout: 15, pollMillis: 100) {
            try client.send(["type": "publish", "room": "observable-r", "message": "after", "callback": 12])
            var early: JSONValue?
            let reply = try await client.next(timeout: 5) { frame in
                if frame["type"] == "publish" && frame["message"] == "after" { early = frame }
                return frame["callback"] == 12
            }
            if reply["error"] != nil { return false }
            if let early {
                delivered = early
            } else {
                delivered = try await client.next(timeout: 10) { $0["type"] == "publish" && $0["message"] == "after" }
            }
            return true
        }
        #expect(delivered["offset"] == 2, "the offsets went on from what Redis kept: \(delivered)")
        // The log tells the outage once and its end once (state changes, not every second).
        try await eventually("the log says Redis is back", timeout: 5) { redisLog().count >= 3 }
        #expect(redisLog() == ["info redis ready", "warn redis not usable", "info redis ready"], "\(redisLog())")
        try client.send(["type": "history", "room": "observable-r", "callback": 13])
        let history = try await client.next { $0["callback"] == 13 }
        #expect(history["messages"]?.arrayValue?.compactMap { $0["message"]?.stringValue } == ["before", "after"])
    }

    /// A node that stops gracefully (SIGTERM) says goodbye for its members: they leave on the
    /// other nodes at once, not a lease later.
    @Test func aNodeThatStopsGracefullyAnnouncesItsMembersLeavesAtOnce() throws {
        let (a, b) = try Self.twoNodes()
        defer { a.shutdown() }
        let watcher = try TestSocket(port: a.linePort)
        try watcher.send("iam:watcher\n")
        _ = try watcher.readLine(until: { $0 == "watcher has joined" })
        let leaver = try TestSocket(port: b.linePort)
        try leaver.send("iam:leaver\n")
        _ = try watcher.readLine(until: { $0 == "leaver has joined" })
        let start = Date()
        let stopped = DispatchSemaphore(value: 0)
        Thread {
            b.shutdown()
            stopped.signal()
        }.start()
        _ = try watcher.readLine(timeout: 5, until: { $0 == "leaver has left" })
        #expect(Date().timeIntervalSince(start) < 3, "well before the 10 s lease")
        #expect(stopped.wait(timeout: .now() + 10) == .success)
    }
}
