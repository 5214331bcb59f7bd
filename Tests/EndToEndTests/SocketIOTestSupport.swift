import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport

/// A raw Engine.IO long-polling client. Keeps the packets a poll brought but nobody asked
/// for yet.
final class PollingClient {
    let port: Int
    let version: Int?
    let sid: String
    /// The Engine.IO path (`/socket.io/`, or the echo endpoint's).
    var path = "/socket.io/"
    let open: JSONValue
    /// Packets that came with the open packet (EIO3 sends `40` there).
    let rest: [String]
    private var unread: [String] = []

    init(port: Int, version: Int?, sid: String, open: JSONValue, rest: [String]) {
        self.port = port
        self.version = version
        self.sid = sid
        self.open = open
        self.rest = rest
    }

    var query: String { (version.map { "EIO=\($0)&" } ?? "") + "transport=polling&sid=\(sid)" }

    static func open(port: Int, version: Int?, path: String = "/socket.io/") throws -> PollingClient {
        let response = try httpRequest(port: port, "GET", path + "?" + (version.map { "EIO=\($0)&" } ?? "") + "transport=polling&t=x")
        guard response.status == 200 else { throw TestSocket.Failure("open: \(response.status) \(response.body)") }
        let packets = version == 4 ? response.body.components(separatedBy: "\u{1e}") : splitV3(response.body)
        guard let first = packets.first, first.hasPrefix("0") else { throw TestSocket.Failure("no open packet in \(response.body)") }
        let open = try JSONParser.parse(String(first.dropFirst()))
        let client = PollingClient(port: port, version: version, sid: open["sid"]?.stringValue ?? "", open: open, rest: Array(packets.dropFirst()))
        client.path = path
        return client
    }

    /// `<len>:<packet>...`, lengths in UTF-16 units.
    static func splitV3(_ body: String) -> [String] {
        var packets: [String] = []
        var units = Substring(body).utf16[...]
        while let colon = units.firstIndex(of: UInt16(UInt8(ascii: ":"))) {
            let length = Int(String(decoding: units[..<colon], as: UTF16.self)) ?? 0
            let start = units.index(after: colon)
            let end = units.index(start, offsetBy: length)
            packets.append(String(decoding: units[start..<end], as: UTF16.self))
            units = units[end...]
        }
        return packets
    }

    func get(timeout: Double = 5) throws -> HTTPTestResponse {
        try httpRequest(port: port, "GET", "\(path)?\(query)", timeout: timeout)
    }

    /// The packets of the next GET.
    func poll(timeout: Double = 5) throws -> [String] {
        let response = try get(timeout: timeout)
        guard response.status == 200 else { throw TestSocket.Failure("poll: \(response.status) \(response.body)") }
        return version == 4 ? response.body.components(separatedBy: "\u{1e}") : PollingClient.splitV3(response.body)
    }

    /// Polls until a packet satisfies `predicate`.
    func poll(until predicate: (String) -> Bool, timeout: Double = 5) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let index = unread.firstIndex(where: predicate) {
                let hit = unread[index]
                unread.removeSubrange(...index)
                return hit
            }
            unread = []
            guard deadline.timeIntervalSinceNow > 0 else { break }
            unread = try poll(timeout: max(0.1, deadline.timeIntervalSinceNow))
        }
        throw TestSocket.Failure("no matching packet within \(timeout) s")
    }

    @discardableResult
    func post(_ packets: [String]) throws -> HTTPTestResponse {
        let body = version == 4 ? packets.joined(separator: "\u{1e}") : packets.map { "\($0.utf16.count):\($0)" }.joined()
        return try httpRequest(port: port, "POST", "\(path)?\(query)", body: Array(body.utf8),
                           headers: [("Content-Type", "text/plain;charset=UTF-8")])
    }
}

/// The JSON arguments of an event packet `42["name",...]`, when `text` is event `name`.
func eventArguments(_ text: String, _ name: String) -> [JSONValue]? {
    guard text.hasPrefix("42"), let array = (try? JSONParser.parse(String(text.dropFirst(2))))?.arrayValue,
          array.first?.stringValue == name else { return nil }
    return Array(array.dropFirst())
}

/// One SocketChat update a socket received: `userConnectUpdate` (joined) or `userExitUpdate`,
/// with the last `userList` before it (nickname → isConnected).
struct SocketChatUpdate {
    let joined: Bool
    let nickname: String
    let listBefore: [String: Bool]
}

/// The SocketChat updates in `texts`, in order, each with the list in effect when it arrived.
func socketChatUpdates(_ texts: [String]) -> [SocketChatUpdate] {
    var list: [String: Bool] = [:]
    var updates: [SocketChatUpdate] = []
    for text in texts {
        if let users = eventArguments(text, "userList")?.first?.arrayValue {
            list = [:]
            for user in users {
                if let name = user["nickname"]?.stringValue, let connected = user["isConnected"]?.boolValue { list[name] = connected }
            }
        } else if let joined = eventArguments(text, "userConnectUpdate")?.first?["nickname"]?.stringValue {
            updates.append(SocketChatUpdate(joined: true, nickname: joined, listBefore: list))
        } else if let left = eventArguments(text, "userExitUpdate")?.first?.stringValue {
            updates.append(SocketChatUpdate(joined: false, nickname: left, listBefore: list))
        }
    }
    return updates
}

/// Reads `socket` until `predicate` holds for a text, keeping every text read in `texts`.
func readTexts(_ socket: TestWebSocket, into texts: inout [String], timeout: Double = 5,
               until predicate: (String) -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        let text = try socket.receiveText(timeout: max(0.01, deadline.timeIntervalSinceNow))
        texts.append(text)
        if predicate(text) { return }
    }
}

/// Reads `socket` until `count` events `name` (`userConnectUpdate` or `userExitUpdate`) about
/// nicknames starting with `prefix` arrived, keeping every text read in `texts`.
func readSocketChatUpdates(_ socket: TestWebSocket, _ name: String, count: Int, prefix: String,
                           into texts: inout [String], timeout: Double = 30) throws {
    var seen = 0
    try readTexts(socket, into: &texts, timeout: timeout) { text in
        // userConnectUpdate names its user in an object, userExitUpdate as a string.
        if let subject = eventArguments(text, name)?.first,
           (subject.stringValue ?? subject["nickname"]?.stringValue)?.hasPrefix(prefix) == true { seen += 1 }
        return seen == count
    }
}
