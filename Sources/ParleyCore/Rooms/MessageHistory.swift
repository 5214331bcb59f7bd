/// The most recent messages of a room, bounded: the oldest are dropped past `capacity`.
public struct MessageHistory: Sendable {
    public let capacity: Int
    private var ring: [Message] = []
    private var start = 0

    public init(capacity: Int) {
        precondition(capacity >= 0)
        self.capacity = capacity
    }

    public var count: Int { ring.count }

    public mutating func append(_ message: Message) {
        guard capacity > 0 else { return }
        if ring.count < capacity {
            ring.append(message)
        } else {
            ring[start] = message
            start = (start + 1) % capacity
        }
    }

    /// All kept messages, oldest first.
    public var all: [Message] { Array(ring[start...] + ring[..<start]) }

    /// The newest `count` messages, oldest first.
    public func latest(_ count: Int) -> [Message] {
        let n = max(0, min(count, ring.count))
        guard n > 0 else { return [] }
        return Array(all.suffix(n))
    }

    /// Messages with an offset greater than `offset`, oldest first, at most `limit`.
    public func after(_ offset: Int64, limit: Int = .max) -> [Message] {
        Array(all.lazy.filter { $0.offset > offset }.prefix(limit))
    }

    /// Up to `limit` messages with an offset below `offset` (newest `limit` of them), oldest first.
    public func before(_ offset: Int64, limit: Int) -> [Message] {
        Array(all.filter { $0.offset < offset }.suffix(max(0, limit)))
    }
}
