import ParleyCore

/// The lobby's recent messages as one loop's line sessions were shown them: who wrote what,
/// in its current text, so the line door can word an action on a message (`alice reacted
/// 👍 to "hello…"`, a reply's quote) and find "your last message" and "the last message of
/// someone else" for its short commands. Presentation only: every rule stays in
/// ``ChatSession``; the server checks the target an action names.
///
/// One per loop, owned by the line door, loop-confined. It sees what that loop's line
/// sessions see (the join history, then every lobby event, each offset once), and keeps at
/// most ``capacity`` messages (older ones are worded as "a message").
final class LineTranscript {
    struct Entry: Equatable {
        let id: String
        let senderID: String?
        let name: String
        var text: String
    }

    /// Most messages kept per loop.
    static let capacity = 256

    private var entries: [Int64: Entry] = [:]
    private var order: [Int64] = []
    private var highest: Int64 = 0

    /// The message at `offset`, if kept.
    func entry(at offset: Int64) -> Entry? { entries[offset] }

    /// The newest message kept that `matches`.
    func newest(where matches: (Entry) -> Bool) -> Entry? {
        for offset in order.reversed() {
            if let entry = entries[offset], matches(entry) { return entry }
        }
        return nil
    }

    /// Takes in a lobby message or action once (by offset; a later copy of an offset already
    /// seen, e.g. another joiner's history, changes nothing).
    func observe(_ message: Message) {
        guard message.offset > highest, !message.isEphemeral else { return }
        highest = message.offset
        if let action = message.action {
            switch action.kind {
            case .edit where !message.isDeleted:
                entries[action.target.offset]?.text = LineEncoding.text(of: message.body)
            case .delete:
                entries[action.target.offset] = nil
            default:
                break
            }
            return
        }
        guard !message.isDeleted else { return }
        entries[message.offset] = Entry(id: message.id, senderID: message.sender?.id,
                                        name: LineEncoding.singleLine(message.sender.map(\.displayName) ?? LineEncoding.serverName),
                                        text: LineEncoding.text(of: message.body))
        order.append(message.offset)
        if order.count > Self.capacity {
            let dropped = order.removeFirst()
            entries[dropped] = nil
        }
        // Deleted entries leave holes in `order`; keep it from growing past twice the capacity.
        if order.count > Self.capacity, order.count > entries.count * 2 { order.removeAll { entries[$0] == nil } }
    }
}
