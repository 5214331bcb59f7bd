import Foundation
import ParleyCore
import ParleyHTTP
import ParleyIO

/// One event the SocketChat application emits.
struct SocketChatEvent: Equatable {
    let name: String
    let arguments: [JSONValue]
}

/// How SocketChat shows room events and its own replies: the SocketChat event set. A room
/// event becomes one or more events, encoded once per loop and per transport as Engine.IO
/// message packets (`42[...]`) for the room fan-out.
enum SocketChatEncoding {
    /// The events showing a room event; empty when SocketChat does not show it.
    static func events(for event: RoomEvent, users: [SocketChatUser], typing typists: [Member]) -> [SocketChatEvent] {
        switch event {
        case .message(let message):
            // Edits, deletes and reactions: the classic app has no event for them (a reply is a message).
            if message.isAction { return [] }
            let typing = typingUpdate(typists)
            if message.isEphemeral || message.isDeleted { return [typing] }
            let name = message.sender.map(\.displayName) ?? LineEncoding.serverName
            return [typing, newChatMessage(name: name, text: text(of: message.body), millis: message.timestampMillis)]
        case .memberJoined(let member):
            return [userList(users),
                    userConnectUpdate(SocketChatUser(id: member.id, nickname: member.displayName, isConnected: true))]
        case .memberLeft(let member):
            return [userList(users), userExitUpdate(member.displayName), typingUpdate(typists)]
        case .messageDeleted, .roomClosed, .read, .conversationAdded:
            // SocketChat has no event for these: a deleted message stays on screen, and a
            // closed lobby disconnects the socket (SocketChatApplication).
            return []
        }
    }

    /// Parley's opt-in events for a lobby message (docs/protocols.md §2), for sockets that
    /// sent `subscribeActions`: `messageInfo` after each `newChatMessage` (its id, and for a
    /// reply the id it answers), and one event per action. Empty for anything else.
    static func optInEvents(for event: RoomEvent) -> [SocketChatEvent] {
        guard case .message(let message) = event, !message.isEphemeral, message.offset > 0 else { return [] }
        let nickname = JSONValue.string(message.sender.map(\.displayName) ?? LineEncoding.serverName)
        let date = JSONValue.string(date(millis: message.timestampMillis))
        guard let action = message.action else {
            if message.isDeleted { return [] }
            var info: JSONObject = ["id": .string(message.id), "nickname": nickname, "text": .string(text(of: message.body)), "date": date]
            if let reply = message.replyTo { info.append(key: "replyTo", value: .string(reply.id)) }
            return [SocketChatEvent(name: "messageInfo", arguments: [.object(info)])]
        }
        let target = JSONValue.string(action.target.id)
        switch action.kind {
        case .edit:
            // Replayed after the target's delete it has no text left: nothing to show.
            if message.isDeleted { return [] }
            return [SocketChatEvent(name: "messageEdited", arguments: [["id": target, "nickname": nickname,
                                                                         "text": .string(text(of: message.body)), "date": date]])]
        case .delete:
            return [SocketChatEvent(name: "messageDeleted", arguments: [["id": target, "nickname": nickname, "date": date]])]
        case .react, .unreact:
            return [SocketChatEvent(name: "reaction", arguments: [["id": target, "nickname": nickname,
                                                                   "emoji": .string(action.emoji ?? ""), "added": .bool(action.kind == .react),
                                                                   "date": date]])]
        }
    }

    /// The Engine.IO packet texts of a room event (events on `/`), for pre-encoded frames.
    static func packets(for event: RoomEvent, users: [SocketChatUser], typing typists: [Member]) -> [String] {
        events(for: event, users: users, typing: typists).map { SocketIOPacket.event($0.name, $0.arguments).engineIOText }
    }

    /// Packet texts as one buffer for every session of `format` on a loop.
    static func frame(_ packets: [String], as format: WireFormat) -> IOBuffer? {
        EngineIOFrames.preEncoded(packets, for: format.engineIOTransport)
    }

    /// A chat body as text: a string as it is, a message with files as
    /// `caption [image] URL [file] URL`, any other JSON as compact JSON text.
    static func text(of body: JSONValue) -> String {
        if case .string(let text) = body { return text }
        if case .attachments(let files) = AttachmentMessage.classify(body) { return files.socketChatText() }
        return body.jsonString
    }

    /// Human-readable, as the original server's `toLocaleString()` was:
    /// `Sun, 29 Nov 2026 13:49:02 GMT`.
    static func date(millis: Int64) -> String {
        httpDate(Date(timeIntervalSince1970: Double(millis) / 1000))
    }

    static func userJSON(_ user: SocketChatUser) -> JSONValue {
        ["id": .string(user.id), "nickname": .string(user.nickname), "isConnected": .bool(user.isConnected)]
    }

    /// The list of `users`, in order, cut after `limit` of them or before the entry that would
    /// take its JSON past `maxBytes` (`--max-members-listed`, `--max-members-list-bytes`, as
    /// the native door's `observable_members`): every socket in the lobby is sent it on each
    /// join and leave. Departed users come last, so they are the first left out.
    static func userList(_ users: [SocketChatUser], limit: Int = .max, maxBytes: Int = .max) -> SocketChatEvent {
        var listed: [JSONValue] = []
        var bytes = 2  // []
        for user in users.prefix(limit) {
            let entry = userJSON(user)
            let size = entry.serialized().count + 1  // and its comma
            guard bytes + size <= maxBytes else { break }
            bytes += size
            listed.append(entry)
        }
        return SocketChatEvent(name: "userList", arguments: [.array(listed)])
    }

    /// Most typists a `userTypingUpdate` names, and most bytes of their names in all: it goes
    /// with every lobby message to every socket, so its size must not be the typists' to set.
    static let maxTypistsShown = 20
    static let maxTypingNameBytes = 4 << 10

    static func userConnectUpdate(_ user: SocketChatUser) -> SocketChatEvent {
        SocketChatEvent(name: "userConnectUpdate", arguments: [userJSON(user)])
    }

    static func userExitUpdate(_ nickname: String) -> SocketChatEvent {
        SocketChatEvent(name: "userExitUpdate", arguments: [.string(nickname)])
    }

    static func typingUpdate(_ typing: [Member]) -> SocketChatEvent {
        SocketChatEvent(name: "userTypingUpdate",
                        arguments: [SocketChatRoster.typingMap(typing, limit: maxTypistsShown, maxNameBytes: maxTypingNameBytes)])
    }

    static func newChatMessage(name: String, text: String, millis: Int64) -> SocketChatEvent {
        SocketChatEvent(name: "newChatMessage", arguments: [.string(name), .string(text), .string(date(millis: millis))])
    }
}
