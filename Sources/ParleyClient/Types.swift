import Foundation
import ParleyCore

/// Someone in a room: the server's member id plus the `clientData` they connected with.
public struct ChatMember: Sendable, Hashable, Identifiable {
    /// The member's connection id (the server's `client_id`).
    public let id: String
    /// What the member sent in its handshake, e.g. `{"name": "alice", "color": "#FF0000"}`.
    public let clientData: JSONValue?
    /// What a token vouched for, when the channel uses authentication.
    public let authData: JSONValue?
    /// Whether this member is this client (any of its connections so far).
    public let isMe: Bool

    /// Creates a member.
    public init(id: String, clientData: JSONValue? = nil, authData: JSONValue? = nil, isMe: Bool = false) {
        self.id = id
        self.clientData = clientData
        self.authData = authData
        self.isMe = isMe
    }

    /// `clientData.name`, or nil.
    public var name: String? { clientData?["name"]?.stringValue }
    /// `clientData.color` when it is a `#RRGGBB` string, or nil.
    public var color: String? {
        guard let color = clientData?["color"]?.stringValue, RandomIdentity.isHexColor(color) else { return nil }
        return color
    }
    /// A name to show: `clientData.name`, else the start of the id.
    public var displayName: String { name ?? "guest-\(id.prefix(6))" }
    /// A color to show: `clientData.color`, else a stable color derived from the name.
    public var displayColor: String { color ?? NameColor.color(for: displayName) }
}

/// One chat message as the server delivered it.
public struct ChatMessage: Sendable, Hashable, Identifiable {
    /// The server-assigned id.
    public let id: String
    /// The room it was published to.
    public let room: String
    /// The body as published: a plain string for chat text, any JSON otherwise.
    public let body: JSONValue
    /// The sender's client id; nil for messages published over REST.
    public let clientID: String?
    /// The sender's user, when it is not a user of its own connection (docs/protocols.md, "Users").
    public internal(set) var user: String? = nil
    /// The sender as known from the room's member list (current or past), if known.
    public let sender: ChatMember?
    /// Position in the room's history (1, 2, ...); nil for messages that are not stored.
    public let offset: Int?
    /// When the server accepted it (second precision).
    public let timestamp: Date
    /// Whether this client sent it.
    public let isMine: Bool
    /// The files it carries (a body `{"text": caption, "attachments": [...]}`), in order;
    /// empty for other messages.
    public let attachments: [Attachment]
    /// Whether it was deleted (by its author or a moderator): a tombstone, whose body is `null`.
    public let isDeleted: Bool
    /// The id of the message this one replies to, or nil.
    public let replyTo: String?
    /// When it was last edited (second precision), or nil when it never was.
    public let editedAt: Date?
    /// Its reactions, in the order each emoji first came.
    public let reactions: [ChatReaction]

    /// Creates a message.
    public init(id: String, room: String, body: JSONValue, clientID: String?, sender: ChatMember?,
                offset: Int?, timestamp: Date, isMine: Bool, isDeleted: Bool = false,
                replyTo: String? = nil, editedAt: Date? = nil, reactions: [ChatReaction] = []) {
        self.isDeleted = isDeleted
        self.replyTo = replyTo
        self.editedAt = editedAt
        self.reactions = reactions
        self.id = id
        self.room = room
        self.body = body
        self.clientID = clientID
        self.sender = sender
        self.offset = offset
        self.timestamp = timestamp
        self.isMine = isMine
        if case .attachments(let message) = AttachmentMessage.classify(body) {
            attachments = message.attachments
            caption = message.text
        } else {
            attachments = []
            caption = nil
        }
    }

    /// The text, when the body is a plain string.
    public var text: String? { body.stringValue }
    /// The caption of a message with files.
    public let caption: String?
    /// Whether it was edited.
    public var isEdited: Bool { editedAt != nil }
}

/// One emoji on a message: how many reacted and the names of the first ones.
public struct ChatReaction: Sendable, Hashable {
    /// The reaction key (an emoji sequence or a `:shortcode:`).
    public let emoji: String
    /// How many members reacted with it.
    public internal(set) var count: Int
    /// The first reactors' names (the server lists at most 10; live reactions add theirs).
    public internal(set) var names: [String]
    /// The member ids known to have reacted (from live and replayed events; history pages
    /// give names only).
    public internal(set) var reactorIDs: [String]
    /// Whether this client is one of the reactors (as far as it knows).
    public internal(set) var isMine: Bool

    /// Creates a reaction.
    public init(emoji: String, count: Int, names: [String], reactorIDs: [String] = [], isMine: Bool = false) {
        self.emoji = emoji
        self.count = count
        self.names = names
        self.reactorIDs = reactorIDs
        self.isMine = isMine
    }

    /// Most names kept per reaction, as the server's history does.
    public static let namesKept = 10
}

/// An action on a message of the room (an entry of its log with an offset of its own): an
/// edit, a delete by the author (or a moderator), a reaction added or taken back.
public struct ChatAction: Sendable, Hashable, Identifiable {
    /// What the action does.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case edit, delete, react, unreact
    }
    /// The action's own id.
    public let id: String
    /// What it does.
    public let kind: Kind
    /// The id of the message it acts on.
    public let target: String
    /// The new body of an edit (nil for other kinds, and for an edit of a since-deleted
    /// message in a replay: there is nothing left to apply).
    public let body: JSONValue?
    /// The reaction of `react` and `unreact`.
    public let emoji: String?
    /// Who did it (nil for actions made over REST).
    public let clientID: String?
    /// The actor as known from the room's member list, if known.
    public let sender: ChatMember?
    /// Its offset in the room's log.
    public let offset: Int?
    /// When the server accepted it.
    public let timestamp: Date
    /// Whether this client did it.
    public let isMine: Bool

    /// Creates an action.
    public init(id: String, kind: Kind, target: String, body: JSONValue? = nil, emoji: String? = nil,
                clientID: String?, sender: ChatMember?, offset: Int?, timestamp: Date, isMine: Bool) {
        self.id = id
        self.kind = kind
        self.target = target
        self.body = body
        self.emoji = emoji
        self.clientID = clientID
        self.sender = sender
        self.offset = offset
        self.timestamp = timestamp
        self.isMine = isMine
    }
}

extension ChatMessage {
    /// This message after `action` (which targets it), the client-side mirror of the
    /// server's rule (ParleyCore's `Message.applying`): an edit replaces the body and sets
    /// ``editedAt``; a delete makes the tombstone; a reaction adds its actor once per emoji
    /// or takes it back. A tombstone stays as it is.
    ///
    /// Applying an action again leaves the message as it is (a resume may replay actions a
    /// history snapshot already showed): a reactor counts once, by id, or by name when the
    /// state came from history (which gives names, not ids). `name` is the actor's name to
    /// show; nil uses the action's sender.
    public func applying(_ action: ChatAction, actorName name: String? = nil) -> ChatMessage {
        guard action.target == id, !isDeleted else { return self }
        switch action.kind {
        case .edit:
            guard let body = action.body else { return self }
            return copy(body: body, editedAt: action.timestamp, reactions: reactions)
        case .delete:
            return ChatMessage(id: id, room: room, body: .null, clientID: clientID, sender: sender, offset: offset,
                               timestamp: timestamp, isMine: isMine, isDeleted: true, replyTo: replyTo)
        case .react, .unreact:
            guard let emoji = action.emoji else { return self }
            let actorID = action.clientID ?? ""
            let actorName = name ?? action.sender?.displayName ?? ""
            var reactions = self.reactions
            let index = reactions.firstIndex { $0.emoji == emoji }
            func holds(_ reaction: ChatReaction) -> Bool {
                reaction.reactorIDs.contains(actorID)
                    || (reaction.reactorIDs.count < reaction.count && reaction.names.contains(actorName) && !actorName.isEmpty)
            }
            if action.kind == .react {
                if let index {
                    if holds(reactions[index]) {
                        // Already counted (a snapshot showed it by name): learn the id.
                        if !reactions[index].reactorIDs.contains(actorID) { reactions[index].reactorIDs.append(actorID) }
                    } else {
                        reactions[index].count += 1
                        reactions[index].reactorIDs.append(actorID)
                        if reactions[index].names.count < ChatReaction.namesKept { reactions[index].names.append(actorName) }
                    }
                    if action.isMine { reactions[index].isMine = true }
                } else {
                    reactions.append(ChatReaction(emoji: emoji, count: 1, names: [actorName], reactorIDs: [actorID], isMine: action.isMine))
                }
            } else {
                guard let index, holds(reactions[index]) else { return self }
                reactions[index].count -= 1
                reactions[index].reactorIDs.removeAll { $0 == actorID }
                if let at = reactions[index].names.firstIndex(of: actorName) { reactions[index].names.remove(at: at) }
                if action.isMine { reactions[index].isMine = false }
                if reactions[index].count <= 0 { reactions.remove(at: index) }
            }
            return copy(body: body, editedAt: editedAt, reactions: reactions)
        }
    }

    private func copy(body: JSONValue, editedAt: Date?, reactions: [ChatReaction]) -> ChatMessage {
        ChatMessage(id: id, room: room, body: body, clientID: clientID, sender: sender, offset: offset, timestamp: timestamp,
                    isMine: isMine, isDeleted: isDeleted, replyTo: replyTo, editedAt: editedAt, reactions: reactions)
    }
}

/// Something that happened in a subscribed room, in the order the server sent it.
public enum RoomEvent: Sendable, Hashable {
    /// A new message (also one missed while reconnecting, delivered once, in offset order).
    case message(ChatMessage)
    /// A stored message sent on subscribe (`historyCount`), oldest first.
    case history(ChatMessage)
    /// The full member list (on subscribe and after each reconnect; observable rooms only).
    case members([ChatMember])
    /// Someone joined (observable rooms only).
    case memberJoined(ChatMember)
    /// Someone left (observable rooms only).
    case memberLeft(ChatMember)
    /// Who is typing now, in the order they started (this client included when it types).
    case typingChanged([ChatMember])
    /// An edit, delete or reaction of a message of the room, in log order (live, and
    /// replayed after a reconnect). Apply it with ``ChatMessage/applying(_:actorName:)``.
    case action(ChatAction)
    /// A moderator deleted the stored message at this offset: show it as deleted (history
    /// now returns it as a tombstone).
    case messageDeleted(offset: Int)
    /// A moderator closed the room; this client is out of it and the event stream ends after
    /// this event. Subscribing again is refused while the room stays closed.
    case roomClosed(reason: String)
    /// Who has read how far (on subscribe with `receipts`), furthest first.
    case receipts([ReadReceiptInfo])
    /// A user read the room up to an offset (with `receipts`).
    case read(ReadReceiptInfo)
    /// This user's unread count changed (with `unread`; on subscribe and on every change).
    case unread(UnreadInfo)
}

/// The server's receipt for a publish.
public struct PublishAck: Sendable, Hashable {
    /// The message id.
    public let id: String
    /// The message's offset in the room's history (0 when the server did not store it).
    public let offset: Int
    /// The idempotency key the client sent (`message_id`); the same on every retry.
    public let messageID: String
}

/// The server's receipt for an action (edit, delete, react, unreact): the action's own id
/// and offset in the room's log.
public struct ActionAck: Sendable, Hashable {
    /// The action's id.
    public let id: String
    /// The action's offset.
    public let offset: Int
}

/// One page of a room's history, oldest first.
public struct HistoryPage: Sendable, Hashable {
    /// The messages, oldest first.
    public let messages: [ChatMessage]
    /// Whether older messages exist (ask again with `before:` the first offset).
    public let hasMore: Bool
}

/// Why a client is not connected.
public enum DisconnectReason: Sendable, Hashable {
    /// ``ParleyClient/connect()`` has not been called yet.
    case notStarted
    /// ``ParleyClient/disconnect()`` was called.
    case closedByClient
    /// The server refused this client (handshake or token error reply, or a 1008/4xxx close);
    /// the client does not retry.
    case rejected(String)
    /// The connection failed and the reconnect policy gave up.
    case failed(String)
}

/// The connection's life, as reported by ``ParleyClient/stateUpdates()``.
public enum ConnectionState: Sendable, Hashable {
    /// The first connect is in progress.
    case connecting
    /// Handshaken; rooms are subscribed.
    case connected
    /// The connection dropped; waiting before attempt `attempt` (1, 2, ...) or trying it.
    case reconnecting(attempt: Int)
    /// Not connected, and not trying to.
    case disconnected(DisconnectReason)

    /// A short word for status bars: "connected", "reconnecting (2)", "offline: …".
    public var label: String {
        switch self {
        case .connecting: "connecting"
        case .connected: "connected"
        case .reconnecting(let attempt): "reconnecting (\(attempt))"
        case .disconnected(.notStarted), .disconnected(.closedByClient): "offline"
        case .disconnected(.rejected(let why)): "rejected: \(why)"
        case .disconnected(.failed(let why)): "offline: \(why)"
        }
    }
}

/// When and how often to reconnect: jittered exponential backoff.
public struct ReconnectPolicy: Sendable, Hashable {
    /// Delay before the first retry.
    public var initialDelay: Duration
    /// Upper bound of the delay.
    public var maxDelay: Duration
    /// Give up after this many failed attempts in a row; nil retries forever.
    public var maxAttempts: Int?

    /// 250 ms, doubling, at most 10 s, forever.
    public init(initialDelay: Duration = .milliseconds(250), maxDelay: Duration = .seconds(10), maxAttempts: Int? = nil) {
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.maxAttempts = maxAttempts
    }

    /// Never reconnect.
    public static let never = ReconnectPolicy(maxAttempts: 0)

    /// The wait before attempt `attempt` (1-based): `min(max, initial·2^(attempt-1))`, then
    /// "equal jitter" — half of it fixed, half random — so clients dropped together by a
    /// restart do not all come back in the same millisecond.
    public func delay(forAttempt attempt: Int, random: Double = Double.random(in: 0...1)) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let base = min(maxDelay, initialDelay * (1 << exponent))
        return base / 2 + base * (random / 2)
    }

    /// Whether a close code means "do not come back": 1008 (policy violation) and the
    /// application range 4000–4999 (Parley's auth and ban closes).
    public static func isFatal(closeCode: UInt16) -> Bool {
        closeCode == 1008 || (4000...4999).contains(closeCode)
    }
}
