import ParleyCore
import ParleyIO
import ParleyWebSocket

private typealias Field = NativeProtocol.Field
private typealias MessageType = NativeProtocol.MessageType

/// How the native (Scaledrone v3) door writes JSON: room events once per loop, replies per
/// connection. Field names (`NativeProtocol`, shared with the SDK and the bench) and types
/// are exactly what the official SDKs read.
enum NativeEncoding {
    /// A room event as one shared, uncompressed WebSocket text frame; nil when the door does
    /// not show it (membership of rooms that are not observable).
    static func encode(_ event: RoomEvent, in room: RoomKey) -> IOBuffer? {
        guard let json = eventJSON(event, in: room) else { return nil }
        return WebSocketProtocolMachine.serverTextFrameBuffer(json)
    }

    static func eventJSON(_ event: RoomEvent, in room: RoomKey) -> [UInt8]? {
        // A message's frame gets room for the fields around its body (read once): the buffer
        // is not grown.
        var w: JSONWriter
        var body: [UInt8] = []
        if case .message(let message) = event {
            body = message.bodyJSON
            w = JSONWriter(capacity: body.count + 384)
        } else {
            w = JSONWriter()
        }
        switch event {
        case .message(let message):
            writeMessage(message, body: body, type: MessageType.publish, index: nil, into: &w)
        case .messageDeleted(let offset):
            w.beginObject()
            w.key(Field.type); w.writeString(MessageType.messageDeleted)
            w.key(Field.room); w.writeString(room.room)
            w.key(Field.offset); w.writeInt(Int(offset))
            w.endObject()
        case .roomClosed(let reason):
            w.beginObject()
            w.key(Field.type); w.writeString(MessageType.roomClosed)
            w.key(Field.room); w.writeString(room.room)
            w.key(Field.reason); w.writeString(reason)
            w.endObject()
        case .read(let receipt):
            // Shown only to sessions that asked for receipts (NativeSession).
            w.beginObject()
            w.key(Field.type); w.writeString(MessageType.read)
            w.key(Field.room); w.writeString(room.room)
            w.key(Field.user); w.writeString(receipt.user)
            w.key(Field.name); w.writeString(receipt.name)
            w.key(Field.offset); w.writeInt(Int(receipt.offset))
            w.endObject()
        case .conversationAdded:
            // Only inbox watchers hear notice rooms, and they read the event itself.
            return nil
        case .memberJoined(let member), .memberLeft(let member):
            guard room.isObservable else { return nil }
            let joined = if case .memberJoined = event { true } else { false }
            w.beginObject()
            w.key(Field.type); w.writeString(joined ? MessageType.observableMemberJoin : MessageType.observableMemberLeave)
            w.key(Field.room); w.writeString(room.room)
            w.key(Field.data); writeMember(member, into: &w)
            w.endObject()
        }
        return w.bytes
    }

    /// `publish` / `history_message`: `client_id` only with a sender, `offset` only for stored
    /// messages, `index` only in history; a deleted message is a tombstone (`message: null,
    /// deleted: true`); a reply has `reply_to`; a message in its current state (history) has
    /// `edited` once edited and `reactions` once reacted to. An action entry (live or
    /// replayed) is written as its own event instead (``writeAction(_:_:into:)``).
    /// `body`: the message's ``Message/bodyJSON`` when the caller already has it.
    static func writeMessage(_ message: Message, body: [UInt8]? = nil, type: String, index: Int?, into w: inout JSONWriter) {
        if let action = message.action { return writeAction(message, action, into: &w) }
        w.beginObject()
        w.key(Field.type); w.writeString(type)
        w.key(Field.room); w.writeString(message.room.room)
        // Encoded once per message, shared by every loop and the store.
        w.key(Field.message); w.writeRawValue(body ?? message.bodyJSON)
        if message.isDeleted { w.key(Field.deleted); w.writeBool(true) }
        w.key(Field.id); w.writeString(message.id)
        w.key(Field.timestamp); w.writeInt(Int(message.timestampSeconds))
        if let sender = message.sender {
            w.key(Field.clientID); w.writeString(sender.id)
            if let user = sender.userID { w.key(Field.user); w.writeString(user) }
        }
        if message.offset > 0 { w.key(Field.offset); w.writeInt(Int(message.offset)) }
        if let index { w.key(Field.index); w.writeInt(index) }
        if let replyTo = message.replyTo { w.key(Field.replyTo); w.writeString(replyTo.id) }
        if let edited = message.editedMillis { w.key(Field.edited); w.writeInt(Int(edited / 1000)) }
        if !message.reactions.isEmpty {
            w.key(Field.reactions)
            w.beginArray()
            for reaction in message.reactions {
                w.beginObject()
                w.key(Field.emoji); w.writeString(reaction.emoji)
                w.key(Field.count); w.writeInt(reaction.count)
                w.key(Field.names)
                w.beginArray()
                for name in reaction.shownNames { w.writeString(name) }
                w.endArray()
                w.endObject()
            }
            w.endArray()
        }
        w.endObject()
    }

    /// An action event: `{type: edit|delete|react|unreact, room, id, target, timestamp,
    /// client_id, offset}` plus the edit's `message` (null and `deleted: true` once its
    /// target was deleted) or the reaction's `emoji`. A type Scaledrone SDKs do not know,
    /// so they pass it by.
    static func writeAction(_ entry: Message, _ action: MessageAction, into w: inout JSONWriter) {
        w.beginObject()
        w.key(Field.type); w.writeString(action.kind.rawValue)
        w.key(Field.room); w.writeString(entry.room.room)
        w.key(Field.id); w.writeString(entry.id)
        w.key(Field.target); w.writeString(action.target.id)
        if action.kind == .edit {
            w.key(Field.message); w.writeRawValue(entry.bodyJSON)
            if entry.isDeleted { w.key(Field.deleted); w.writeBool(true) }
        }
        if let emoji = action.emoji { w.key(Field.emoji); w.writeString(emoji) }
        w.key(Field.timestamp); w.writeInt(Int(entry.timestampSeconds))
        if let sender = entry.sender { w.key(Field.clientID); w.writeString(sender.id) }
        w.key(Field.offset); w.writeInt(Int(entry.offset))
        w.endObject()
    }

    /// An error reply for a refused chat operation, with its stable `code`.
    static func refusal(callback: Int?, _ refusal: ChatRefusal) -> [UInt8] {
        reply(callback: callback, error: refusal.message) { w in
            w.key(Field.code); w.writeString(refusal.code.rawValue)
        }
    }

    /// A replayed message (subscribe `since`): exactly the live `publish` push.
    static func replayMessage(_ message: Message) -> [UInt8] {
        var w = JSONWriter()
        writeMessage(message, type: MessageType.publish, index: nil, into: &w)
        return w.bytes
    }

    /// `{callback, messages: [...], has_more}`: a page of history, oldest first; each message
    /// as in `history_message`, without `index`.
    static func historyPage(callback: Int?, _ page: MessagePage) -> [UInt8] {
        reply(callback: callback) { w in
            w.key(Field.messages)
            w.beginArray()
            for message in page.messages { writeMessage(message, type: MessageType.historyMessage, index: nil, into: &w) }
            w.endArray()
            w.key(Field.hasMore); w.writeBool(page.hasMore)
        }
    }

    static func historyMessage(_ message: Message, index: Int) -> [UInt8] {
        var w = JSONWriter()
        writeMessage(message, type: MessageType.historyMessage, index: index, into: &w)
        return w.bytes
    }

    /// `{"id":"..","clientData":..,"authData":..}`, the optional fields only when set.
    static func writeMember(_ member: Member, into w: inout JSONWriter) {
        w.beginObject()
        w.key(Field.id); w.writeString(member.id)
        if let clientData = member.clientData { w.key(Field.memberClientData); w.write(clientData) }
        if let authData = member.authData { w.key(Field.memberAuthData); w.write(authData) }
        if let user = member.userID { w.key(Field.user); w.writeString(user) }
        w.endObject()
    }

    /// At most `limit` members and `maxBytes` of them (their JSON) are listed, in join
    /// order; when the list is cut it says `truncated: true` and `count` carries the real
    /// total (Parley extensions: Scaledrone clients ignore unknown fields). Every member's
    /// `client_data` is bounded (`--max-client-data`), but a thousand of them are not.
    static func observableMembers(room: RoomKey, members: [Member], limit: Int = .max,
                                  maxBytes: Int = .max) -> (json: [UInt8], truncated: Bool) {
        var w = JSONWriter()
        w.beginObject()
        w.key(Field.type); w.writeString(MessageType.observableMembers)
        w.key(Field.room); w.writeString(room.room)
        w.key(Field.data)
        w.beginArray()
        let start = w.bytes.count
        var truncated = members.count > limit
        for member in members.prefix(limit) {
            var one = JSONWriter(capacity: 128)
            writeMember(member, into: &one)
            // +1: the comma.
            guard w.bytes.count - start + one.bytes.count + 1 <= maxBytes else {
                truncated = true
                break
            }
            w.writeRawValue(one.bytes)
        }
        w.endArray()
        if truncated {
            w.key(Field.truncated); w.writeBool(true)
            w.key(Field.count); w.writeInt(members.count)
        }
        w.endObject()
        return (w.bytes, truncated)
    }

    /// A reply: `{"callback":N}` plus extra fields, and `error` on failure. With no callback
    /// (the client gave none) it is `{"error":".."}` or the bare fields.
    static func reply(callback: Int?, error: String? = nil, clientID: String? = nil,
                      extra: (inout JSONWriter) -> Void = { _ in }) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        if let callback { w.key(Field.callback); w.writeInt(callback) }
        if let clientID { w.key(Field.clientID); w.writeString(clientID) }
        extra(&w)
        if let error { w.key(Field.error); w.writeString(error) }
        w.endObject()
        return w.bytes
    }

    /// The payload of a frame made by ``WebSocketProtocolMachine/serverTextFrame(_:)`` (final,
    /// unmasked): what a deflate connection compresses for itself.
    static func payload(ofServerFrame frame: IOBuffer) -> [UInt8] {
        frame.withUnsafeBytes { bytes in
            guard bytes.count >= 2 else { return [] }
            let length = bytes[1] & 0x7F
            let header = length < 126 ? 2 : length == 126 ? 4 : 10
            return Array(bytes[min(header, bytes.count)...])
        }
    }
}
