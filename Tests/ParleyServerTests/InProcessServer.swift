import Foundation
import ParleyCore
import ParleyIO
import ParleyLog
@testable import ParleyServer
import ParleyTestSupport

/// A whole server without a socket: no port is bound, every connection is an
/// ``InMemoryPeer`` handed to a door through ``ParleyServer/acceptInMemory(door:remoteIP:loop:)``
/// (bans, limits, the door's policy and session as for a real one), and the wall clock of
/// rate buckets, timestamps, bans and tokens is a ``ManualClock``. The doors' tests run here;
/// `Tests/EndToEndTests` keeps what needs real sockets.
final class InProcessServer: Sendable {
    let server: ParleyServer
    let clock: ManualClock

    /// `store`: the hub's store instead of the SQLite one (a ``GatedStore`` to hold appends).
    init(logger: Logger = .disabled, store: (any MessageStore)? = nil, _ adjust: (inout ServerConfiguration) -> Void = { _ in }) throws {
        let clock = ManualClock(millis: Int64(Date().timeIntervalSince1970 * 1000))
        self.clock = clock
        server = try ParleyServer(configuration: .forTests(adjust), logger: logger, clock: clock, bindsListeners: false) { store ?? $0 }
    }

    var configuration: ServerConfiguration { server.configuration }
    var lobby: RoomKey { server.configuration.lobby }

    /// A fresh connection to the line door.
    func line(ip: String = "127.0.0.1", loop: Int? = nil) async throws -> InMemoryPeer {
        try await server.acceptInMemory(door: .line, remoteIP: ip, loop: loop)
    }

    /// A line user that has said `iam:NAME` and seen its own join.
    func lineClient(name: String, ip: String = "127.0.0.1", loop: Int? = nil) async throws -> InMemoryPeer {
        let peer = try await line(ip: ip, loop: loop)
        peer.send("iam:\(name)\n")
        _ = try await peer.readLine(until: { $0 == "\(name) has joined" })
        return peer
    }

    /// A fresh connection to the HTTP door.
    func http(ip: String = "127.0.0.1", loop: Int? = nil) async throws -> InMemoryPeer {
        try await server.acceptInMemory(door: .http, remoteIP: ip, loop: loop)
    }

    /// One request (`Connection: close`) on a connection of its own, which the client then
    /// closes as a socket client does (so a server lingering after an error need not wait).
    func request(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
                 json: String? = nil, ip: String = "127.0.0.1", timeout: Double = 5) async throws -> HTTPTestResponse {
        let peer = try await http(ip: ip)
        defer { peer.closeWrite() }
        return try await peer.request(method, target, headers: headers, body: body, json: json, close: true, timeout: timeout)
    }

    /// The admin token the in-process admin tests configure.
    static let adminToken = "admin-token-0123456789abcdef"

    /// An admin API call with the admin token and a JSON body; the JSON answer (status 200
    /// expected unless told).
    func admin(_ method: String, _ path: String, body: String? = nil, expect status: Int = 200,
               ip: String = "127.0.0.1") async throws -> JSONValue {
        let response = try await request(method, "/admin/api" + path, headers: [("Authorization", "Bearer \(Self.adminToken)")],
                                         json: body ?? "", ip: ip)
        guard response.status == status else {
            throw InMemoryPeer.Timeout(description: "\(method) \(path): \(response.status) \(response.body), expected \(status)")
        }
        return try JSONParser.parse(response.body)
    }

    /// A native client's handshake whatever its answer: the client and the reply.
    func nativeHandshake(channel: String, clientData: JSONValue? = nil, ip: String = "127.0.0.1") async throws -> (InProcessNative, JSONValue) {
        let client = try await InProcessNative.open(self, ip: ip)
        client.send(NativeCommands.handshake(channel: channel, clientData: clientData))
        let reply = try await client.next()
        if let id = reply["client_id"]?.stringValue { client.clientID = id }
        return (client, reply)
    }

    /// A native (Scaledrone v3) client after its handshake.
    func native(clientData: JSONValue? = nil, channel: String = "demo", ip: String = "127.0.0.1",
                loop: Int? = nil) async throws -> InProcessNative {
        let client = try await InProcessNative.open(self, ip: ip, loop: loop)
        client.send(NativeCommands.handshake(channel: channel, clientData: clientData))
        let reply = try await client.next()
        guard let id = reply["client_id"]?.stringValue, reply["callback"]?.intValue == 0, reply["error"] == nil else {
            throw InMemoryPeer.Timeout(description: "bad handshake reply \(reply)")
        }
        client.clientID = id
        return client
    }

    func stop() { server.shutdown(drain: .zero, timeout: .seconds(1)) }
}

extension InProcessNative {
    /// Publishes a message to `room` (its append let through `store`), then reacts to it and
    /// leaves that append held: the connection has a message action in flight, and the next
    /// ones wait their turn. Returns the message's id.
    func holdAnAction(in room: String, store: GatedStore) async throws -> String {
        send(["type": "publish", "room": .string(room), "message": "target", "callback": 100])
        try await eventually("the publish reaches the store") { store.heldCount == 1 }
        store.release()
        let reply = try await next { $0["callback"]?.intValue == 100 }
        guard let target = reply["id"]?.stringValue else { throw InMemoryPeer.Timeout(description: "no id in the publish's reply \(reply)") }
        send(["type": "react", "room": .string(room), "target": .string(target), "emoji": "👍", "callback": 1])
        try await eventually("the reaction reaches the store") { store.heldCount == 1 }
        return target
    }
}

/// The native door's commands as JSON.
enum NativeCommands {
    static func handshake(channel: String, clientData: JSONValue?) -> JSONValue {
        var handshake: JSONObject = ["type": "handshake", "channel": .string(channel), "callback": 0]
        if let clientData { handshake = JSONObject(Array(handshake) + [("client_data", clientData)]) }
        return .object(handshake)
    }

    static func subscribe(_ room: String, historyCount: Int?, callback: Int) -> JSONValue {
        var command: JSONObject = ["type": "subscribe", "room": .string(room), "callback": .number(JSONNumber(callback))]
        if let historyCount { command = JSONObject(Array(command) + [("history_count", .number(JSONNumber(historyCount)))]) }
        return .object(command)
    }
}

/// A Scaledrone v3 client over an ``InMemoryWebSocket`` that speaks JSON values.
final class InProcessNative: @unchecked Sendable {
    // Safe: used by one test task at a time; Sendable for hand-over only.
    let ws: InMemoryWebSocket
    var clientID = ""
    private var nextCallback = 1

    private init(ws: InMemoryWebSocket) { self.ws = ws }

    /// Upgrades an HTTP connection to the native door; no handshake yet.
    static func open(_ server: InProcessServer, ip: String = "127.0.0.1", loop: Int? = nil,
                     deflate: Bool = false) async throws -> InProcessNative {
        let peer = try await server.http(ip: ip, loop: loop)
        return InProcessNative(ws: try await InMemoryWebSocket(peer, deflate: deflate))
    }

    var peer: InMemoryPeer { ws.peer }

    func send(_ value: JSONValue) { ws.sendText(value.jsonString) }

    func next(timeout: Double = 5) async throws -> JSONValue { try JSONParser.parse(await ws.nextText(timeout: timeout)) }

    func next(timeout: Double = 5, where predicate: (JSONValue) -> Bool) async throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let value = try await next(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if predicate(value) { return value }
        }
    }

    /// Takes the client id of a successful handshake reply.
    func accept(handshakeReply reply: JSONValue) throws {
        guard let id = reply["client_id"]?.stringValue, reply["callback"]?.intValue == 0, reply["error"] == nil else {
            throw InMemoryPeer.Timeout(description: "bad handshake reply \(reply)")
        }
        clientID = id
    }

    func takeCallback() -> Int {
        defer { nextCallback += 1 }
        return nextCallback
    }

    /// Subscribes and returns the reply (the next frames are the room's snapshot).
    @discardableResult
    func subscribe(_ room: String, historyCount: Int? = nil) async throws -> JSONValue {
        let callback = takeCallback()
        send(NativeCommands.subscribe(room, historyCount: historyCount, callback: callback))
        return try await next { $0["callback"]?.intValue == callback }
    }

    func publish(_ message: JSONValue, to room: String) {
        send(["type": "publish", "room": .string(room), "message": message])
    }

    /// Publishes with a callback and returns the receipt.
    func publishAcknowledged(_ message: JSONValue, to room: String) async throws -> JSONValue {
        let callback = takeCallback()
        send(["type": "publish", "room": .string(room), "message": message, "callback": .number(JSONNumber(callback))])
        return try await next { $0["callback"]?.intValue == callback }
    }

    /// One `history` page.
    func history(_ room: String, before: Int? = nil, limit: Int? = nil) async throws -> JSONValue {
        let callback = takeCallback()
        var command: JSONObject = ["type": "history", "room": .string(room), "callback": .number(JSONNumber(callback))]
        if let before { command = JSONObject(Array(command) + [("before", .number(JSONNumber(before)))]) }
        if let limit { command = JSONObject(Array(command) + [("limit", .number(JSONNumber(limit)))]) }
        send(.object(command))
        return try await next { $0["callback"]?.intValue == callback }
    }
}

/// A raw Engine.IO 4 long-polling client over in-memory HTTP connections (one per request).
/// Keeps the packets a poll brought but nobody asked for yet.
final class InProcessPolling: @unchecked Sendable {
    // Safe: used by one test task at a time.
    let server: InProcessServer
    let sid: String
    let ip: String
    private var unread: [String] = []

    private init(server: InProcessServer, sid: String, ip: String) {
        self.server = server
        self.sid = sid
        self.ip = ip
    }

    static func open(_ server: InProcessServer, ip: String = "127.0.0.1") async throws -> InProcessPolling {
        let response = try await server.request("GET", "/socket.io/?EIO=4&transport=polling&t=x", ip: ip)
        guard response.status == 200, let first = response.body.components(separatedBy: "\u{1e}").first, first.hasPrefix("0") else {
            throw InMemoryPeer.Timeout(description: "open: \(response.status) \(response.body)")
        }
        let open = try JSONParser.parse(String(first.dropFirst()))
        return InProcessPolling(server: server, sid: open["sid"]?.stringValue ?? "", ip: ip)
    }

    private var target: String { "/socket.io/?EIO=4&transport=polling&sid=\(sid)" }

    /// The packets of the next GET.
    func poll(timeout: Double = 5) async throws -> [String] {
        let response = try await server.request("GET", target, ip: ip, timeout: timeout)
        guard response.status == 200 else { throw InMemoryPeer.Timeout(description: "poll: \(response.status) \(response.body)") }
        return response.body.components(separatedBy: "\u{1e}")
    }

    /// Polls until a packet satisfies `predicate`.
    func poll(until predicate: (String) -> Bool, timeout: Double = 5) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let index = unread.firstIndex(where: predicate) {
                let hit = unread[index]
                unread.removeSubrange(...index)
                return hit
            }
            unread = []
            guard deadline.timeIntervalSinceNow > 0 else { break }
            unread = try await poll(timeout: max(0.1, deadline.timeIntervalSinceNow))
        }
        throw InMemoryPeer.Timeout(description: "no matching packet within \(timeout) s")
    }

    @discardableResult
    func post(_ packets: [String]) async throws -> HTTPTestResponse {
        try await server.request("POST", target, headers: [("Content-Type", "text/plain;charset=UTF-8")],
                                 body: Array(packets.joined(separator: "\u{1e}").utf8), ip: ip)
    }
}

/// A logger that keeps every line (at `level` and above) for the test to read.
func memoryLogger(level: LogLevel = .debug) -> (Logger, MemoryLogHandler) {
    let memory = MemoryLogHandler()
    return (Logger(label: "parley", destination: LogDestination(handler: memory, level: level)), memory)
}
