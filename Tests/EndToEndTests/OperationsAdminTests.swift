import Foundation
import ParleyCore
@testable import ParleyServer
import ParleyTestSupport
import Testing

/// The admin API: every call with and without the token, and what each does on every door.
@Suite(.serialized) struct OperationsAdminTests {
    static func start(_ adjust: (inout ServerConfiguration) -> Void = { _ in }) throws -> ParleyServer {
        try startTestServer { c in
            c.adminToken = adminToken
            c.nativeRatePerSecond = 1_000_000; c.nativeBurst = 1_000_000
            adjust(&c)
        }
    }

    static let calls: [(String, String)] = [
        ("GET", "/overview"), ("GET", "/stats"), ("GET", "/channels"), ("GET", "/channels/demo/rooms"),
        ("GET", "/channels/demo/rooms/r/members"), ("GET", "/channels/demo/rooms/r/messages"),
        ("DELETE", "/channels/demo/rooms/r/messages/1"), ("POST", "/channels/demo/rooms/r/close"),
        ("GET", "/clients"), ("POST", "/clients/someone/disconnect"), ("GET", "/bans"), ("POST", "/bans"),
        ("DELETE", "/bans/1"),
    ]

    @Test func everyCallNeedsTheAdminToken() async throws {
        let server = try Self.start()
        defer { server.shutdown() }
        for (method, path) in Self.calls {
            let none = try await operationsRequest(server, method, "/admin/api" + path, body: "{}")
            #expect(none.status == 401, "\(method) \(path) without a token: \(none.status)")
            let wrong = try await operationsRequest(server, method, "/admin/api" + path, token: "not-the-admin-token", body: "{}")
            #expect(wrong.status == 401, "\(method) \(path) with a wrong token: \(wrong.status)")
        }
        // With it, each call is answered (200, or its own 4xx for a missing target).
        for (method, path) in Self.calls {
            let response = try await operationsRequest(server, method, "/admin/api" + path, token: adminToken, body: "{}")
            #expect(response.status != 401 && response.status < 500, "\(method) \(path): \(response.status) \(response.body)")
        }
        #expect(try await operationsRequest(server, "GET", "/admin/api/nothing", token: adminToken).status == 404)
        #expect(try await operationsRequest(server, "PUT", "/admin/api/bans", token: adminToken).status == 405)

        // No admin token configured: the API is off, whatever is sent.
        let off = try startTestServer()
        defer { off.shutdown() }
        let refused = try await operationsRequest(off, "GET", "/admin/api/overview", token: adminToken)
        #expect(refused.status == 401 && refused.body.contains("admin.token"))
    }

    @Test func channelsRoomsAndMembersAcrossDoors() async throws {
        let server = try Self.start()
        defer { server.shutdown() }
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice"])
        _ = try await alice.subscribe("observable-room")
        let bob = try await NativeClient.connect(server, clientData: ["name": "bob"])
        _ = try await bob.subscribe("r")
        let carol = try server.lineClientForLogTest(name: "carol")
        let sam = try PollingClient.open(port: server.httpPort, version: 4)
        try sam.post(["40"])
        _ = try sam.poll(until: { $0.hasPrefix("40") })
        try sam.post([#"42["connectUser","sam"]"#])
        _ = try sam.poll(until: { $0.contains("userConnectUpdate") })
        _ = carol

        let channels = try await admin(server, "GET", "/channels")
        let demo = try #require(channels["channels"]?.arrayValue?.first { $0["id"] == "demo" })
        #expect(demo["open"] == true && demo["configured"] == false)
        #expect(demo["rooms_in_memory"]?.intValue ?? 0 >= 2)

        let rooms = try await admin(server, "GET", "/channels/demo/rooms")
        #expect(rooms["rooms"] == [["room": "observable-room", "members": 3], ["room": "r", "members": 1]])
        #expect(rooms["next"] == .null)
        let first = try await admin(server, "GET", "/channels/demo/rooms?limit=1")
        #expect(first["rooms"]?.arrayValue?.count == 1 && first["next"] == "observable-room")
        let second = try await admin(server, "GET", "/channels/demo/rooms?limit=1&after=observable-room")
        #expect(second["rooms"] == [["room": "r", "members": 1]])

        let members = try await admin(server, "GET", "/channels/demo/rooms/observable-room/members")
        #expect(members["total"] == 3)
        let list = members["members"]?.arrayValue ?? []
        func door(of name: String) -> JSONValue? { list.first { $0["name"]?.stringValue == name }?["door"] }
        #expect(door(of: "alice") == "native")
        #expect(door(of: "carol") == "line")
        #expect(door(of: "sam") == "socketio")
        #expect(list.allSatisfy { $0["ip"] == "127.0.0.1" && $0["connected_here"] == true })

        let overview = try await admin(server, "GET", "/overview")
        #expect(overview["version"]?.stringValue == BuildInfo.version)
        #expect(overview["connections"]?["native"] == 2 && overview["connections"]?["line"] == 1)
        #expect(overview["identified_clients"] == 4)
        let clients = try await admin(server, "GET", "/clients")
        #expect(Set(clients["clients"]?.arrayValue?.compactMap { $0["door"]?.stringValue } ?? []) == ["native", "line", "socketio"])
        let stats = try await admin(server, "GET", "/stats")
        #expect(stats["interval_seconds"]?.doubleValue == 5)
        #expect(stats["samples"]?.arrayValue?.isEmpty == false)
    }

    /// A deleted message: native subscribers are told, the browser client's push; history,
    /// `history_count` and a resume answer a tombstone; a line user joining later never sees
    /// its text.
    @Test func deletingAMessageShowsEverywhereAsDeleted() async throws {
        let server = try Self.start()
        defer { server.shutdown() }
        let lobby = server.configuration.lobby.room
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice"])
        _ = try await alice.subscribe(lobby)
        let bob = try await NativeClient.connect(server, clientData: ["name": "bob"])
        _ = try await bob.subscribe(lobby)
        for text in ["keep one", "regret this", "keep two"] {
            #expect(try await alice.publishAcknowledged(.string(text), to: lobby)["offset"] != nil)
        }
        _ = try await bob.next { $0["message"] == "keep two" }

        let deleted = try await admin(server, "DELETE", "/channels/demo/rooms/\(lobby)/messages/2")
        #expect(deleted == ["deleted": 2])
        let push = try await bob.next { $0["type"] == "message_deleted" }
        #expect(push == ["type": "message_deleted", "room": .string(lobby), "offset": 2])

        let page = try await alice.history(lobby, limit: 10)
        let messages = page["messages"]?.arrayValue ?? []
        #expect(messages.map { $0["offset"] } == [1, 2, 3])
        #expect(messages[1]["deleted"] == true && messages[1]["message"] == .null)
        #expect(!page.jsonString.contains("regret"))

        // A fresh subscriber's history and a resuming one's replay: tombstones.
        let late = try await NativeClient.connect(server)
        _ = try await late.subscribe(lobby, historyCount: 10)
        var history: [JSONValue] = []
        while history.count < 3 {
            let frame = try await late.next()
            if frame["type"] == "history_message" { history.append(frame) }
        }
        #expect(history[1]["deleted"] == true && history[1]["message"] == .null && history[1]["offset"] == 2)
        let resumed = try await NativeClient.connect(server)
        try resumed.send(["type": "subscribe", "room": .string(lobby), "since": 0, "callback": 7])
        var replay: [JSONValue] = []
        while replay.count < 3 {
            let frame = try await resumed.next()
            if frame["type"] == "publish" { replay.append(frame) }
        }
        #expect(replay.map { $0["offset"] } == [1, 2, 3])
        #expect(replay[1]["deleted"] == true && replay[1]["message"] == .null)

        // The line door's join history skips it.
        let carol = try TestSocket(port: server.linePort)
        try carol.send("iam:carol\n")
        var lines: [String] = []
        while lines.last != "carol has joined" { lines.append(try await carol.nextLine()) }
        #expect(lines.contains("alice:keep one") && lines.contains("alice:keep two"))
        #expect(!lines.contains { $0.contains("regret") })

        let listed = try await admin(server, "GET", "/channels/demo/rooms/\(lobby)/messages")
        #expect(listed["messages"]?.arrayValue?.map { $0["deleted"] } == [false, true, false])
        _ = try await admin(server, "DELETE", "/channels/demo/rooms/\(lobby)/messages/99", expect: 404)
        _ = try await admin(server, "DELETE", "/channels/demo/rooms/\(lobby)/messages/zero", expect: 400)
    }

    @Test func disconnectingAClientOnEachDoor() async throws {
        let (logger, memory) = memoryLogger(level: .info)
        let server = try ParleyServer(configuration: .forTests { $0.adminToken = adminToken }, logger: logger)
        defer { server.shutdown() }
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice"])
        let carol = try server.lineClientForLogTest(name: "carol")
        _ = try await admin(server, "POST", "/clients/\(alice.clientID)/disconnect", body: #"{"reason": "spam"}"#)
        #expect(try await alice.next()["error"] == "disconnected by an administrator: spam")
        #expect(try await alice.ws.closeCode() == 1008)
        let carolID = try #require(try await admin(server, "GET", "/clients")["clients"]?.arrayValue?.first { $0["door"] == "line" }?["id"]?.stringValue)
        _ = try await admin(server, "POST", "/clients/\(carolID)/disconnect")
        #expect(try await carol.nextLine(until: { $0.hasPrefix("disconnected") }) == "disconnected by an administrator: by the operator; bye")
        #expect(await carol.closed(within: 5))
        _ = try await admin(server, "POST", "/clients/nobody/disconnect", expect: 404)
        #expect(memory.records.contains { $0.message == "admin: client disconnected" && $0.metadata["reason"] == "spam" })
    }

    @Test func banningANameKeepsItOutOfEveryDoor() async throws {
        let server = try Self.start()
        defer { server.shutdown() }
        let mallory = try server.lineClientForLogTest(name: "Mallory")
        let sam = try PollingClient.open(port: server.httpPort, version: 4)
        try sam.post(["40"])
        _ = try sam.poll(until: { $0.hasPrefix("40") })

        let added = try await admin(server, "POST", "/bans", body: #"{"name": "mallory", "seconds": 600, "reason": "spam"}"#, expect: 201)
        #expect(added["ban"]?["name"] == "mallory" && added["disconnected"] == 1)
        #expect(try await mallory.nextLine(until: { $0.hasPrefix("disconnected") }).contains("banned: spam"))
        #expect(await mallory.closed(within: 5))

        let again = try TestSocket(port: server.linePort)
        try again.send("iam:MALLORY\n")
        #expect(try await again.nextLine() == "error: banned from this server; bye")
        #expect(await again.closed(within: 5))
        let (native, reply) = try await NativeClient.handshake(server, channel: "demo", clientData: ["name": " Mallory "])
        #expect(reply["error"] == "banned from this server" && reply["client_id"]?.stringValue?.isEmpty == false)
        #expect(try await native.ws.closeCode() == 1008)
        // Socket.IO never emits `error`: the refusal is the answer to an ack.
        try sam.post([#"421["connectUser","mallory"]"#])
        let refusal = try sam.poll(until: { $0.contains("banned from this server") })
        #expect(refusal.contains(#"431[{"error":"banned from this server"}]"#), "\(refusal)")
        // Others are not affected; lifting the ban lets the name back in.
        // Throws (failing the test) unless the line door answers "alice has joined".
        _ = try server.lineClientForLogTest(name: "alice")
        let bans = try await admin(server, "GET", "/bans")
        let id = try #require(bans["bans"]?.arrayValue?.first?["id"]?.intValue)
        #expect(try await admin(server, "DELETE", "/bans/\(id)") == ["lifted": .number(JSONNumber(id))])
        _ = try server.lineClientForLogTest(name: "mallory")
        _ = try await admin(server, "POST", "/bans", body: #"{"name": "x", "ip": "1.2.3.4"}"#, expect: 400)
        _ = try await admin(server, "POST", "/bans", body: #"{"ip": "not an ip"}"#, expect: 400)
        _ = try await admin(server, "POST", "/bans", body: #"{"name": "x", "seconds": 0}"#, expect: 400)
    }

    /// An address ban refuses new connections on every door at admission and cuts the ones
    /// open from that address (the admin API from it included: lift it from elsewhere).
    @Test func banningAnAddressRefusesItAtAdmission() async throws {
        let server = try Self.start()
        defer { server.shutdown() }
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice"])
        let added = try await admin(server, "POST", "/bans", body: #"{"ip": "127.0.0.1", "seconds": 60}"#, expect: 201)
        #expect(added["disconnected"] == 1)
        #expect(try await alice.ws.closeCode() == 1008)
        let line = try TestSocket(port: server.linePort)
        #expect(try await line.nextLine() == "error: your address is banned from this server")
        let http = try await operationsRequest(server, "GET", "/healthz")
        #expect(http.status == 503 && http.body.contains("banned"))
        // Lifted from elsewhere (here: in process), the address is welcome again.
        let id = try #require(added["ban"]?["id"]?.intValue)
        #expect(try await server.core.banKeeper.remove(id: id))
        #expect(try await operationsRequest(server, "GET", "/healthz").status == 200)
    }

    /// Behind a trusted proxy, the client is the one its RFC 7239 `Forwarded` header names:
    /// an address ban holds on it, and a neighbour is not caught by it.
    @Test func aBanHoldsOnTheClientATrustedProxyNamesInForwarded() async throws {
        let server = try Self.start { $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!] }
        defer { server.shutdown() }
        _ = try await admin(server, "POST", "/bans", body: #"{"ip": "203.0.113.77", "seconds": 60}"#, expect: 201)
        let banned = try await httpRequest(port: server.httpPort, "GET", "/healthz", headers: [("Forwarded", #"for="203.0.113.77:5000";proto=https"#)])
        #expect(banned.status == 403 && banned.body.contains("banned"), "\(banned.status) \(banned.body)")
        let neighbour = try await httpRequest(port: server.httpPort, "GET", "/healthz", headers: [("Forwarded", "for=203.0.113.78")])
        #expect(neighbour.status == 200)
    }

    /// Bans are kept in the data directory: a restarted (or crashed) server still has them.
    @Test func aBanOutlivesARestart() async throws {
        let first = try Self.start()
        let directory = first.configuration.dataDirectory
        let added = try await admin(first, "POST", "/bans", body: #"{"name": "mallory", "seconds": 600, "reason": "spam"}"#, expect: 201)
        first.shutdown(drain: .zero, timeout: .seconds(1))
        let second = try Self.start { $0.dataDirectory = directory }
        defer { second.shutdown() }
        let bans = try await admin(second, "GET", "/bans")
        #expect(bans["bans"]?.arrayValue?.first?["id"] == added["ban"]?["id"])
        #expect(bans["bans"]?.arrayValue?.first?["reason"] == "spam")
        let again = try TestSocket(port: second.linePort)
        try again.send("iam:mallory\n")
        #expect(try await again.nextLine() == "error: banned from this server; bye")
    }

    @Test func closingARoomTellsEveryoneAndEmptiesIt() async throws {
        let server = try Self.start()
        defer { server.shutdown() }
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice"])
        _ = try await alice.subscribe("r")
        _ = try await alice.subscribe("other")
        let carol = try server.lineClientForLogTest(name: "carol")

        let closed = try await admin(server, "POST", "/channels/demo/rooms/r/close", body: #"{"reason": "maintenance"}"#)
        #expect(closed["closed"] == "r" && closed["members"] == 1)
        #expect(try await alice.next { $0["type"] == "room_closed" } == ["type": "room_closed", "room": "r", "reason": "maintenance"])
        try await eventually("r is empty") { try await admin(server, "GET", "/channels/demo/rooms/r/members")["total"] == 0 }
        // No more of r, still everything of `other`.
        #expect(try await operationsRequest(server, "POST", "/demo/r/publish", body: "\"unseen\"").status == 200)
        #expect(try await operationsRequest(server, "POST", "/demo/other/publish", body: "\"seen\"").status == 200)
        #expect(try await alice.next { $0["type"] == "publish" }["message"] == "seen")
        // The room can be joined again.
        #expect(try await alice.subscribe("r")["error"] == nil)

        // Closing the lobby sends its line users away.
        _ = try await admin(server, "POST", "/channels/demo/rooms/observable-room/close")
        #expect(try await carol.nextLine(until: { $0.contains("closed") }) == "the lobby was closed by an administrator; bye")
        #expect(await carol.closed(within: 5))
    }
}
