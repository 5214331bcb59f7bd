/// When an Engine.IO session pings, and when silence ends it. A pure state machine: the
/// session runs the timers it asks for and closes the session ("ping timeout") when the
/// timeout it armed fires.
///
/// - EIO4: the server pings every `pingInterval`; the client must pong within `pingTimeout`.
/// - EIO3: the client pings; silence (no packet at all) for `pingInterval + pingTimeout` ends
///   the session.
struct EngineIOHeartbeat: Equatable {
    enum Action: Equatable {
        case sendPing
        /// (Re)start the timeout; when it fires the session ends.
        case armTimeout(afterMillis: UInt64)
        case disarmTimeout
    }

    let version: EngineIOVersion
    let intervalMillis: UInt64
    let timeoutMillis: UInt64
    private(set) var awaitingPong = false

    init(version: EngineIOVersion, intervalMillis: UInt64, timeoutMillis: UInt64) {
        self.version = version
        self.intervalMillis = intervalMillis
        self.timeoutMillis = timeoutMillis
    }

    /// The period of the server's ping timer, nil when the client pings (EIO3).
    var pingPeriodMillis: UInt64? { version == .v4 ? intervalMillis : nil }

    /// What to do when the session opens.
    func start() -> [Action] {
        version == .v3 ? [.armTimeout(afterMillis: intervalMillis + timeoutMillis)] : []
    }

    /// The ping timer fired: ping, unless the last ping is still unanswered.
    mutating func pingDue() -> [Action] {
        guard version == .v4, !awaitingPong else { return [] }
        awaitingPong = true
        return [.sendPing, .armTimeout(afterMillis: timeoutMillis)]
    }

    /// A packet of `kind` arrived from the client.
    mutating func received(_ kind: EngineIOPacket.Kind) -> [Action] {
        switch version {
        case .v3:
            return [.armTimeout(afterMillis: intervalMillis + timeoutMillis)]
        case .v4:
            guard kind == .pong else { return [] }
            awaitingPong = false
            return [.disarmTimeout]
        }
    }
}
