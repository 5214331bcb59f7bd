/// Names a message of the same room: its id (what clients send) and its offset (where
/// stores and the hub find it; the server looks it up from the id).
public struct MessageReference: Sendable, Hashable {
    public let id: String
    public let offset: Int64
    public init(id: String, offset: Int64) {
        self.id = id
        self.offset = offset
    }
}

/// An action on a message of the room: an entry of the room's log with its own offset (so a
/// resume replays it in order), applied by every store and by the hub's history cache to
/// its target with ``Message/applying(_:)``.
public struct MessageAction: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// The action's body is the target's new body.
        case edit
        /// The target becomes a tombstone (as an operator's delete makes it).
        case delete
        /// The action's sender adds ``MessageAction/emoji`` to the target (once per member and emoji).
        case react
        /// The action's sender takes ``MessageAction/emoji`` back.
        case unreact
    }
    public let kind: Kind
    public let target: MessageReference
    /// The reaction of `react` and `unreact` (validated: ``Reaction/problem(with:)``).
    public let emoji: String?

    public init(_ kind: Kind, target: MessageReference, emoji: String? = nil) {
        self.kind = kind
        self.target = target
        self.emoji = emoji
    }
}

/// One reactor of a reaction: the member's id and the name shown for it.
public struct Reactor: Sendable, Hashable {
    public let id: String
    public let name: String
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// One emoji on a message and who added it, in order.
public struct Reaction: Sendable, Hashable {
    public let emoji: String
    public var reactors: [Reactor]
    public init(emoji: String, reactors: [Reactor]) {
        self.emoji = emoji
        self.reactors = reactors
    }

    public var count: Int { reactors.count }

    /// Names a door shows per reaction (the first ones to react); `count` says how many
    /// there are in all.
    public static let namesShown = 10
    /// The first ``namesShown`` reactors' names.
    public var shownNames: [String] { reactors.prefix(Self.namesShown).map(\.name) }

    /// Longest reaction key, in bytes (an emoji with modifiers and joiners fits many times).
    public static let maxKeyBytes = 64

    /// Why `key` cannot be a reaction (empty, longer than ``maxKeyBytes`` bytes, or holding
    /// a control character, a line break or white space), or nil. Any other short text is
    /// accepted: emoji sequences change every year, and clients may use `:shortcodes:`.
    public static func problem(with key: String) -> String? {
        if key.isEmpty { return "a reaction must not be empty" }
        if key.utf8.count > maxKeyBytes { return "a reaction is at most \(maxKeyBytes) bytes" }
        for scalar in key.unicodeScalars {
            let v = scalar.value
            if v < 0x20 || (0x7F...0x9F).contains(v) || scalar.properties.isWhitespace
                || (0x2028...0x2029).contains(v) || (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v) {
                return "a reaction must not hold control characters or white space"
            }
        }
        return nil
    }
}

extension Message {
    /// This message's state after `action` (an entry whose ``Message/action`` targets it):
    /// an edit replaces the body (counted, with its time); a delete makes the tombstone; a
    /// reaction adds the sender once per emoji or takes it back. Deterministic, so every
    /// store and every node's cache that applies the same actions in offset order holds the
    /// same state. A tombstone stays as it is.
    public func applying(_ entry: Message) -> Message {
        guard let action = entry.action, !isDeleted else { return self }
        switch action.kind {
        case .edit:
            return Message(id: id, offset: offset, timestampMillis: timestampMillis, room: room, sender: sender, body: entry.body,
                           replyTo: replyTo, editedMillis: entry.timestampMillis, editCount: editCount + 1, reactions: reactions)
        case .delete:
            return tombstone
        case .react, .unreact:
            guard let emoji = action.emoji else { return self }
            let reactor = Reactor(id: entry.sender?.id ?? "", name: entry.sender?.displayName ?? "")
            var reactions = self.reactions
            let index = reactions.firstIndex { $0.emoji == emoji }
            if action.kind == .react {
                if let index {
                    guard !reactions[index].reactors.contains(where: { $0.id == reactor.id }) else { return self }
                    reactions[index].reactors.append(reactor)
                } else {
                    reactions.append(Reaction(emoji: emoji, reactors: [reactor]))
                }
            } else {
                guard let index, let at = reactions[index].reactors.firstIndex(where: { $0.id == reactor.id }) else { return self }
                reactions[index].reactors.remove(at: at)
                if reactions[index].reactors.isEmpty { reactions.remove(at: index) }
            }
            return Message(id: id, offset: offset, timestampMillis: timestampMillis, room: room, sender: sender, body: body,
                           replyTo: replyTo, editedMillis: editedMillis, editCount: editCount, reactions: reactions)
        }
    }

    /// The emoji `memberID` has on this message now.
    public func reactions(of memberID: String) -> [String] {
        reactions.filter { $0.reactors.contains { $0.id == memberID } }.map(\.emoji)
    }

    /// Whether this log entry holds `target`'s text and must go when `target` is deleted: an
    /// edit of it.
    public func carriesText(of target: Int64) -> Bool {
        action?.kind == .edit && action?.target.offset == target && !isDeleted
    }
}
