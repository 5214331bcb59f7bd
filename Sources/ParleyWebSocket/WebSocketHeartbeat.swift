/// The keep-alive of one WebSocket, as a state machine with no timer: the owner calls
/// ``heard()`` whenever bytes arrive and ``tick()`` once per interval, and does what the
/// tick answers. A peer silent for one interval is pinged; silent for the next one too
/// (the ping unanswered), it is gone: a half-open connection is noticed within two
/// intervals. Used by both ``WebSocketClientConnection`` and ``WebSocketServerConnection``.
public struct WebSocketHeartbeat: Sendable, Equatable {
    /// What a tick asks for.
    public enum Action: Sendable, Equatable {
        /// The peer was heard this interval (or the ping is out and the interval not over).
        case none
        /// Silent for a whole interval: send a ping.
        case sendPing
        /// Silent for a second interval after the ping: close the connection (1006).
        case giveUp
    }

    // `true` at the start: the first interval counts from the opening, which was hearing.
    private var heardSinceTick = true
    /// A ping went out and nothing has been heard since.
    public private(set) var pingOutstanding = false

    /// A heartbeat that has just heard its peer.
    public init() {}

    /// Bytes arrived from the peer (any: a pong, a message, a fragment).
    @inline(__always) public mutating func heard() { heardSinceTick = true }

    /// One interval has passed.
    public mutating func tick() -> Action {
        if heardSinceTick {
            heardSinceTick = false
            pingOutstanding = false
            return .none
        }
        if pingOutstanding { return .giveUp }
        pingOutstanding = true
        return .sendPing
    }
}
