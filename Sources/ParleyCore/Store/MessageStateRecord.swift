/// How a store keeps a message's current state beside the entry it appended (SQLite's
/// `state` column): one JSON object, written when an action changes the message, so a
/// history read is one row per message and never replays the actions.
///
/// `{"body": <latest body>, "edited": <ms>, "edits": <n>, "reactions": [[emoji, [[id, name], …]], …]}`
public enum MessageStateRecord {
    /// The state fields of `message` (its body, edits and reactions) as one JSON value.
    public static func encode(_ message: Message) -> JSONValue {
        var object = JSONObject()
        object["body"] = message.body
        if let edited = message.editedMillis { object["edited"] = .number(JSONNumber(Int(edited))) }
        if message.editCount > 0 { object["edits"] = .number(JSONNumber(message.editCount)) }
        if !message.reactions.isEmpty {
            object["reactions"] = .array(message.reactions.map { reaction in
                .array([.string(reaction.emoji), .array(reaction.reactors.map { .array([.string($0.id), .string($0.name)]) })])
            })
        }
        return .object(object)
    }

    /// `entry` (as appended) in the state `record` describes; nil when the record is not one.
    public static func decode(_ record: JSONValue, onto entry: Message) -> Message? {
        guard case .object(let object) = record, let body = object["body"] else { return nil }
        var reactions: [Reaction] = []
        for item in object["reactions"]?.arrayValue ?? [] {
            guard let pair = item.arrayValue, pair.count == 2, let emoji = pair[0].stringValue, let list = pair[1].arrayValue else { return nil }
            var reactors: [Reactor] = []
            for reactor in list {
                guard let fields = reactor.arrayValue, fields.count == 2, let id = fields[0].stringValue,
                      let name = fields[1].stringValue else { return nil }
                reactors.append(Reactor(id: id, name: name))
            }
            reactions.append(Reaction(emoji: emoji, reactors: reactors))
        }
        return Message(id: entry.id, offset: entry.offset, timestampMillis: entry.timestampMillis, room: entry.room, sender: entry.sender,
                       body: body, isDeleted: entry.isDeleted, replyTo: entry.replyTo, action: entry.action,
                       editedMillis: object["edited"]?.intValue.map(Int64.init), editCount: object["edits"]?.intValue ?? 0,
                       reactions: reactions)
    }
}
