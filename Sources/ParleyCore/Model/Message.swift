import Synchronization

/// A message published to a room, or an action on one (``action``).
/// A final class, not a struct: a message passes through many hands on its way (hub, broker,
/// store queue, room history, every loop's delivery), and copying a reference is one retain
/// where copying the value was one per field (strings, JSON, sender).
///
/// Two views of the same entry exist (docs/protocols.md, "Message actions"): as it was
/// appended to the room's log (what a resume replays, the actions after it following in
/// order), and in its current state (what history shows: the latest body with ``editedMillis``,
/// a tombstone once deleted, its ``reactions``), made by applying every later action with
/// ``applying(_:)``.
public final class Message: Hashable, Sendable {
    /// Server-assigned id, unique within the process lifetime and across restarts.
    public let id: String
    /// Position in the room's history: 1, 2, 3, … with no gaps. 0 for ephemeral messages,
    /// which are delivered but never stored.
    public let offset: Int64
    /// Milliseconds since the Unix epoch, assigned by the server.
    public let timestampMillis: Int64
    public let room: RoomKey
    /// Who sent it; nil for messages published by the server itself (REST).
    public let sender: Member?
    /// The JSON body, exactly as sent (`null` once deleted); an edit's new body; `null` for the
    /// other actions.
    public let body: JSONValue
    /// The message was deleted (by an operator or its author): it is a tombstone that keeps
    /// its place, id, time and sender, without the body. History and resume show it as
    /// deleted. An edit of a deleted message is a tombstone too (its body was the text).
    public let isDeleted: Bool
    /// The message this one answers (a reply: otherwise an ordinary message).
    public let replyTo: MessageReference?
    /// Set when this entry is an action on another message (edit, delete, react, unreact)
    /// rather than a message: history pages leave it out, resume replays it.
    public let action: MessageAction?
    /// Current state: when the latest edit was made (nil: never edited).
    public let editedMillis: Int64?
    /// Current state: how many edits were applied.
    public let editCount: Int
    /// Current state: the reactions, in the order each emoji first came, each with every
    /// reactor in order (doors show the count and the first ``Reaction/namesShown`` names).
    public let reactions: [Reaction]
    /// ``body`` serialized, made by the first who asks (the store writing it, a loop encoding
    /// it for its sessions) and shared by every later one: a stored message's body is encoded
    /// once, not once by the store and once per event loop.
    private let encodedBody: Mutex<[UInt8]?>

    public convenience init(id: String, offset: Int64, timestampMillis: Int64, room: RoomKey, sender: Member?, body: JSONValue,
                            isDeleted: Bool = false, replyTo: MessageReference? = nil, action: MessageAction? = nil,
                            editedMillis: Int64? = nil, editCount: Int = 0, reactions: [Reaction] = []) {
        self.init(id: id, offset: offset, timestampMillis: timestampMillis, room: room, sender: sender, body: body,
                  isDeleted: isDeleted, replyTo: replyTo, action: action, editedMillis: editedMillis, editCount: editCount,
                  reactions: reactions, encodedBody: nil)
    }

    private init(id: String, offset: Int64, timestampMillis: Int64, room: RoomKey, sender: Member?, body: JSONValue,
                 isDeleted: Bool, replyTo: MessageReference?, action: MessageAction?,
                 editedMillis: Int64?, editCount: Int, reactions: [Reaction], encodedBody: [UInt8]?) {
        self.encodedBody = Mutex(isDeleted ? nil : encodedBody)
        self.id = id
        self.offset = offset
        self.timestampMillis = timestampMillis
        self.room = room
        self.sender = sender
        self.body = isDeleted ? .null : body
        self.isDeleted = isDeleted
        self.replyTo = replyTo
        self.action = action
        self.editedMillis = isDeleted ? nil : editedMillis
        self.editCount = editCount
        self.reactions = isDeleted ? [] : reactions
    }

    public static func == (lhs: Message, rhs: Message) -> Bool {
        lhs === rhs || (lhs.id == rhs.id && lhs.offset == rhs.offset && lhs.timestampMillis == rhs.timestampMillis
            && lhs.room == rhs.room && lhs.sender == rhs.sender && lhs.body == rhs.body && lhs.isDeleted == rhs.isDeleted
            && lhs.replyTo == rhs.replyTo && lhs.action == rhs.action && lhs.editedMillis == rhs.editedMillis
            && lhs.editCount == rhs.editCount && lhs.reactions == rhs.reactions)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(offset)
        hasher.combine(timestampMillis)
        hasher.combine(room)
        hasher.combine(sender)
        hasher.combine(body)
        hasher.combine(isDeleted)
        hasher.combine(replyTo)
        hasher.combine(action)
        hasher.combine(editedMillis)
        hasher.combine(editCount)
        hasher.combine(reactions)
    }

    /// This message as a tombstone: same id, offset, time, sender, reply and action; no body,
    /// no edits shown, no reactions.
    public var tombstone: Message {
        Message(id: id, offset: offset, timestampMillis: timestampMillis, room: room, sender: sender, body: .null, isDeleted: true,
                replyTo: replyTo, action: action, editCount: editCount)
    }

    /// This message (reply and action included) with the id, offset and time the broker gave it.
    public func placed(id: String? = nil, offset: Int64, timestampMillis: Int64? = nil) -> Message {
        Message(id: id ?? self.id, offset: offset, timestampMillis: timestampMillis ?? self.timestampMillis, room: room, sender: sender,
                body: body, isDeleted: isDeleted, replyTo: replyTo, action: action, editedMillis: editedMillis, editCount: editCount,
                reactions: reactions, encodedBody: encodedBody.withLock { $0 })
    }

    /// ``body`` as compact JSON (``JSONValue/serialized()``), encoded once per message: the
    /// first caller encodes, every later one (on any thread) gets the same bytes.
    public var bodyJSON: [UInt8] {
        encodedBody.withLock { cached in
            if let cached { return cached }
            let bytes = body.serialized()
            cached = bytes
            return bytes
        }
    }

    /// Whether this entry is an action on another message rather than a message.
    public var isAction: Bool { action != nil }

    /// Unix seconds, as Scaledrone clients expect in `timestamp`.
    public var timestampSeconds: Int64 { timestampMillis / 1000 }

    /// A `{"typing": bool}` body: delivered live, never stored.
    public var isEphemeral: Bool { action == nil && Message.typingState(of: body) != nil }

    /// Whether a body is ephemeral (a typing signal): delivered, never stored.
    public static func isEphemeral(_ body: JSONValue) -> Bool { typingState(of: body) != nil }

    /// The typing flag when `body` is exactly `{"typing": true|false}`.
    public static func typingState(of body: JSONValue) -> Bool? {
        guard case .object(let object) = body, object.count == 1, let flag = object["typing"]?.boolValue else {
            return nil
        }
        return flag
    }
}
