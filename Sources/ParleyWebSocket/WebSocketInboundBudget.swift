import Synchronization

/// A bound on the bytes that unfinished incoming messages hold over many connections.
///
/// A message is buffered until its last byte arrives (a frame that straddles two reads, a
/// fragmented or compressed message), up to the message size limit: a client that sends all
/// but the last byte of a 1 MiB message and waits makes the server hold 1 MiB, and 10,000 such
/// connections 10 GiB, for the price of sending it once. With a budget every connection may
/// hold ``freePerConnection`` whatever the others do (a chat message is far smaller); past it,
/// a connection that buffers more while the server-wide total is over ``limit`` is closed with
/// 1013 (try again later), and what it held is given back.
public final class WebSocketInboundBudget: Sendable {
    /// Bytes all connections together may hold beyond their free share.
    public let limit: Int
    /// What one connection may hold however full the budget is.
    public let freePerConnection: Int
    private let held = Atomic<Int>(0)
    private let refused = Atomic<Int>(0)

    public init(limit: Int, freePerConnection: Int = 64 << 10) {
        self.limit = limit
        self.freePerConnection = freePerConnection
    }

    /// Bytes held in unfinished messages now, over every connection.
    public var bytesHeld: Int { held.load(ordering: .relaxed) }
    /// Connections closed because the budget was spent.
    public var connectionsRefused: Int { refused.load(ordering: .relaxed) }

    /// A connection that held `old` bytes holds `new` now: true while it may go on.
    func update(from old: Int, to new: Int) -> Bool {
        let total = new == old ? held.load(ordering: .relaxed) : held.add(new - old, ordering: .relaxed).newValue
        guard new > freePerConnection, new > old, total > limit else { return true }
        refused.add(1, ordering: .relaxed)
        return false
    }
}
