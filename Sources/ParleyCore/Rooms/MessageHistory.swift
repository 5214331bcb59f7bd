import Synchronization

/// The most recent messages of a room, bounded by count and by bytes (per room, and against
/// a budget shared by every room of the server): the oldest go first. Always contiguous: it
/// holds every log entry from its first offset to its last, actions included, as they were
/// appended (what a resume replays), and beside them the current state of every kept
/// message an action changed (what history shows), kept by the rule the stores follow
/// (``Message/applying(_:)``).
public struct MessageHistory: Sendable {
    public let capacity: Int
    /// Most bytes (a message's `cachedSize`: its approximate size and its body's encoding) this room's cache holds.
    public let maxBytes: Int
    private let budget: HistoryBudget?
    private var messages: [Message] = []
    private var sizes: [Int] = []
    private var start = 0
    public private(set) var bytes = 0
    /// The current state of kept messages that actions changed, by offset.
    private var current: [Int64: Message] = [:]
    /// Action entries kept (history pages skip them).
    private var actions = 0

    public init(capacity: Int, maxBytes: Int = .max, budget: HistoryBudget? = nil) {
        precondition(capacity >= 0 && maxBytes >= 0)
        self.capacity = capacity
        self.maxBytes = maxBytes
        self.budget = budget
    }

    public var count: Int { messages.count - start }
    public var first: Message? { start < messages.count ? messages[start] : nil }

    public mutating func append(_ entry: Message) {
        guard capacity > 0 else { return }
        let message = entry.action.map { apply(entry, to: $0.target.offset) } ?? entry
        let size = message.cachedSize
        guard size <= maxBytes else { removeAll(); return }
        if let budget, !budget.reserve(size) {
            // The server's cache is full: this room starts over from this message (reads
            // of older ones go to the store), which keeps it contiguous.
            removeAll()
            guard budget.reserve(size) else { return }
        }
        messages.append(message)
        sizes.append(size)
        bytes += size
        if message.isAction { actions += 1 }
        while count > capacity || bytes > maxBytes { dropFirst() }
        if start > 64 && start * 2 > messages.count {
            messages.removeFirst(start)
            sizes.removeFirst(start)
            start = 0
        }
    }

    private mutating func dropFirst() {
        bytes -= sizes[start]
        budget?.release(sizes[start])
        if messages[start].isAction { actions -= 1 }
        current[messages[start].offset] = nil
        start += 1
    }

    /// Applies an action to its target when kept: a delete as ``markDeleted(_:)``, any other
    /// into the target's current state (its bytes counted with the target's). Returns the
    /// entry as it is to be kept: an edit of a message deleted meanwhile (it passed its checks
    /// just before the delete was stored) as a tombstone, as the stores keep it.
    private mutating func apply(_ entry: Message, to target: Int64) -> Message {
        guard entry.action?.kind != .delete else { markDeleted(target); return entry }
        guard let index = index(of: target), !messages[index].isAction else { return entry }
        guard !messages[index].isDeleted else { return entry.action?.kind == .edit ? entry.tombstone : entry }
        let state = (current[target] ?? messages[index]).applying(entry)
        current[target] = state
        let size = messages[index].cachedSize + state.cachedSize
        let grown = size - sizes[index]
        sizes[index] = size
        bytes += grown
        if grown > 0 { budget?.force(grown) } else { budget?.release(-grown) }
        return entry
    }

    private func index(of offset: Int64) -> Int? {
        let index = messages[start...].partitionPoint { $0.offset < offset }
        guard index < messages.count, messages[index].offset == offset else { return nil }
        return index
    }

    /// Forgets everything (giving its bytes back to the budget).
    public mutating func removeAll() {
        budget?.release(bytes)
        bytes = 0
        messages.removeAll()
        sizes.removeAll()
        current.removeAll()
        actions = 0
        start = 0
    }

    /// Replaces the kept message at `offset` (if any) by its tombstone, and the kept edits of
    /// it too (they hold its text), giving back the bytes their bodies held.
    public mutating func markDeleted(_ offset: Int64) {
        guard let index = index(of: offset), !messages[index].isDeleted else { return }
        current[offset] = nil
        tombstone(at: index)
        guard actions > 0 else { return }
        for later in (index + 1)..<messages.count where messages[later].carriesText(of: offset) { tombstone(at: later) }
    }

    private mutating func tombstone(at index: Int) {
        let tombstone = messages[index].tombstone
        let freed = sizes[index] - tombstone.cachedSize
        messages[index] = tombstone
        if freed > 0 {
            sizes[index] -= freed
            bytes -= freed
            budget?.release(freed)
        }
    }

    /// All kept log entries as appended, oldest first.
    public var all: [Message] { Array(messages[start...]) }

    /// The newest `count` log entries, oldest first.
    public func latest(_ count: Int) -> [Message] {
        let n = max(0, min(count, self.count))
        return Array(messages.suffix(n))
    }

    /// The kept message at `offset` in its current state (nil when not kept, or an action).
    public func message(at offset: Int64) -> Message? {
        guard let index = index(of: offset), !messages[index].isAction else { return nil }
        return current[offset] ?? messages[index]
    }

    /// Whether this cache holds the `count` newest messages (actions not counted) up to
    /// `offset`, or every one there is (it starts at the room's first offset).
    public func holds(_ count: Int, messagesThrough offset: Int64) -> Bool {
        guard let first else { return false }
        if first.offset <= 1 || count == 0 { return true }
        guard actions > 0 else { return first.offset <= offset - Int64(count) + 1 }
        var found = 0
        for index in stride(from: messages.count - 1, through: start, by: -1) where messages[index].offset <= offset {
            if !messages[index].isAction { found += 1 }
            if found >= count { return true }
        }
        return false
    }

    /// Messages with an offset greater than `offset`, oldest first, at most `limit`.
    public func after(_ offset: Int64, limit: Int = .max) -> [Message] {
        let index = messages[start...].partitionPoint { $0.offset <= offset }
        return Array(messages[index...].prefix(limit))
    }

    /// Up to `limit` messages with an offset below `offset` (newest `limit` of them), oldest
    /// first, in their current state (actions are not listed), and of those the newest that
    /// fit in `maxBytes` (at least one; see ``MessagePage/firstFitting(_:maxBytes:size:)``).
    public func before(_ offset: Int64, limit: Int, maxBytes: Int = .max) -> [Message] {
        guard actions == 0 && current.isEmpty else { return currentBefore(offset, limit: limit, maxBytes: maxBytes) }
        let end = messages[start...].partitionPoint { $0.offset < offset }
        let counted = max(start, end - max(0, limit))
        guard maxBytes != .max else { return Array(messages[counted..<end]) }
        // The sizes kept beside the messages: nothing is measured again.
        var first = end
        var bytes = 0
        while first > counted {
            let grown = bytes + sizes[first - 1]
            if first != end && grown > maxBytes { break }
            bytes = grown
            first -= 1
        }
        return Array(messages[first..<end])
    }

    /// ``before(_:limit:maxBytes:)`` once actions are kept: walks back over them.
    private func currentBefore(_ offset: Int64, limit: Int, maxBytes: Int) -> [Message] {
        var index = messages[start...].partitionPoint { $0.offset < offset }
        var page: [Message] = []
        var bytes = 0
        while index > start && page.count < limit {
            index -= 1
            guard !messages[index].isAction else { continue }
            let grown = bytes + sizes[index]
            if !page.isEmpty && grown > maxBytes { break }
            bytes = grown
            page.append(current[messages[index].offset] ?? messages[index])
        }
        return page.reversed()
    }
}

/// The bytes every room's history cache may hold together (`--history-memory`). Shared by all
/// rooms; lock-free.
public final class HistoryBudget: Sendable {
    public let limit: Int
    private let used = Atomic<Int>(0)

    public init(limit: Int) { self.limit = limit }

    /// Bytes held now.
    public var bytes: Int { used.load(ordering: .relaxed) }

    /// Takes `bytes` from the budget; false (taking nothing) when they do not fit.
    func reserve(_ bytes: Int) -> Bool {
        let after = used.add(bytes, ordering: .relaxed).newValue
        if after <= limit { return true }
        used.subtract(bytes, ordering: .relaxed)
        return false
    }

    func release(_ bytes: Int) { used.subtract(bytes, ordering: .relaxed) }

    /// Takes `bytes` even past the limit (a kept message's state grew; the next append that
    /// does not fit starts the room over).
    func force(_ bytes: Int) { used.add(bytes, ordering: .relaxed) }
}

extension Message {
    /// What keeping the message in a room's cache costs: ``approximateSize`` plus its body's
    /// encoding (``bodyJSON``, made once it is stored or delivered, and kept with it).
    var cachedSize: Int { approximateSize + (isDeleted ? 0 : body.approximateSize) }

    /// About how many bytes the message takes in memory.
    public var approximateSize: Int {
        var size = 96 + id.utf8.count + body.approximateSize
            + (sender.map { 32 + $0.id.utf8.count + ($0.clientData?.approximateSize ?? 0) + ($0.authData?.approximateSize ?? 0) } ?? 0)
        if let replyTo { size += 24 + replyTo.id.utf8.count }
        if let action { size += 32 + action.target.id.utf8.count + (action.emoji?.utf8.count ?? 0) }
        for reaction in reactions {
            size += 32 + reaction.emoji.utf8.count
            for reactor in reaction.reactors { size += 32 + reactor.id.utf8.count + reactor.name.utf8.count }
        }
        return size
    }
}
