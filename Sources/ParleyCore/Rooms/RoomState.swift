/// Everything the server knows about one room, as a plain value with no locks and no I/O.
/// `Hub` keeps one per room behind a lock; tests drive it directly.
public struct RoomState: Sendable {
    public let key: RoomKey
    /// Members in join order, keyed by session (a member is one connection's identity).
    private(set) var members: [(session: SessionID, member: Member)] = []
    public private(set) var history: MessageHistory
    public private(set) var typing: TypingTracker
    /// The offset the next stored message gets.
    public private(set) var nextOffset: Int64 = 1

    public init(key: RoomKey, historyCapacity: Int, typingTimeoutMillis: Int64, lastOffset: Int64 = 0) {
        self.key = key
        self.nextOffset = lastOffset + 1
        self.history = MessageHistory(capacity: historyCapacity)
        self.typing = TypingTracker(timeoutMillis: typingTimeoutMillis)
    }

    mutating func replaceTyping(_ tracker: TypingTracker) { typing = tracker }

    public var memberList: [Member] { members.map(\.member) }
    public var isEmpty: Bool { members.isEmpty }
    /// Number of members, without building ``memberList``.
    public var memberCount: Int { members.count }
    public var lastOffset: Int64 { nextOffset - 1 }

    public func contains(_ session: SessionID) -> Bool { members.contains { $0.session == session } }

    /// Adds a member; returns false when this session was already in the room.
    public mutating func join(_ session: SessionID, as member: Member) -> Bool {
        guard !contains(session) else { return false }
        members.append((session, member))
        return true
    }

    /// Removes a session's member; returns it when it was there.
    public mutating func leave(_ session: SessionID) -> Member? {
        guard let index = members.firstIndex(where: { $0.session == session }) else { return nil }
        let member = members.remove(at: index).member
        _ = typing.clear(member.id)
        return member
    }

    /// Turns a publish into a message: stored messages get the next offset and enter the
    /// history; a typing signal updates the typing state and gets offset 0.
    public mutating func accept(body: JSONValue, from sender: Member?, id: String, nowMillis: Int64) -> Message {
        let message = assign(body: body, from: sender, id: id, nowMillis: nowMillis)
        if message.offset > 0 { commit(message) }
        return message
    }

    /// Like ``accept(body:from:id:nowMillis:)`` but a stored message only gets its offset: it
    /// enters the history with ``commit(_:)`` once the store has it.
    public mutating func assign(body: JSONValue, from sender: Member?, id: String, nowMillis: Int64) -> Message {
        if let flag = Message.typingState(of: body) {
            if let sender { _ = typing.set(sender, typing: flag, nowMillis: nowMillis) }
            return Message(id: id, offset: 0, timestampMillis: nowMillis, room: key, sender: sender, body: body)
        }
        let message = Message(id: id, offset: nextOffset, timestampMillis: nowMillis, room: key, sender: sender, body: body)
        nextOffset += 1
        if let sender { _ = typing.clear(sender.id) }
        return message
    }

    /// A stored message joins the in-memory history (the recent tail of the store).
    public mutating func commit(_ message: Message) { history.append(message) }

    /// After a failed write: the next message reuses `offset`, so stored offsets stay 1…n.
    public mutating func rewind(to offset: Int64) { nextOffset = min(nextOffset, offset) }
}
