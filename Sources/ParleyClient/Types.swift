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
    /// Whether a moderator deleted it: a tombstone in history, whose body is `null`.
    public let isDeleted: Bool

    /// Creates a message.
    public init(id: String, room: String, body: JSONValue, clientID: String?, sender: ChatMember?,
                offset: Int?, timestamp: Date, isMine: Bool, isDeleted: Bool = false) {
        self.isDeleted = isDeleted
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
    /// A moderator deleted the stored message at this offset: show it as deleted (history
    /// now returns it as a tombstone).
    case messageDeleted(offset: Int)
    /// A moderator closed the room; this client is out of it and the event stream ends after
    /// this event. Subscribing again is refused while the room stays closed.
    case roomClosed(reason: String)
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
