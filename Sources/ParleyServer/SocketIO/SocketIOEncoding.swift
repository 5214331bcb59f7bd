import Foundation
import ParleyCore
import ParleyHTTP
import ParleyIO
import ParleyWebSocket

/// How the Socket.IO door shows room events: the SocketChat event set (protocols.md §2).
/// Each event becomes one or more Engine.IO message packets (`42[...]`), encoded once per loop
/// and per framing: WebSocket text frames (the same bytes for EIO3 and EIO4), or the packets
/// joined by `\u{1e}` for polling sessions, which re-frame them per Engine.IO version.
enum SocketIOEncoding {
    /// The Engine.IO packet texts of a room event; empty when the door does not show it.
    static func packets(for event: RoomEvent, users: [SocketChatUser], typing typists: [Member]) -> [String] {
        switch event {
        case .message(let message):
            let typing = typingUpdate(typists)
            if message.isEphemeral { return [typing] }
            let name = message.sender.map(\.displayName) ?? LineEncoding.serverName
            return [typing, newChatMessage(name: name, text: text(of: message.body), millis: message.timestampMillis)]
        case .memberJoined(let member):
            return [userList(users),
                    userConnectUpdate(SocketChatUser(id: member.id, nickname: member.displayName, isConnected: true))]
        case .memberLeft(let member):
            return [userList(users), userExitUpdate(member.displayName), typingUpdate(typists)]
        }
    }

    static func frame(_ packets: [String], as format: WireFormat) -> IOBuffer? {
        guard !packets.isEmpty else { return nil }
        if format == .socketIOPolling {
            return IOBuffer(Array(packets.joined(separator: "\u{1e}").utf8))
        }
        var bytes: [UInt8] = []
        for packet in packets { bytes += WebSocketProtocolMachine.serverTextFrame(Array(packet.utf8)) }
        return IOBuffer(bytes)
    }

    /// A chat body as text: a string as it is, any other JSON as compact JSON text.
    static func text(of body: JSONValue) -> String {
        if case .string(let text) = body { return text }
        return body.jsonString
    }

    /// Human-readable, as the original server's `toLocaleString()` was:
    /// `Sun, 29 Nov 2026 13:49:02 GMT`.
    static func date(millis: Int64) -> String {
        httpDate(Date(timeIntervalSince1970: Double(millis) / 1000))
    }

    static func event(_ name: String, _ arguments: [JSONValue]) -> String {
        "4" + SocketIOPacket.event(name, arguments).encoded
    }

    static func userJSON(_ user: SocketChatUser) -> JSONValue {
        ["id": .string(user.id), "nickname": .string(user.nickname), "isConnected": .bool(user.isConnected)]
    }

    static func userList(_ users: [SocketChatUser]) -> String {
        event("userList", [.array(users.map(userJSON))])
    }

    static func userConnectUpdate(_ user: SocketChatUser) -> String { event("userConnectUpdate", [userJSON(user)]) }
    static func userExitUpdate(_ nickname: String) -> String { event("userExitUpdate", [.string(nickname)]) }
    static func typingUpdate(_ typing: [Member]) -> String { event("userTypingUpdate", [SocketChatRoster.typingMap(typing)]) }

    static func newChatMessage(name: String, text: String, millis: Int64) -> String {
        event("newChatMessage", [.string(name), .string(text), .string(date(millis: millis))])
    }
}
