/// Who is in a room and who is typing, as the room's event stream shows them: the one set of
/// rules for the hub's view of a room (``Hub``, each `NodeRoom`) and a door's mirror of it
/// (``RoomMirror``). A join adds the member (or refreshes its data), a leave removes it and
/// stops its typing, a `{"typing": bool}` message sets the sender's flag, and any other
/// message from a typist clears it.
public struct RoomPresence: Sendable {
    var members: MemberMirror
    var typing: TypingTracker

    init(members: [Member] = [], typing: [Member] = [], typingTimeoutMillis: Int64 = 6_000) {
        self.members = MemberMirror(members)
        self.typing = TypingTracker(timeoutMillis: typingTimeoutMillis)
        for member in typing { _ = self.typing.set(member, typing: true, nowMillis: 0) }
    }

    /// Applies `event`; false when it shows nothing new (a join of a member already present,
    /// a leave of one already gone). Messages, deletions and closes always count: what else
    /// they change (history, offsets) is the caller's.
    mutating func apply(_ event: RoomEvent) -> Bool {
        switch event {
        case .memberJoined(let member):
            return members.insert(member)
        case .memberLeft(let member):
            guard members.remove(member.id) != nil else { return false }
            _ = typing.clear(member.id)
            return true
        case .message(let message):
            guard let sender = message.sender else { return true }
            if let flag = Message.typingState(of: message.body) {
                _ = typing.set(sender, typing: flag, nowMillis: message.timestampMillis)
            } else {
                _ = typing.clear(sender.id)
            }
            return true
        case .messageDeleted, .roomClosed, .read, .conversationAdded:
            return true
        }
    }
}

/// The members of a room as this node sees them, in join order, keyed by member id (unique
/// across the cluster). Joins and leaves are idempotent, so events that overlap a snapshot
/// apply cleanly.
struct MemberMirror: Sendable {
    private var byID: [String: (sequence: UInt64, member: Member)] = [:]
    private var nextSequence: UInt64 = 0
    /// The list in join order, built when first asked for after a change.
    private var ordered: [Member]? = []

    init(_ members: [Member] = []) {
        for member in members { _ = insert(member) }
    }

    var count: Int { byID.count }
    func contains(_ id: String) -> Bool { byID[id] != nil }

    /// Adds `member`, or refreshes its data in place; true when it is new.
    mutating func insert(_ member: Member) -> Bool {
        if let existing = byID[member.id] {
            if existing.member != member {
                byID[member.id] = (existing.sequence, member)
                ordered = nil
            }
            return false
        }
        nextSequence += 1
        byID[member.id] = (nextSequence, member)
        ordered?.append(member)
        return true
    }

    /// Removes the member with `id`; returns it when it was there.
    mutating func remove(_ id: String) -> Member? {
        guard let removed = byID.removeValue(forKey: id) else { return nil }
        ordered = nil
        return removed.member
    }

    /// Members in join order.
    mutating func list() -> [Member] {
        if let ordered { return ordered }
        let built = listed()
        ordered = built
        return built
    }

    /// Members in join order, without keeping the list (for a value that is read rarely).
    func listed() -> [Member] {
        ordered ?? byID.values.sorted { $0.sequence < $1.sequence }.map(\.member)
    }
}
