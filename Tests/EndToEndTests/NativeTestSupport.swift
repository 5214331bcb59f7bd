import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport

/// A server on 127.0.0.1 with both doors on free ports and two loops.
func startTestServer(_ configure: (inout ServerConfiguration) -> Void = { _ in }) throws -> ParleyServer {
    try ParleyServer(configuration: .forTests(configure))
}

func json(_ text: String) throws -> JSONValue { try JSONParser.parse(text) }

/// A Scaledrone v3 client over ``TestWebSocket`` that speaks JSON values.
final class NativeClient {
    let ws: TestWebSocket
    var clientID = ""
    private var nextCallback = 1

    init(port: Int, deflate: Bool = false) throws {
        ws = try TestWebSocket(port: port, deflate: deflate)
    }

    /// Connects and handshakes on `channel`.
    static func connect(_ server: ParleyServer, clientData: JSONValue? = nil, channel: String = "demo") async throws -> NativeClient {
        let client = try NativeClient(port: server.httpPort)
        try client.send(NativeClient.handshake(channel: channel, clientData: clientData))
        let reply = try await client.next()
        try client.accept(handshakeReply: reply)
        return client
    }

    func send(_ value: JSONValue) throws { try ws.sendText(value.jsonString) }

    func next(timeout: Double = 5) async throws -> JSONValue { try await json(ws.nextText(timeout: timeout)) }

    func next(timeout: Double = 5, where predicate: (JSONValue) -> Bool) async throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let value = try await next(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if predicate(value) { return value }
        }
    }

    /// Subscribes and returns the reply (the next frames are the room's snapshot).
    @discardableResult
    static func handshake(channel: String, clientData: JSONValue?) -> JSONValue {
        var handshake: JSONObject = ["type": "handshake", "channel": .string(channel), "callback": 0]
        if let clientData { handshake = JSONObject(Array(handshake) + [("client_data", clientData)]) }
        return .object(handshake)
    }

    func accept(handshakeReply reply: JSONValue) throws {
        guard let id = reply["client_id"]?.stringValue, reply["callback"]?.intValue == 0 else {
            throw TestSocket.Failure("bad handshake reply \(reply)")
        }
        clientID = id
    }

    static func subscribe(_ room: String, historyCount: Int?, callback: Int) -> JSONValue {
        var command: JSONObject = ["type": "subscribe", "room": .string(room), "callback": .number(JSONNumber(callback))]
        if let historyCount { command = JSONObject(Array(command) + [("history_count", .number(JSONNumber(historyCount)))]) }
        return .object(command)
    }

    func takeCallback() -> Int {
        defer { nextCallback += 1 }
        return nextCallback
    }

    @discardableResult
    func subscribe(_ room: String, historyCount: Int? = nil) async throws -> JSONValue {
        let callback = takeCallback()
        try send(NativeClient.subscribe(room, historyCount: historyCount, callback: callback))
        return try await next { $0["callback"]?.intValue == callback }
    }

    func publish(_ message: JSONValue, to room: String) throws {
        try send(["type": "publish", "room": .string(room), "message": message])
    }
}

// Blocking overloads, for tests that drive clients from their own threads (the crash test's
// publishers) or from synchronous test functions. In async code the async versions above are
// chosen, which never block a thread of the small concurrency pool.
extension NativeClient {
    static func connect(_ server: ParleyServer, clientData: JSONValue? = nil, channel: String = "demo") throws -> NativeClient {
        let client = try NativeClient(port: server.httpPort)
        try client.send(NativeClient.handshake(channel: channel, clientData: clientData))
        let reply = try client.next()
        try client.accept(handshakeReply: reply)
        return client
    }

    func next(timeout: Double = 5) throws -> JSONValue { try json(ws.receiveText(timeout: timeout)) }

    func next(timeout: Double = 5, where predicate: (JSONValue) -> Bool) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let value = try next(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if predicate(value) { return value }
        }
    }

    @discardableResult
    func subscribe(_ room: String, historyCount: Int? = nil) throws -> JSONValue {
        let callback = takeCallback()
        try send(NativeClient.subscribe(room, historyCount: historyCount, callback: callback))
        return try next { $0["callback"]?.intValue == callback }
    }
}

