import ParleyCore

/// How Parley's Redis backends write messages and members: one compact JSON form each,
/// decoded once per node.
///
/// - A message record (stream field `d`, and the body of a channel message):
///   `{"i": id, "t": timestamp ms, "s": sender?, "b": body, "r": [reply-to id, offset]?,
///   "k": [action kind, target id, target offset, emoji?]?}`; the offset is the stream
///   entry id (`<offset>-0`) or the channel message's header. An action's stream entry also
///   has a field `k` (its kind), a message's a field `i` (its id).
/// - A member: `{"i": id, "c": clientData?, "a": authData?, "u": userID?}`.
/// - A channel message is one of `m<offset> <record>` (a stored message), `e <record>` (an
///   ephemeral one: typing), `j <member>` (joined), `l <member>` (left), `d <offset>` (a
///   message deleted), `c <reason>` (the room closed by an operator), `r {"u","n","o"}` (a
///   read receipt), `n <room>` (a conversation added, in a user's notice room).
enum RedisRecords {
    /// Limits for our own records: as large as anything a door accepts.
    static let limits = JSONLimits(maxDepth: 128, maxBytes: 1 << 30, maxStringBytes: 1 << 30, maxElements: 10_000_000)

    // MARK: members

    static func member(_ member: Member) -> JSONValue {
        var object = JSONObject()
        object.append(key: "i", value: .string(member.id))
        if let clientData = member.clientData { object.append(key: "c", value: clientData) }
        if let authData = member.authData { object.append(key: "a", value: authData) }
        if let userID = member.userID { object.append(key: "u", value: .string(userID)) }
        return .object(object)
    }

    static func memberBytes(_ value: Member) -> [UInt8] { member(value).serialized() }

    static func member(from value: JSONValue) -> Member? {
        guard case .object(let object) = value, let id = object["i"]?.stringValue else { return nil }
        return Member(id: id, clientData: object["c"], authData: object["a"], userID: object["u"]?.stringValue)
    }

    static func member(bytes: some Collection<UInt8>) -> Member? {
        guard let value = try? JSONParser.parse(Array(bytes), limits: limits) else { return nil }
        return member(from: value)
    }

    // MARK: messages

    /// The record of a message (everything but its offset and room).
    static func record(_ message: Message) -> [UInt8] {
        var object = JSONObject()
        object.append(key: "i", value: .string(message.id))
        object.append(key: "t", value: .number(JSONNumber(Int(message.timestampMillis))))
        if let sender = message.sender { object.append(key: "s", value: member(sender)) }
        object.append(key: "b", value: message.body)
        if let replyTo = message.replyTo {
            object.append(key: "r", value: .array([.string(replyTo.id), .number(JSONNumber(Int(replyTo.offset)))]))
        }
        if let action = message.action {
            var fields: [JSONValue] = [.string(action.kind.rawValue), .string(action.target.id),
                                       .number(JSONNumber(Int(action.target.offset)))]
            if let emoji = action.emoji { fields.append(.string(emoji)) }
            object.append(key: "k", value: .array(fields))
        }
        return JSONValue.object(object).serialized()
    }

    /// The message a record describes.
    static func message(record bytes: some Collection<UInt8>, offset: Int64, room: RoomKey) -> Message? {
        guard let value = try? JSONParser.parse(Array(bytes), limits: limits), case .object(let object) = value,
              let id = object["i"]?.stringValue, let timestamp = object["t"]?.intValue, let body = object["b"] else { return nil }
        var sender: Member?
        if let raw = object["s"] {
            guard let decoded = member(from: raw) else { return nil }
            sender = decoded
        }
        var replyTo: MessageReference?
        if let raw = object["r"] {
            guard let pair = raw.arrayValue, pair.count == 2, let target = pair[0].stringValue, let at = pair[1].intValue else { return nil }
            replyTo = MessageReference(id: target, offset: Int64(at))
        }
        var action: MessageAction?
        if let raw = object["k"] {
            guard let fields = raw.arrayValue, fields.count == 3 || fields.count == 4,
                  let kind = fields[0].stringValue.flatMap(MessageAction.Kind.init(rawValue:)),
                  let target = fields[1].stringValue, let at = fields[2].intValue else { return nil }
            action = MessageAction(kind, target: MessageReference(id: target, offset: Int64(at)),
                                   emoji: fields.count == 4 ? fields[3].stringValue : nil)
        }
        return Message(id: id, offset: offset, timestampMillis: Int64(timestamp), room: room, sender: sender, body: body,
                       replyTo: replyTo, action: action)
    }

    /// One message of a ``RedisBackendScripts/readHistory`` or `findMessage` reply: `{entry
    /// id, record, deleted 0/1, latest body, edit count, edit time, reactions}` (the state
    /// fields `""` when none), in its current state.
    static func currentMessage(_ item: RedisValue, room: RoomKey) -> Message? {
        guard let parts = item.array, parts.count == 7, let entryID = parts[0].bytes, let offset = offset(ofEntryID: entryID),
              let record = parts[1].bytes, let message = message(record: record, offset: offset, room: room) else { return nil }
        if parts[2].int == 1 { return message.tombstone }
        let text = { (value: RedisValue) -> [UInt8]? in value.bytes.flatMap { $0.isEmpty ? nil : $0 } }
        let edited = text(parts[3]), reactionsText = text(parts[6])
        guard edited != nil || reactionsText != nil else { return message }
        var state: JSONObject = ["body": message.body]
        if let edited {
            guard let body = try? JSONParser.parse(edited, limits: limits) else { return nil }
            state["body"] = body
            state["edits"] = .number(JSONNumber(Int(parts[4].string ?? "") ?? 0))
            if let time = Int(parts[5].string ?? "") { state["edited"] = .number(JSONNumber(time)) }
        }
        if let reactionsText {
            guard let reactions = try? JSONParser.parse(reactionsText, limits: limits) else { return nil }
            state["reactions"] = reactions
        }
        return MessageStateRecord.decode(.object(state), onto: message)
    }

    // MARK: channel messages

    /// What arrives on a room's channel.
    enum ChannelMessage: Equatable {
        case stored(Message)
        case event(RoomEvent)
    }

    static func channelPayload(_ event: RoomEvent) -> [UInt8] {
        switch event {
        case .message(let message):
            return Array("e ".utf8) + record(message)
        case .memberJoined(let member):
            return Array("j ".utf8) + memberBytes(member)
        case .memberLeft(let member):
            return Array("l ".utf8) + memberBytes(member)
        case .messageDeleted(let offset):
            return Array("d \(offset)".utf8)
        case .roomClosed(let reason):
            return Array("c ".utf8) + Array(reason.utf8)
        case .read(let receipt):
            var fields: JSONObject = ["u": .string(receipt.user), "n": .string(receipt.name), "o": .number(JSONNumber(Int(receipt.offset)))]
            if !receipt.isShared { fields.append(key: "p", value: .bool(true)) }
            return Array("r ".utf8) + JSONValue.object(fields).serialized()
        case .conversationAdded(let room):
            return Array("n ".utf8) + Array(room.utf8)
        }
    }

    /// Decodes a channel message of `room`; nil for anything malformed.
    static func channelMessage(_ payload: [UInt8], room: RoomKey) -> ChannelMessage? {
        guard let space = payload.firstIndex(of: UInt8(ascii: " ")), space >= 1 else { return nil }
        let body = payload[(space + 1)...]
        switch payload[0] {
        case UInt8(ascii: "m"):
            guard let offset = Self.decimal(payload[1..<space]), offset > 0,
                  let message = message(record: body, offset: offset, room: room) else { return nil }
            return .stored(message)
        case UInt8(ascii: "e"):
            guard space == 1, let message = message(record: body, offset: 0, room: room) else { return nil }
            return .event(.message(message))
        case UInt8(ascii: "j"):
            guard space == 1, let member = member(bytes: body) else { return nil }
            return .event(.memberJoined(member))
        case UInt8(ascii: "l"):
            guard space == 1, let member = member(bytes: body) else { return nil }
            return .event(.memberLeft(member))
        case UInt8(ascii: "d"):
            guard space == 1, let offset = decimal(body), offset > 0 else { return nil }
            return .event(.messageDeleted(offset: offset))
        case UInt8(ascii: "c"):
            guard space == 1 else { return nil }
            return .event(.roomClosed(reason: String(decoding: body, as: UTF8.self)))
        case UInt8(ascii: "r"):
            guard space == 1, let value = try? JSONParser.parse(Array(body), limits: limits), let user = value["u"]?.stringValue,
                  let name = value["n"]?.stringValue, let offset = value["o"]?.intValue else { return nil }
            return .event(.read(ReadReceipt(user: user, name: name, offset: Int64(offset), isShared: value["p"]?.boolValue != true)))
        case UInt8(ascii: "n"):
            guard space == 1 else { return nil }
            return .event(.conversationAdded(room: String(decoding: body, as: UTF8.self)))
        default:
            return nil
        }
    }

    /// A non-negative decimal number of up to 18 digits.
    static func decimal(_ bytes: some Collection<UInt8>) -> Int64? {
        guard !bytes.isEmpty, bytes.count <= 18 else { return nil }
        var value: Int64 = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// The offset of a stream entry id `<offset>-<seq>`.
    static func offset(ofEntryID id: [UInt8]) -> Int64? {
        guard let dash = id.firstIndex(of: UInt8(ascii: "-")) else { return decimal(id) }
        return decimal(id[..<dash])
    }

    /// A page of stream entries: the messages, in reply order, and the offset of the last
    /// entry (decodable or not).
    struct RangePage {
        var messages: [Message] = []
        var entries = 0
        var lastOffset: Int64?
    }

    /// The messages of an `XRANGE` / `XREVRANGE` reply, in reply order. An entry that cannot
    /// be decoded (written by something else) is skipped rather than blocking the room.
    static func range(_ reply: RedisValue, room: RoomKey) throws(RedisError) -> RangePage {
        guard let entries = reply.array else { throw RedisError(.unexpectedReply, "a stream range reply is not an array: \(reply)") }
        var page = RangePage()
        page.messages.reserveCapacity(entries.count)
        page.entries = entries.count
        for entry in entries {
            guard let parts = entry.array, parts.count == 2, let id = parts[0].bytes, let offset = offset(ofEntryID: id) else { continue }
            page.lastOffset = offset
            guard let fields = parts[1].pairs,
                  let record = fields.first(where: { $0.key.bytes == [UInt8(ascii: "d")] })?.value.bytes,
                  let message = message(record: record, offset: offset, room: room) else { continue }
            page.messages.append(message)
        }
        return page
    }

    static func messages(fromRange reply: RedisValue, room: RoomKey) throws(RedisError) -> [Message] {
        try range(reply, room: room).messages
    }

    /// The messages of a ``RedisBackendScripts/readRange`` reply, deleted ones as tombstones.
    /// Whether a range read left entries out for its byte budget.
    static func isCutForBytes(_ reply: RedisValue) -> Bool {
        guard let parts = reply.array, parts.count >= 3 else { return false }
        return parts[2].int == 1
    }

    static func messages(fromReadRange reply: RedisValue, room: RoomKey) throws(RedisError) -> [Message] {
        guard let parts = reply.array, parts.count == 2 || parts.count == 3 else {
            throw RedisError(.unexpectedReply, "a range read reply is not a pair: \(reply)")
        }
        let messages = try range(parts[0], room: room).messages
        var deleted = Set<Int64>()
        for item in parts[1].array ?? [] {
            if let bytes = item.bytes, let offset = decimal(bytes) { deleted.insert(offset) }
        }
        guard !deleted.isEmpty else { return messages }
        return messages.map { deleted.contains($0.offset) ? $0.tombstone : $0 }
    }
}
