import Foundation
import ParleyCore
import ParleyLog
@testable import ParleyServer
import ParleyTestSupport
import Testing

/// The admin API in-process: every call with and without the token, and what each does on
/// every door (line, native, Socket.IO long-polling), over in-memory connections.
@Suite struct AdminInProcessTests {
    static func start(_ adjust: @escaping (inout ServerConfiguration) -> Void = { _ in }) throws -> InProcessServer {
        try InProcessServer { c in
            c.adminToken = InProcessServer.adminToken
            c.nativeRatePerSecond = 1_000_000; c.nativeBurst = 1_000_000
            adjust(&c)
        }
    }

    /// One admin API request with `token` (none when nil).
    static func call(_ server: InProcessServer, _ method: String, _ path: String, token: String? = nil,
                     body: String? = nil) async throws -> HTTPTestResponse {
        try await server.request(method, "/admin/api" + path, headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [],
                                 json: body ?? "")
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
        defer { server.stop() }
        for (method, path) in Self.calls {
            let none = try await Self.call(server, method, path, body: "{}")
            #expect(none.status == 401, "\(method) \(path) without a token: \(none.status)")
            let wrong = try await Self.call(server, method, path, token: "not-the-admin-token", body: "{}")
            #expect(wrong.status == 401, "\(method) \(path) with a wrong token: \(wrong.status)")
        }
        // With it, each call is answered (200, or its own 4xx for a missing target).
        for (method, path) in Self.calls {
            let response = try await Self.call(server, method, path, token: InProcessServer.adminToken, body: "{}")
            #expect(response.status != 401 && response.status < 500, "\(method) \(path): \(response.status) \(response.body)")
        }
        #expect(try await Self.call(server, "GET", "/nothing", token: InProcessServer.adminToken).status == 404)
        #expect(try await Self.call(server, "PUT", "/bans", token: InProcessServer.adminToken).status == 405)

        // No admin token configured: the API is off, whatever is sent.
        let off = try InProcessServer()
        defer { off.stop() }
        let refused = try await Self.call(off, "GET", "/overview", token: InProcessServer.adminToken)
        #expect(refused.status == 401 && refused.body.contains("admin.token"))
    }

    @Test func channelsRoomsAndMembersAcrossDoors() async throws {
        let server = try Self.start()
        defer { server.stop() }
        let alice = try await server.native(clientData: ["name": "alice"])
        _ = try await alice.subscribe("observable-room")
        let bob = try await server.native(clientData: ["name": "bob"])
        _ = try await bob.subscribe("r")
        let carol = try await server.lineClient(name: "carol")
        let sam = try await InProcessPolling.open(server)
        try await sam.post(["40"])
        _ = try await sam.poll(until: { $0.hasPrefix("40") })
        try await sam.post([#"42["connectUser","sam"]"#])
        _ = try await sam.poll(until: { $0.contains("userConnectUpdate") })
        _ = carol

        let channels = try await server.admin("GET", "/channels")
        let demo = try #require(channels["channels"]?.arrayValue?.first { $0["id"] == "demo" })
        #expect(demo["open"] == true && demo["configured"] == false)
        #expect(demo["rooms_in_memory"]?.intValue ?? 0 >= 2)

        let rooms = try await server.admin("GET", "/channels/demo/rooms")
        #expect(rooms["rooms"] == [["room": "observable-room", "members": 3], ["room": "r", "members": 1]])
        #expect(rooms["next"] == .null)
        let first = try await server.admin("GET", "/channels/demo/rooms?limit=1")
        #expect(first["rooms"]?.arrayValue?.count == 1 && first["next"] == "observable-room")
        let second = try await server.admin("GET", "/channels/demo/rooms?limit=1&after=observable-room")
        #expect(second["rooms"] == [["room": "r", "members": 1]])

        let members = try await server.admin("GET", "/channels/demo/rooms/observable-room/members")
        #expect(members["total"] == 3)
        let list = members["members"]?.arrayValue ?? []
        func door(of name: String) -> JSONValue? { list.first { $0["name"]?.stringValue == name }?["door"] }
        #expect(door(of: "alice") == "native")
        #expect(door(of: "carol") == "line")
        #expect(door(of: "sam") == "socketio")
        #expect(list.allSatisfy { $0["ip"] == "127.0.0.1" && $0["connected_here"] == true })

        let overview = try await server.admin("GET", "/overview")
        #expect(overview["version"]?.stringValue == BuildInfo.version)
        #expect(overview["connections"]?["native"] == 2 && overview["connections"]?["line"] == 1)
        #expect(overview["identified_clients"] == 4)
        let clients = try await server.admin("GET", "/clients")
        #expect(Set(clients["clients"]?.arrayValue?.compactMap { $0["door"]?.stringValue } ?? []) == ["native", "line", "socketio"])
        let stats = try await server.admin("GET", "/stats")
        #expect(stats["interval_seconds"]?.doubleValue == 5)
        #expect(stats["samples"]?.arrayValue?.isEmpty == false)
    }

    /// A deleted message: native subscribers are told, the browser client's push; history,
    /// `history_count` and a resume answer a tombstone; a line user joining later never sees
    /// its text.
    @Test func deletingAMessageShowsEverywhereAsDeleted() async throws {
        let server = try Self.start()
        defer { server.stop() }
        let lobby = server.lobby.room
        let alice = try await server.native(clientData: ["name": "alice"])
        _ = try await alice.subscribe(lobby)
        let bob = try await server.native(clientData: ["name": "bob"])
        _ = try await bob.subscribe(lobby)
        for text in ["keep one", "regret this", "keep two"] {
            #expect(try await alice.publishAcknowledged(.string(text), to: lobby)["offset"] != nil)
        }
        _ = try await bob.next { $0["message"] == "keep two" }

        let deleted = try await server.admin("DELETE", "/channels/demo/rooms/\(lobby)/messages/2")
        #expect(deleted == ["deleted": 2])
        let push = try await bob.next { $0["type"] == "message_deleted" }
        #expect(push == ["type": "message_deleted", "room": .string(lobby), "offset": 2])

        let page = try await alice.history(lobby, limit: 10)
        let messages = page["messages"]?.arrayValue ?? []
        #expect(messages.map { $0["offset"] } == [1, 2, 3])
        #expect(messages[1]["deleted"] == true && messages[1]["message"] == .null)
        #expect(!page.jsonString.contains("regret"))

        // A fresh subscriber's history and a resuming one's replay: tombstones.
        let late = try await server.native()
        _ = try await late.subscribe(lobby, historyCount: 10)
        var history: [JSONValue] = []
        while history.count < 3 {
            let frame = try await late.next()
            if frame["type"] == "history_message" { history.append(frame) }
        }
        #expect(history[1]["deleted"] == true && history[1]["message"] == .null && history[1]["offset"] == 2)
        let resumed = try await server.native()
        resumed.send(["type": "subscribe", "room": .string(lobby), "since": 0, "callback": 7])
        var replay: [JSONValue] = []
        while replay.count < 3 {
            let frame = try await resumed.next()
            if frame["type"] == "publish" { replay.append(frame) }
        }
        #expect(replay.map { $0["offset"] } == [1, 2, 3])
        #expect(replay[1]["deleted"] == true && replay[1]["message"] == .null)

        // The line door's join history skips it.
        let carol = try await server.line()
        carol.send("iam:carol\n")
        var lines: [String] = []
        while lines.last != "carol has joined" { lines.append(try await carol.readLine()) }
        #expect(lines.contains("alice:keep one") && lines.contains("alice:keep two"))
        #expect(!lines.contains { $0.contains("regret") })

        let listed = try await server.admin("GET", "/channels/demo/rooms/\(lobby)/messages")
        #expect(listed["messages"]?.arrayValue?.map { $0["deleted"] } == [false, true, false])
        _ = try await server.admin("DELETE", "/channels/demo/rooms/\(lobby)/messages/99", expect: 404)
        _ = try await server.admin("DELETE", "/channels/demo/rooms/\(lobby)/messages/zero", expect: 400)
    }

    @Test func disconnectingAClientOnEachDoor() async throws {
        let (logger, memory) = memoryLogger(level: .info)
        let server = try InProcessServer(logger: logger) { $0.adminToken = InProcessServer.adminToken }
        defer { server.stop() }
        let alice = try await server.native(clientData: ["name": "alice"])
        let carol = try await server.lineClient(name: "carol")
        _ = try await server.admin("POST", "/clients/\(alice.clientID)/disconnect", body: #"{"reason": "spam"}"#)
        #expect(try await alice.next()["error"] == "disconnected by an administrator: spam")
        #expect(try await alice.ws.closeCode() == 1008)
        let carolID = try #require(try await server.admin("GET", "/clients")["clients"]?.arrayValue?.first { $0["door"] == "line" }?["id"]?.stringValue)
        _ = try await server.admin("POST", "/clients/\(carolID)/disconnect")
        #expect(try await carol.readLine(until: { $0.hasPrefix("disconnected") }) == "disconnected by an administrator: by the operator; bye")
        try await carol.waitForClose()
        _ = try await server.admin("POST", "/clients/nobody/disconnect", expect: 404)
        #expect(memory.records.contains { $0.message == "admin: client disconnected" && $0.metadata["reason"] == "spam" })
    }

    @Test func banningANameKeepsItOutOfEveryDoor() async throws {
        let server = try Self.start()
        defer { server.stop() }
        let mallory = try await server.lineClient(name: "Mallory")
        let sam = try await InProcessPolling.open(server)
        try await sam.post(["40"])
        _ = try await sam.poll(until: { $0.hasPrefix("40") })

        let added = try await server.admin("POST", "/bans", body: #"{"name": "mallory", "seconds": 600, "reason": "spam"}"#, expect: 201)
        #expect(added["ban"]?["name"] == "mallory" && added["disconnected"] == 1)
        #expect(try await mallory.readLine(until: { $0.hasPrefix("disconnected") }).contains("banned: spam"))
        try await mallory.waitForClose()

        let again = try await server.line()
        again.send("iam:MALLORY\n")
        #expect(try await again.readLine() == "error: banned from this server; bye")
        try await again.waitForClose()
        let (native, reply) = try await server.nativeHandshake(channel: "demo", clientData: ["name": " Mallory "])
        #expect(reply["error"] == "banned from this server" && reply["client_id"]?.stringValue?.isEmpty == false)
        #expect(try await native.ws.closeCode() == 1008)
        // Socket.IO never emits `error`: the refusal is the answer to an ack.
        try await sam.post([#"421["connectUser","mallory"]"#])
        let refusal = try await sam.poll(until: { $0.contains("banned from this server") })
        #expect(refusal.contains(#"431[{"error":"banned from this server"}]"#), "\(refusal)")
        // Others are not affected; lifting the ban lets the name back in.
        // Throws (failing the test) unless the line door answers "alice has joined".
        _ = try await server.lineClient(name: "alice")
        let bans = try await server.admin("GET", "/bans")
        let id = try #require(bans["bans"]?.arrayValue?.first?["id"]?.intValue)
        #expect(try await server.admin("DELETE", "/bans/\(id)") == ["lifted": .number(JSONNumber(id))])
        _ = try await server.lineClient(name: "mallory")
        _ = try await server.admin("POST", "/bans", body: #"{"name": "x", "ip": "1.2.3.4"}"#, expect: 400)
        _ = try await server.admin("POST", "/bans", body: #"{"ip": "not an ip"}"#, expect: 400)
        _ = try await server.admin("POST", "/bans", body: #"{"name": "x", "seconds": 0}"#, expect: 400)
    }

    /// An address ban refuses new connections on every door at admission and cuts the ones
    /// open from that address (the admin API from it included: lift it from elsewhere).
    @Test func banningAnAddressRefusesItAtAdmission() async throws {
        let server = try Self.start()
        defer { server.stop() }
        let alice = try await server.native(clientData: ["name": "alice"])
        let added = try await server.admin("POST", "/bans", body: #"{"ip": "127.0.0.1", "seconds": 60}"#, expect: 201)
        #expect(added["disconnected"] == 1)
        #expect(try await alice.ws.closeCode() == 1008)
        let line = try await server.line()
        #expect(try await line.readLine() == "error: your address is banned from this server")
        let http = try await server.request("GET", "/healthz")
        #expect(http.status == 503 && http.body.contains("banned"))
        // Lifted from elsewhere (here: in process), the address is welcome again.
        let id = try #require(added["ban"]?["id"]?.intValue)
        #expect(try await server.server.core.banKeeper.remove(id: id))
        #expect(try await server.request("GET", "/healthz").status == 200)
    }

    @Test func closingARoomTellsEveryoneAndEmptiesIt() async throws {
        let server = try Self.start()
        defer { server.stop() }
        let alice = try await server.native(clientData: ["name": "alice"])
        _ = try await alice.subscribe("r")
        _ = try await alice.subscribe("other")
        let carol = try await server.lineClient(name: "carol")

        let closed = try await server.admin("POST", "/channels/demo/rooms/r/close", body: #"{"reason": "maintenance"}"#)
        #expect(closed["closed"] == "r" && closed["members"] == 1)
        #expect(try await alice.next { $0["type"] == "room_closed" } == ["type": "room_closed", "room": "r", "reason": "maintenance"])
        try await eventually("r is empty") { try await server.admin("GET", "/channels/demo/rooms/r/members")["total"] == 0 }
        // No more of r, still everything of `other`.
        #expect(try await server.request("POST", "/demo/r/publish", json: "\"unseen\"").status == 200)
        #expect(try await server.request("POST", "/demo/other/publish", json: "\"seen\"").status == 200)
        #expect(try await alice.next { $0["type"] == "publish" }["message"] == "seen")
        // The room can be joined again.
        #expect(try await alice.subscribe("r")["error"] == nil)

        // Closing the lobby sends its line users away.
        _ = try await server.admin("POST", "/channels/demo/rooms/observable-room/close")
        #expect(try await carol.readLine(until: { $0.contains("closed") }) == "the lobby was closed by an administrator; bye")
        try await carol.waitForClose()
    }
}
