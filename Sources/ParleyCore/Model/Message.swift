/// A message published to a room.
/// A final class, not a struct: a message passes through many hands on its way (hub, broker,
/// store queue, room history, every loop's delivery), and copying a reference is one retain
/// where copying the value was one per field (strings, JSON, sender).
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
    /// The JSON body, exactly as sent (`null` once deleted).
    public let body: JSONValue
    /// The message was deleted (by an operator): it is a tombstone that keeps its place, id,
    /// time and sender, without the body. History and resume show it as deleted.
    public let isDeleted: Bool

    public init(id: String, offset: Int64, timestampMillis: Int64, room: RoomKey, sender: Member?, body: JSONValue,
                isDeleted: Bool = false) {
        self.id = id
        self.offset = offset
        self.timestampMillis = timestampMillis
        self.room = room
        self.sender = sender
        self.body = isDeleted ? .null : body
        self.isDeleted = isDeleted
    }

    public static func == (lhs: Message, rhs: Message) -> Bool {
        lhs === rhs || (lhs.id == rhs.id && lhs.offset == rhs.offset && lhs.timestampMillis == rhs.timestampMillis
            && lhs.room == rhs.room && lhs.sender == rhs.sender && lhs.body == rhs.body && lhs.isDeleted == rhs.isDeleted)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(offset)
        hasher.combine(timestampMillis)
        hasher.combine(room)
        hasher.combine(sender)
        hasher.combine(body)
        hasher.combine(isDeleted)
    }

    /// This message as a tombstone: same id, offset, time and sender; no body.
    public var tombstone: Message {
        Message(id: id, offset: offset, timestampMillis: timestampMillis, room: room, sender: sender, body: .null, isDeleted: true)
    }

    /// Unix seconds, as Scaledrone clients expect in `timestamp`.
    public var timestampSeconds: Int64 { timestampMillis / 1000 }

    /// A `{"typing": bool}` body: delivered live, never stored.
    public var isEphemeral: Bool { Message.typingState(of: body) != nil }

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
