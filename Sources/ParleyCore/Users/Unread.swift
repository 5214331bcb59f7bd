/// A user's unread messages in one room: the messages after their read mark that others
/// sent (actions, typing signals and deleted messages are not messages to read), and how many
/// of those mention them (``Mentions``).
public struct UnreadCount: Sendable, Equatable {
    public var unread: Int
    public var mentions: Int
    /// True when counting stopped early (``UnreadCounter/maxCounted``): there are at least
    /// this many.
    public var capped: Bool
    /// The newest log offset this count has seen (0: none): a message delivered live with a
    /// larger offset is not in it yet.
    public var through: Int64 = 0

    public init(unread: Int = 0, mentions: Int = 0, capped: Bool = false) {
        self.unread = unread
        self.mentions = mentions
        self.capped = capped
    }

    /// One more message `message` arrived after the mark: counted as ``UnreadCounter`` counts.
    public mutating func add(_ message: Message, for user: String, name: String) {
        through = max(through, message.offset)
        guard UnreadCounter.counts(message, for: user) else { return }
        unread += 1
        if Mentions.mention(in: message.body, of: user, name: name) { mentions += 1 }
    }
}

/// Counts unread messages from a page of the room's log after a read mark, at most
/// ``maxCounted`` entries and ``maxBytes`` of them: a badge shows "99+" long before that.
public enum UnreadCounter {
    /// Most log entries read to count one room's unread messages.
    public static let maxCounted = 200
    /// Most bytes of log entries read to count one room's unread messages.
    public static let maxBytes = 128 << 10

    /// Whether `message` is one `user` has to read: a stored message, not deleted, not an
    /// action, from someone else (the server's own messages count).
    @inline(__always) public static func counts(_ message: Message, for user: String) -> Bool {
        message.offset > 0 && !message.isAction && !message.isDeleted && !message.isEphemeral && message.sender?.user != user
    }

    /// The count over `entries` (the log after the mark, oldest first, as a store's
    /// `messages(in:after:limit:maxBytes:)` returned it); `capped` when the log holds entries
    /// after the last one read (the room's newest offset is `lastOffset`).
    public static func count(_ entries: [Message], for user: String, name: String, lastOffset: Int64) -> UnreadCount {
        var count = UnreadCount()
        for entry in entries { count.add(entry, for: user, name: name) }
        if let last = entries.last?.offset, last < lastOffset { count.capped = true }
        count.through = max(count.through, entries.last?.offset ?? 0)
        return count
    }
}

/// Whether a message mentions a user: its body lists the user's id in `mentions` (an object
/// body), or its text (a string body, or an object's `text`) holds `@name` or `@id` as a word
/// of its own (case-insensitive).
public enum Mentions {
    /// Most mentions a body may list that are looked at.
    public static let maxListed = 64

    public static func mention(in body: JSONValue, of user: String, name: String) -> Bool {
        if let list = body["mentions"]?.arrayValue, list.prefix(maxListed).contains(where: { $0.stringValue == user }) { return true }
        guard let text = body.stringValue ?? body["text"]?.stringValue, text.utf8.contains(UInt8(ascii: "@")) else { return false }
        return holds(text, "@" + user) || (!name.isEmpty && holds(text, "@" + name))
    }

    /// `text` holds `word` (starting with `@`) as a word of its own: not after a letter, digit
    /// or `_` (an address is no mention), and not followed by one. ASCII letters compare
    /// without case. Allocation-free: it runs per delivery for every session counting unread.
    static func holds(_ text: String, _ word: String) -> Bool {
        var text = text, word = word
        return text.withUTF8 { haystack in
            word.withUTF8 { needle in
                guard !needle.isEmpty, needle.count <= haystack.count else { return false }
                var start = 0
                let last = haystack.count - needle.count
                while start <= last {
                    if haystack[start] == needle[0] {
                        var index = 1
                        while index < needle.count && lower(haystack[start + index]) == lower(needle[index]) { index += 1 }
                        if index == needle.count {
                            let before = start == 0 ? UInt8(ascii: " ") : lower(haystack[start - 1])
                            let after = start + needle.count < haystack.count ? lower(haystack[start + needle.count]) : UInt8(ascii: " ")
                            if !isWordByte(before), !isWordByte(after) { return true }
                        }
                    }
                    start += 1
                }
                return false
            }
        }
    }

    @inline(__always) static func lower(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }

    @inline(__always) static func isWordByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || byte == UInt8(ascii: "_") || byte >= 0x80
    }
}
