import Synchronization

/// A bound on the bytes that unfinished incoming requests and messages hold over every
/// connection of a server: WebSocket messages (native, Socket.IO) and HTTP request bodies
/// (REST, Socket.IO polling).
///
/// A message or a body is buffered until its last byte arrives, up to its size limit (1 MiB
/// by default): a client that sends all but the last byte and waits makes the server hold the
/// rest, and 10,000 such connections 10 GiB, for the price of sending it once. With a budget
/// every connection may hold ``freePerConnection`` whatever the others do (a chat message or a
/// REST call is far smaller); past it, a connection that needs more while the server-wide
/// total is over ``limit`` must be closed (its ``Share/hold(_:)`` says so), and what it held
/// is given back.
public final class InboundByteBudget: Sendable {
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

    /// Bytes held in unfinished messages and bodies now, over every connection.
    public var bytesHeld: Int { held.load(ordering: .relaxed) }
    /// Connections refused because the budget was spent.
    public var connectionsRefused: Int { refused.load(ordering: .relaxed) }

    /// One connection's part of the budget. Not thread-safe: used on the connection's loop.
    public struct Share: Sendable {
        public let budget: InboundByteBudget
        /// What this connection counts in the budget now.
        public private(set) var held = 0

        public init(of budget: InboundByteBudget) { self.budget = budget }

        /// The connection holds `bytes` now. False when it grew past its free share while the
        /// budget is spent: close it (what it held is given back here).
        public mutating func hold(_ bytes: Int) -> Bool {
            guard bytes != held else { return true }
            let total = budget.held.add(bytes - held, ordering: .relaxed).newValue
            let grew = bytes > held
            held = bytes
            guard grew, bytes > budget.freePerConnection, total > budget.limit else { return true }
            budget.refused.add(1, ordering: .relaxed)
            release()
            return false
        }

        /// Gives back everything this connection held (it closed).
        public mutating func release() {
            guard held != 0 else { return }
            budget.held.subtract(held, ordering: .relaxed)
            held = 0
        }
    }
}
