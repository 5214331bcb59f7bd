import Synchronization

/// The most recent messages of a room, bounded by count and by bytes (per room, and against
/// a budget shared by every room of the server): the oldest go first. Always contiguous: it
/// holds every message from its first offset to its last.
public struct MessageHistory: Sendable {
    public let capacity: Int
    /// Most bytes (``Message/approximateSize``) this room's cache holds.
    public let maxBytes: Int
    private let budget: HistoryBudget?
    private var messages: [Message] = []
    private var sizes: [Int] = []
    private var start = 0
    public private(set) var bytes = 0

    public init(capacity: Int, maxBytes: Int = .max, budget: HistoryBudget? = nil) {
        precondition(capacity >= 0 && maxBytes >= 0)
        self.capacity = capacity
        self.maxBytes = maxBytes
        self.budget = budget
    }

    public var count: Int { messages.count - start }
    public var first: Message? { start < messages.count ? messages[start] : nil }

    public mutating func append(_ message: Message) {
        guard capacity > 0 else { return }
        let size = message.approximateSize
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
        start += 1
    }

    /// Forgets everything (giving its bytes back to the budget).
    public mutating func removeAll() {
        budget?.release(bytes)
        bytes = 0
        messages.removeAll()
        sizes.removeAll()
        start = 0
    }

    /// Replaces the kept message at `offset` (if any) by its tombstone, giving back the bytes
    /// its body held.
    public mutating func markDeleted(_ offset: Int64) {
        let index = messages[start...].partitionPoint { $0.offset < offset }
        guard index < messages.count, messages[index].offset == offset, !messages[index].isDeleted else { return }
        let tombstone = messages[index].tombstone
        let freed = sizes[index] - tombstone.approximateSize
        messages[index] = tombstone
        if freed > 0 {
            sizes[index] -= freed
            bytes -= freed
            budget?.release(freed)
        }
    }

    /// All kept messages, oldest first.
    public var all: [Message] { Array(messages[start...]) }

    /// The newest `count` messages, oldest first.
    public func latest(_ count: Int) -> [Message] {
        let n = max(0, min(count, self.count))
        return Array(messages.suffix(n))
    }

    /// Messages with an offset greater than `offset`, oldest first, at most `limit`.
    public func after(_ offset: Int64, limit: Int = .max) -> [Message] {
        let index = messages[start...].partitionPoint { $0.offset <= offset }
        return Array(messages[index...].prefix(limit))
    }

    /// Up to `limit` messages with an offset below `offset` (newest `limit` of them), oldest
    /// first, and of those the newest that fit in `maxBytes` (at least one; see
    /// ``MessagePage/firstFitting(_:maxBytes:size:)``).
    public func before(_ offset: Int64, limit: Int, maxBytes: Int = .max) -> [Message] {
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
}

extension Message {
    /// About how many bytes the message takes in memory.
    public var approximateSize: Int {
        96 + id.utf8.count + body.approximateSize
            + (sender.map { 32 + $0.id.utf8.count + ($0.clientData?.approximateSize ?? 0) + ($0.authData?.approximateSize ?? 0) } ?? 0)
    }
}
