import ParleyCore

private typealias Field = NativeProtocol.Field
private typealias MessageType = NativeProtocol.MessageType

/// The native door's users events and replies (docs/protocols.md, "Users").
extension NativeEncoding {
    /// `{type: "unread", room, read_offset, unread, mentions}`, `unread_capped: true` when
    /// counting stopped early.
    static func unread(room: RoomKey, readOffset: Int64, _ count: UnreadCount) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.key(Field.type); w.writeString(MessageType.unread)
        w.key(Field.room); w.writeString(room.room)
        writeCounts(readOffset: readOffset, count, into: &w)
        w.endObject()
        return w.bytes
    }

    private static func writeCounts(readOffset: Int64, _ count: UnreadCount, into w: inout JSONWriter) {
        w.key(Field.readOffset); w.writeInt(Int(readOffset))
        w.key(Field.unread); w.writeInt(count.unread)
        w.key(Field.mentions); w.writeInt(count.mentions)
        if count.capped { w.key(Field.unreadCapped); w.writeBool(true) }
    }

    /// `{type: "receipts", room, readers: [{user, name, offset}]}`, furthest read first.
    static func receipts(room: RoomKey, _ readers: [ReadReceipt]) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.key(Field.type); w.writeString(MessageType.receipts)
        w.key(Field.room); w.writeString(room.room)
        w.key(Field.readers)
        w.beginArray()
        for reader in readers {
            w.beginObject()
            w.key(Field.user); w.writeString(reader.user)
            w.key(Field.name); w.writeString(reader.name)
            w.key(Field.offset); w.writeInt(Int(reader.offset))
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return w.bytes
    }

    /// `{callback, users: [{user, name, devices}], members}`: the room's users, in the order
    /// each first joined, and how many members (connections) the room has.
    static func roomUsers(callback: Int?, _ users: [RoomUser], members: Int) -> [UInt8] {
        reply(callback: callback) { w in
            w.key(Field.users); writeRoomUsers(users, into: &w)
            w.key(Field.count); w.writeInt(members)
        }
    }

    /// `[{user, name, devices}]`, as the native reply and REST both write it.
    static func writeRoomUsers(_ users: [RoomUser], into w: inout JSONWriter) {
        w.beginArray()
        for user in users {
            w.beginObject()
            w.key(Field.user); w.writeString(user.user)
            w.key(Field.name); w.writeString(user.name)
            w.key(Field.devices); w.writeInt(user.devices)
            w.endObject()
        }
        w.endArray()
    }

    /// `{callback, room}`: the direct room opened.
    static func directRoom(callback: Int?, _ room: String) -> [UInt8] {
        reply(callback: callback) { w in w.key(Field.room); w.writeString(room) }
    }

    /// `{callback, offset}`: the read mark as stored.
    static func readMark(callback: Int?, _ mark: ReadMark) -> [UInt8] {
        reply(callback: callback) { w in w.key(Field.offset); w.writeInt(Int(mark.offset)) }
    }

    /// `{callback, conversations: [...], has_more}`, newest activity first.
    static func inbox(callback: Int?, _ conversations: [Conversation], hasMore: Bool) -> [UInt8] {
        reply(callback: callback) { w in
            w.key(Field.conversations)
            w.beginArray()
            for conversation in conversations { writeConversation(conversation, into: &w) }
            w.endArray()
            w.key(Field.hasMore); w.writeBool(hasMore)
        }
    }

    /// `{type: "conversation", conversation: {...}}`: one conversation of a live inbox changed.
    static func conversationUpdate(_ conversation: Conversation) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.key(Field.type); w.writeString(MessageType.conversation)
        w.key(Field.conversation); writeConversation(conversation, into: &w)
        w.endObject()
        return w.bytes
    }

    /// `{room, users?, read_offset, unread, mentions, unread_capped?, activity, last}`:
    /// `users` for a direct room, `activity` in Unix seconds, `last` the newest message as a
    /// `publish` (with the sender's `name`) or null.
    static func writeConversation(_ conversation: Conversation, into w: inout JSONWriter) {
        w.beginObject()
        w.key(Field.room); w.writeString(conversation.room.room)
        if let users = conversation.users {
            w.key(Field.users)
            w.beginArray()
            for user in users { w.writeString(user) }
            w.endArray()
        }
        writeCounts(readOffset: conversation.readOffset, conversation.unread, into: &w)
        w.key(Field.activity); w.writeInt(Int(conversation.activityMillis / 1000))
        w.key(Field.last)
        if let last = conversation.last {
            var one = JSONWriter()
            writeMessage(last, type: MessageType.publish, index: nil, into: &one)
            // The sender's name, so a list can show "Bob: hi" without the member list.
            var bytes = one.bytes
            if let sender = last.sender, bytes.last == UInt8(ascii: "}") {
                var name = JSONWriter()
                name.writeString(sender.displayName)
                bytes.removeLast()
                bytes += Array(",\"\(Field.name)\":".utf8) + name.bytes + [UInt8(ascii: "}")]
            }
            w.writeRawValue(bytes)
        } else {
            w.writeNull()
        }
        w.endObject()
    }
}
