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
    /// Whether the message was deleted (its text and files are gone).
    public let isDeleted: Bool
    /// The message this one replies to, as it is now (nil when it is no reply).
    public let quote: Quote?
    /// Whether the message was edited (``text`` is the latest).
    public let isEdited: Bool
    /// The message's reactions, in the order each emoji first came.
    public let reactions: [ChatReaction]

    /// What a reply shows of the message it answers.
    public struct Quote: Sendable, Hashable {
        /// The answered message's id.
        public let id: String
        /// Its sender's name; nil when the message is not in the transcript (older, or dropped).
        public let name: String?
        /// Its text now (empty when unknown or deleted).
        public let text: String
        /// Whether it was deleted.
        public let isDeleted: Bool

        /// Creates a quote.
        public init(id: String, name: String?, text: String, isDeleted: Bool) {
            self.id = id
            self.name = name
            self.text = text
            self.isDeleted = isDeleted
        }

        /// The text cut to `limit` characters with an ellipsis, on one line, for terminals.
        public func snippet(_ limit: Int = 40) -> String {
            let flat = text.split(whereSeparator: \.isNewline).joined(separator: " ")
            return flat.count > limit ? String(flat.prefix(limit)) + "…" : flat
        }
    }

    /// Creates a line.
    public init(id: String, kind: Kind, name: String, color: String, text: String, date: Date,
                attachments: [Attachment] = [], offset: Int? = nil, isDeleted: Bool = false,
                quote: Quote? = nil, isEdited: Bool = false, reactions: [ChatReaction] = []) {
        self.quote = quote
        self.isEdited = isEdited
        self.reactions = reactions
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

    /// `reply to bob: "hello…"` for a reply (`reply to a message` when the answered one is
    /// not in the transcript), nil otherwise: what text clients put after the sender's name.
    public var replyLabel: String? {
        guard let quote else { return nil }
        guard let name = quote.name else { return "reply to a message" }
        return quote.isDeleted ? "reply to \(name): (deleted)" : "reply to \(name): \"\(quote.snippet())\""
    }

    /// The reactions as text, `👍 2  🎉 1`; empty when there are none.
    public var reactionsText: String {
        reactions.map { "\($0.emoji) \($0.count)" }.joined(separator: "  ")
    }

    /// The heading text clients show before the text: `alice`, `alice (reply to bob:
    /// "hi")`, `alice (edited)`.
    public var heading: String {
        let notes = [replyLabel, isEdited ? "edited" : nil].compactMap { $0 }
        return notes.isEmpty ? name : "\(name) (\(notes.joined(separator: ", ")))"
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
    /// Read receipts by user (when the room was joined with receipts).
    public private(set) var receipts: [String: ReadReceiptInfo] = [:]
    /// This user's unread count (when the room was joined with unread counts).
    public private(set) var unread: UnreadInfo?
    /// Most lines kept; older ones are dropped.
    public var maxLines: Int
    private var lineIDs: Set<String> = []
    /// The messages behind the message lines (by id), in their current state.
    private var messages: [String: ChatMessage] = [:]
    /// Which of them came as history (shown as such).
    private var historyIDs: Set<String> = []
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
            if let message = messages[line.id] {
                let deleted = ChatAction(id: "", kind: .delete, target: message.id, clientID: nil, sender: nil, offset: nil,
                                         timestamp: now, isMine: false)
                update(message.applying(deleted))
            } else {
                lines[index] = ChatLine(id: line.id, kind: line.kind, name: line.name, color: line.color,
                                        text: Self.deletedText, date: line.date, offset: offset, isDeleted: true)
            }
        case .action(let action):
            guard let message = messages[action.target] else { return }
            let actor = action.sender ?? action.clientID.flatMap { known[$0] }
            update(message.applying(action, actorName: actor?.displayName ?? (action.clientID == nil ? "server" : nil)))
        case .roomClosed(let reason):
            typing = []
            members = []
            notice(reason.isEmpty ? "the room was closed" : "the room was closed: \(reason)", now: now)
        case .receipts(let list):
            receipts = Dictionary(list.map { ($0.user, $0) }, uniquingKeysWith: { $0.offset >= $1.offset ? $0 : $1 })
        case .read(let receipt):
            if (receipts[receipt.user]?.offset ?? 0) < receipt.offset { receipts[receipt.user] = receipt }
        case .unread(let count):
            unread = count
        }
    }

    /// The users other than `me` who have read the message at `offset`, by name.
    public func seenBy(_ offset: Int, me: String?) -> [ReadReceiptInfo] {
        ReadReceiptInfo.seenBy(offset, in: receipts.values.sorted { $0.name < $1.name }, excluding: me)
    }

    /// "Seen by Bob, Carol" under this client's newest message, or nil when nobody has seen it.
    public func seenByLine(me: String?) -> String? {
        guard let offset = lastOwnMessage?.offset else { return nil }
        let names = seenBy(offset, me: me).map(\.name)
        return names.isEmpty ? nil : "Seen by " + names.joined(separator: ", ")
    }

    /// The newest stored message's offset in the transcript (what "mark read" marks up to).
    public var newestOffset: Int? { lines.last { $0.offset != nil }?.offset }

    /// What a deleted message's line shows instead of its text.
    public static let deletedText = "(message deleted)"

    /// The message behind a line, in its current state (nil for notices and for messages
    /// no longer in the transcript).
    public func message(_ id: String) -> ChatMessage? { messages[id] }

    /// This client's newest message still in the transcript and not deleted (what "edit my
    /// last message" acts on).
    public var lastOwnMessage: ChatMessage? {
        lines.last { $0.isMine && !$0.isDeleted && $0.kind != .notice }.flatMap { messages[$0.id] }
    }

    /// The newest message of someone else (what "reply" and "react" without an id act on).
    public var lastOthersMessage: ChatMessage? {
        lines.last { !$0.isMine && !$0.isDeleted && $0.kind != .notice }.flatMap { messages[$0.id] }
    }

    /// Replaces a message's state and redraws its line and the lines of replies to it.
    private mutating func update(_ message: ChatMessage) {
        messages[message.id] = message
        for index in lines.indices where lines[index].id == message.id || lines[index].quote?.id == message.id {
            guard let shown = messages[lines[index].id] else { continue }
            lines[index] = line(for: shown)
        }
    }


    /// Adds a notice line (e.g. "reconnecting…").
    public mutating func notice(_ text: String, now: Date = Date()) {
        noticeCounter += 1
        insert(ChatLine(id: "notice-\(noticeCounter)", kind: .notice, name: "", color: "", text: text, date: now))
    }

    private mutating func append(_ message: ChatMessage, history: Bool) {
        if let id = message.clientID { typing.removeAll { $0.id == id } }
        guard !lineIDs.contains(message.id) else { return }
        messages[message.id] = message
        if history { historyIDs.insert(message.id) }
        insert(line(for: message))
    }

    private func name(of message: ChatMessage) -> String {
        let sender = message.sender ?? message.clientID.flatMap { known[$0] }
        return sender?.displayName ?? (message.clientID == nil ? "server" : "someone")
    }

    private func text(of message: ChatMessage) -> String {
        message.isDeleted ? Self.deletedText
            : message.attachments.isEmpty ? message.text ?? message.body.jsonString : message.caption ?? ""
    }

    private func line(for message: ChatMessage) -> ChatLine {
        let sender = message.sender ?? message.clientID.flatMap { known[$0] }
        let name = name(of: message)
        let color = sender?.displayColor ?? NameColor.color(for: name)
        let quote = message.replyTo.map { id in
            messages[id].map { ChatLine.Quote(id: id, name: self.name(of: $0), text: $0.isDeleted ? "" : text(of: $0), isDeleted: $0.isDeleted) }
                ?? ChatLine.Quote(id: id, name: nil, text: "", isDeleted: false)
        }
        let history = historyIDs.contains(message.id)
        return ChatLine(id: message.id, kind: history ? .history(isMine: message.isMine) : .message(isMine: message.isMine),
                        name: name, color: color, text: text(of: message), date: message.timestamp,
                        attachments: message.isDeleted ? [] : message.attachments,
                        offset: message.offset, isDeleted: message.isDeleted, quote: quote,
                        isEdited: message.isEdited && !message.isDeleted, reactions: message.isDeleted ? [] : message.reactions)
    }

    private mutating func insert(_ line: ChatLine) {
        guard lineIDs.insert(line.id).inserted else { return }
        lines.append(line)
        if lines.count > maxLines {
            let dropped = lines.prefix(lines.count - maxLines)
            for old in dropped {
                lineIDs.remove(old.id)
                messages[old.id] = nil
                historyIDs.remove(old.id)
            }
            lines.removeFirst(dropped.count)
        }
    }
}
