/// Who gets a push for a message, and what it says (docs/push.md): the rules, pure, so every
/// one of them is tested without a server.
public enum PushRules {
    /// The users who are due a push for `message` in `room`: the room's users (a direct
    /// room's from its name, another room's from its conversations), but the sender, those
    /// connected to the room now (on any door or node), and those who muted it. A mention or a
    /// direct message reaches a muted user when `mentionsOverrideMutes`.
    public static func recipients(of message: Message, users: [String], connected: Set<String>, mutes: [String: [PushMute]],
                                  nowMillis: Int64, mentionsOverrideMutes: Bool, names: [String: String] = [:]) -> [String] {
        guard !message.isAction, !message.isEphemeral, !message.isDeleted, message.offset > 0 else { return [] }
        let sender = message.sender?.user
        var seen = Set<String>()
        var out: [String] = []
        for user in users where user != sender && !connected.contains(user) && seen.insert(user).inserted {
            let muted = (mutes[user] ?? []).contains { $0.untilMillis > nowMillis && ($0.room == nil || $0.room == message.room.room) }
            if muted {
                let urgent = DirectRoom.isDirect(message.room.room)
                    || Mentions.mention(in: message.body, of: user, name: names[user] ?? "")
                guard mentionsOverrideMutes && urgent else { continue }
            }
            out.append(user)
        }
        return out
    }

    /// What is still to tell when a coalesced push of `count` messages is sent, given the
    /// room's newest messages up to its last one as they are now (`page`, oldest first): the
    /// newest message still there (edited, it shows its latest text) and how many are left
    /// once deleted ones are taken away; nil when none is (the push is withdrawn).
    public static func pending(_ page: [Message], count: Int, for user: String) -> (last: Message, count: Int)? {
        let chat = page.filter { !$0.isAction && !$0.isEphemeral && $0.sender?.user != user }
        let live = chat.filter { !$0.isDeleted }
        guard let last = live.last else { return nil }
        let deleted = chat.count - live.count
        return (last, max(live.count, count - deleted))
    }

    /// What a notification shows.
    public struct Content: Sendable, Equatable {
        public var title: String
        public var body: String
        /// APNs `thread-id`, FCM `tag`, the Web Push `Topic`: one thread per room.
        public var thread: String
        public var badge: Int
        public var channel: String
        public var room: String
        public var offset: Int64
        public var messageID: String

        public init(title: String, body: String, thread: String, badge: Int, channel: String, room: String, offset: Int64, messageID: String) {
            self.title = title
            self.body = body
            self.thread = thread
            self.badge = badge
            self.channel = channel
            self.room = room
            self.offset = offset
            self.messageID = messageID
        }
    }

    /// Longest preview, in characters.
    public static let maxPreview = 180

    /// The notification for `count` unread messages of `room`, the newest being `last`: the
    /// room (or the sender of a direct message) as title, a preview of the text unless
    /// `private`, and "N new messages" for a burst.
    public static func content(last: Message, count: Int, badge: Int, preview: Bool) -> Content {
        let sender = last.sender?.displayName ?? "Parley"
        let direct = DirectRoom.isDirect(last.room.room)
        let title = direct ? sender : "#" + last.room.room
        var text = "New message"
        if preview {
            let raw = last.body.stringValue ?? last.body["text"]?.stringValue ?? "sent a file"
            let flat = TerminalText.sanitized(raw).split(whereSeparator: \.isNewline).joined(separator: " ")
            let clipped = flat.count > maxPreview ? String(flat.prefix(maxPreview)) + "…" : flat
            text = direct ? clipped : "\(sender): \(clipped)"
        }
        if count > 1 { text = preview ? "\(count) new messages · " + text : "\(count) new messages" }
        return Content(title: title, body: text, thread: last.room.room, badge: badge, channel: last.room.channel,
                       room: last.room.room, offset: last.offset, messageID: last.id)
    }
}
