import Foundation
import ParleyCore

/// One line of a chat transcript: a message or a notice ("alice joined").
public struct ChatLine: Sendable, Hashable, Identifiable {
    /// What kind of line.
    public enum Kind: Sendable, Hashable {
        /// A chat message; `isMine` when this client sent it.
        case message(isMine: Bool)
        /// A stored message shown on join.
        case history(isMine: Bool)
        /// A join/leave or connection notice.
        case notice
    }
    /// Unique within the transcript (the message id for messages).
    public let id: String
    /// What kind of line.
    public let kind: Kind
    /// The sender's name (empty for notices).
    public let name: String
    /// The sender's color `#RRGGBB` (empty for notices).
    public let color: String
    /// The text (non-string bodies as compact JSON; for a message with files, its caption,
    /// possibly empty).
    public let text: String
    /// When it was sent (notices: when they happened).
    public let date: Date
    /// The files the message carries: images to show, others to offer as downloads.
    public let attachments: [Attachment]
    /// The message's offset in the room's history (nil for notices and unstored messages).
    public let offset: Int?
    /// Whether a moderator deleted the message (its text and files are gone).
    public let isDeleted: Bool

    /// Creates a line.
    public init(id: String, kind: Kind, name: String, color: String, text: String, date: Date,
                attachments: [Attachment] = [], offset: Int? = nil, isDeleted: Bool = false) {
        self.offset = offset
        self.isDeleted = isDeleted
        self.id = id
        self.kind = kind
        self.name = name
        self.color = color
        self.text = text
        self.date = date
        self.attachments = attachments
    }

    /// The files as text terminals show them: `[image cat.jpg 1.2 MB] URL`, one per file.
    public var attachmentLines: [String] {
        AttachmentMessage(attachments: attachments).lineDoorLines()
    }

    /// Whether this client sent it.
    public var isMine: Bool {
        switch kind {
        case .message(let mine), .history(let mine): mine
        case .notice: false
        }
    }
}

/// The state of a chat room screen, as a value: what ``ChatRoomModel`` shows, updated by
/// feeding it the room's events. Pure, so every rule here is tested without a server.
public struct ChatRoomState: Sendable, Hashable {
    /// The transcript, oldest first.
    public private(set) var lines: [ChatLine] = []
    /// Who is in the room now, in join order.
    public private(set) var members: [ChatMember] = []
    /// Who is typing now (this client included when it types), in the order they started.
    public private(set) var typing: [ChatMember] = []
    /// Most lines kept; older ones are dropped.
    public var maxLines: Int
    private var lineIDs: Set<String> = []
    private var noticeCounter = 0
    /// Everyone seen, so a message from someone who left keeps their name and color.
    private var known: [String: ChatMember] = [:]

    /// An empty room.
    public init(maxLines: Int = 1000) { self.maxLines = maxLines }

    /// `"alice is typing"`, `"alice, bob are typing"`; empty when nobody else types.
    public var typingText: String {
        let names = typing.filter { !$0.isMe }.map(\.displayName)
        switch names.count {
        case 0: return ""
        case 1: return "\(names[0]) is typing"
        default: return "\(names.joined(separator: ", ")) are typing"
        }
    }

    /// Applies one room event.
    public mutating func apply(_ event: RoomEvent, now: Date = Date()) {
        switch event {
        case .message(let message):
            append(message, history: false)
        case .history(let message):
            append(message, history: true)
        case .members(let list):
            members = list
            for member in list { known[member.id] = member }
        case .memberJoined(let member):
            members.removeAll { $0.id == member.id }
            members.append(member)
            known[member.id] = member
            if !member.isMe { notice("\(member.displayName) joined", now: now) }
        case .memberLeft(let member):
            members.removeAll { $0.id == member.id }
            typing.removeAll { $0.id == member.id }
            if !member.isMe { notice("\(member.displayName) left", now: now) }
        case .typingChanged(let list):
            typing = list
        case .messageDeleted(let offset):
            guard let index = lines.firstIndex(where: { $0.offset == offset }) else { return }
            let line = lines[index]
            lines[index] = ChatLine(id: line.id, kind: line.kind, name: line.name, color: line.color,
                                    text: Self.deletedText, date: line.date, offset: offset, isDeleted: true)
        case .roomClosed(let reason):
            typing = []
            members = []
            notice(reason.isEmpty ? "the room was closed" : "the room was closed: \(reason)", now: now)
        }
    }

    /// What a deleted message's line shows instead of its text.
    public static let deletedText = "(message deleted)"


    /// Adds a notice line (e.g. "reconnecting…").
    public mutating func notice(_ text: String, now: Date = Date()) {
        noticeCounter += 1
        insert(ChatLine(id: "notice-\(noticeCounter)", kind: .notice, name: "", color: "", text: text, date: now))
    }

    private mutating func append(_ message: ChatMessage, history: Bool) {
        let sender = message.sender ?? message.clientID.flatMap { known[$0] }
        let name = sender?.displayName ?? (message.clientID == nil ? "server" : "someone")
        let color = sender?.displayColor ?? NameColor.color(for: name)
        let text = message.isDeleted ? Self.deletedText
            : message.attachments.isEmpty ? message.text ?? message.body.jsonString : message.caption ?? ""
        if let id = message.clientID { typing.removeAll { $0.id == id } }
        insert(ChatLine(id: message.id, kind: history ? .history(isMine: message.isMine) : .message(isMine: message.isMine),
                        name: name, color: color, text: text, date: message.timestamp, attachments: message.attachments,
                        offset: message.offset, isDeleted: message.isDeleted))
    }

    private mutating func insert(_ line: ChatLine) {
        guard lineIDs.insert(line.id).inserted else { return }
        lines.append(line)
        if lines.count > maxLines {
            let dropped = lines.prefix(lines.count - maxLines)
            for old in dropped { lineIDs.remove(old.id) }
            lines.removeFirst(dropped.count)
        }
    }
}
