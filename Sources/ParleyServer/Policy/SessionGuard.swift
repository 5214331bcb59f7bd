import ParleyCore
import ParleyIO
import ParleyLog

/// One connection's (or Socket.IO session's) share of its door's ``DoorPolicy``: its place
/// at the gate, the handshake timer, the idle watch and the message-rate bucket with its
/// abuse detector. Every breach is counted in `/metrics` here, so doors only decide what to
/// tell the peer. Loop-confined; ``end()`` stops everything and gives the place back.
///
/// One per TCP connection: made when the connection is accepted, and passed up when the
/// connection changes doors (``enter(_:)``, an HTTP upgrade), to the native or echo session,
/// or to the Engine.IO WebSocket and the Socket.IO session it opens. A long-polling
/// Engine.IO session, which has no connection of its own, has one of its own.
final class SessionGuard {
    private(set) var policy: DoorPolicy
    private let loop: EventLoop
    private let context: DoorContext
    private var ticket: AdmissionTicket? {
        didSet {
            // The connection counts in `parley_connections` under the door holding its ticket.
            if oldValue == nil, ticket != nil { context.metrics.openConnections.gauge(policy.door).add(1) }
            if oldValue != nil, ticket == nil { context.metrics.openConnections.gauge(policy.door).add(-1) }
        }
    }
    private var handshakeTimer: LoopTimer?
    private var idleWatch: IdleWatch?
    private var rate: AbusableRate?
    /// `history` requests (each reads a page from the store): a bucket of their own, so
    /// paging back through history never costs a publish.
    private var historyRate: TokenBucket?
    /// Joins (a subscribe, the lobby): a bucket of their own, since each is announced to the
    /// room's members. Leaves need a join first and are not charged.
    private var joinRate: AbusableRate?

    init(_ policy: DoorPolicy, loop: EventLoop, context: DoorContext, ticket: AdmissionTicket?) {
        self.policy = policy
        self.loop = loop
        self.context = context
        self.ticket = ticket
        if ticket != nil { context.metrics.openConnections.gauge(policy.door).add(1) }
        if let rate = policy.rate { limitRate(perSecond: rate.perSecond, burst: rate.burst) }
    }

    convenience init(_ policy: DoorPolicy, loop: EventLoop, core: ServerCore, ticket: AdmissionTicket?) {
        self.init(policy, loop: loop, context: core.doorContext, ticket: ticket)
    }

    deinit {
        if ticket != nil { context.metrics.openConnections.gauge(policy.door).add(-1) }
    }

    /// The client's address for logs (its IP: the guard does not know the port).
    private var remote: String? { ticket?.ip }

    /// Counts this connection's client per IP now that it is known (a trusted proxy's
    /// connection); the refusal when that client is over the limit.
    func claim(ip: String) -> ConnectionGate.Refusal? { ticket?.claim(ip: ip) }

    /// The connection moves to another door (an HTTP upgrade): it counts under that door in
    /// `parley_connections` from now on, and gets that door's message rate.
    func enter(_ policy: DoorPolicy) {
        if ticket != nil {
            context.metrics.openConnections.gauge(self.policy.door).add(-1)
            context.metrics.openConnections.gauge(policy.door).add(1)
        }
        self.policy = policy
        rate = nil
        if let rate = policy.rate { limitRate(perSecond: rate.perSecond, burst: rate.burst) }
    }

    /// Starts the handshake timer: unless ``handshakeCompleted()`` comes first, the breach is
    /// counted and `onTimeout` runs (it tells the peer and closes).
    func expectHandshake(onTimeout: @escaping () -> Void) {
        let timer = handshakeTimer ?? LoopTimer(loop: loop)
        handshakeTimer = timer
        timer.start(after: policy.handshakeTimeoutMillis) { [weak self] in
            guard let self, self.handshakeTimer != nil else { return }
            self.handshakeTimer = nil
            self.context.limits.breached(.handshakeTimeout, remote: self.remote)
            onTimeout()
        }
    }

    /// The door's handshake is done: the handshake timer has done its job.
    func handshakeCompleted() {
        handshakeTimer?.stop()
        handshakeTimer = nil
    }

    /// Starts watching for silence: after the idle timeout without ``heard()``, the breach is
    /// counted and `onIdle` runs (it says goodbye and closes).
    func watchIdle(onIdle: @escaping () -> Void) {
        idleWatch?.stop()
        idleWatch = IdleWatch(loop: loop, timeoutMillis: policy.idleTimeoutMillis) { [weak self] in
            guard let self else { return }
            self.context.limits.breached(.idleTimeout, remote: self.remote)
            onIdle()
        }
    }

    /// Stops the idle watch (a session that ends before its connection).
    func stopWatchingIdle() {
        idleWatch?.stop()
        idleWatch = nil
    }

    /// The peer sent a message (heartbeats do not count).
    @inline(__always) func heard() { idleWatch?.touch() }

    /// Sets the message rate (a channel with its own limit, a reload). What was spent stays
    /// spent: a reload that keeps the rate refills nothing, a lowered one takes the
    /// difference away at once.
    func limitRate(perSecond: Double, burst: Double) {
        rate = AbusableRate(resizing: rate, perSecond: perSecond, burst: burst, policy: policy)
    }

    /// What to do with one message that counts against the rate.
    enum RateVerdict: Equatable {
        /// Within the rate.
        case allowed
        /// Over the rate: refuse this message.
        case refused
        /// Over the rate again and again: refuse it and disconnect.
        case abusive
    }

    /// Takes a token for one message; refusals are counted, sustained abuse too. An ask that
    /// is paced like a message but publishes nothing (`isPublish: false`, SocketChat's
    /// `connectUser` again) is not counted among the messages received or publishes refused.
    func admitMessage(isPublish: Bool = true) -> RateVerdict {
        let verdict = rate?.admit(nowMillis: context.nowMillis) ?? .allowed
        if isPublish {
            if verdict == .allowed {
                context.metrics.messagesReceived.counter(policy.door).increment()
            } else {
                context.metrics.publishesRefused.counter(.rateLimited).increment()
            }
        }
        return counted(verdict, as: .messageRate)
    }

    /// Counts a refusal as `limit` (and abuse as `rate_abuse_disconnect`); the verdict as it is.
    private func counted(_ verdict: RateVerdict, as limit: Limit) -> RateVerdict {
        if verdict != .allowed { context.limits.breached(limit, remote: remote) }
        if verdict == .abusive { context.limits.breached(.rateAbuseDisconnect, remote: remote) }
        return verdict
    }

    /// Sets the history request rate; what was spent stays spent (``limitRate(perSecond:burst:)``).
    func limitHistoryRate(perSecond: Double, burst: Double) {
        historyRate = historyRate?.resized(ratePerSecond: perSecond, burst: burst)
            ?? TokenBucket(ratePerSecond: perSecond, burst: burst)
    }

    /// Takes a token for one history request; a refusal is counted (`history_rate`).
    func admitHistoryRequest() -> Bool {
        guard var bucket = historyRate else { return true }
        let allowed = bucket.take(nowMillis: context.nowMillis)
        historyRate = bucket
        if !allowed { context.limits.breached(.historyRate, remote: remote) }
        return allowed
    }

    /// Sets the join rate; what was spent stays spent (``limitRate(perSecond:burst:)``).
    func limitJoinRate(perSecond: Double, burst: Double) {
        joinRate = AbusableRate(resizing: joinRate, perSecond: perSecond, burst: burst, policy: policy)
    }

    /// Takes a token for one join; a refusal is counted (`join_rate`), and sustained refusals
    /// are abuse (counted, and the door closes) as with the message rate.
    func admitJoin() -> RateVerdict {
        counted(joinRate?.admit(nowMillis: context.nowMillis) ?? .allowed, as: .joinRate)
    }

    /// The join rate in force, for the refusal's text.
    var joinRatePerSecond: Double { joinRate?.ratePerSecond ?? 0 }

    /// The history rate in force, for the refusal's text.
    var historyRatePerSecond: Double { historyRate?.ratePerSecond ?? 0 }

    /// The rate in force, for the refusal's text.
    var ratePerSecond: Double { rate?.ratePerSecond ?? 0 }

    /// A connection not read while its publishes' room catches up.
    private weak var throttled: TCPConnection?

    /// Back-pressure from fan-out: when the room just published to has more deliveries and
    /// publishes in progress than its high mark, stop reading this publisher until the room
    /// is back under its low mark (the kernel then holds, and finally blocks, its writes).
    /// Other rooms' publishers go on.
    func throttle(by backlog: RoomBacklog?, reading connection: TCPConnection) {
        guard let backlog, backlog.isOverHigh, throttled == nil else { return }
        throttled = connection
        connection.stopReading()
        context.limits.breached(.publisherThrottled, remote: remote)
        let me = LoopBound(self, on: loop)
        backlog.whenBelowLowMark { me.execute { $0.resumeReading() } }
    }

    private func resumeReading() {
        guard let connection = throttled else { return }
        throttled = nil
        connection.startReading()
    }

    /// The connection is gone: stop the timers and give its place back. With the
    /// connection, the close is logged at debug (door, address, why, and the WebSocket close
    /// code when there was one); a TLS failure at error and a slow consumer cut off at info,
    /// both rate-limited.
    func end(closing connection: TCPConnection? = nil, reason: ConnectionCloseReason? = nil, code: Int? = nil,
             why: String? = nil) {
        handshakeCompleted()
        idleWatch?.stop()
        idleWatch = nil
        if let connection, ticket != nil { logClose(connection, reason: reason, code: code, why: why) }
        ticket?.release()
        ticket = nil
    }

    private func logClose(_ connection: TCPConnection, reason: ConnectionCloseReason?, code: Int?, why: String?) {
        let logger = context.logger
        switch reason {
        case .error(let error) where connection.isTLS:
            context.logThrottle.log("tls error", to: logger, .error, "TLS error",
                                 metadata: ["door": .string(policy.door.rawValue), "remote": .string(connection.remoteAddress),
                                            "error": .string(error.message)])
        case .writeQueueOverflow:
            context.logThrottle.log("slow consumer", to: logger, .info, "slow consumer cut off",
                                 metadata: ["door": .string(policy.door.rawValue), "remote": .string(connection.remoteAddress),
                                            "limit_bytes": .int(policy.writeQueueLimit)])
        default:
            break
        }
        guard logger.isEnabled(.debug) else { return }
        var metadata: LogMetadata = ["door": .string(policy.door.rawValue), "remote": .string(connection.remoteAddress),
                                     "connection": .string(ServerCore.describe(connection: connection.id))]
        switch reason {
        case .peerClosed: metadata["reason"] = "peer_closed"
        case .local: metadata["reason"] = "closed_by_server"
        case .writeQueueOverflow: metadata["reason"] = "write_queue_overflow"
        case .shutdown: metadata["reason"] = "shutdown"
        case .error(let error):
            metadata["reason"] = "error"
            metadata["error"] = .string(error.message)
        case nil: break
        }
        if let code { metadata["code"] = .int(code) }
        if let why { metadata["why"] = .string(why) }
        logger.debug("connection closed", metadata: metadata)
    }
}

/// A rate with its abuse detector (the message rate, the join rate): a token per admitted
/// action; refused more than `factor` × the rate within the policy's window is abuse.
struct AbusableRate {
    private var bucket: TokenBucket
    private var abuse: RateAbuseDetector

    /// A fresh rate, or `existing` under the new limit (a reload): then the tokens spent and
    /// the refusals in the abuse window so far are kept.
    init(resizing existing: AbusableRate? = nil, perSecond: Double, burst: Double, policy: DoorPolicy) {
        guard let existing else {
            bucket = TokenBucket(ratePerSecond: perSecond, burst: burst)
            abuse = RateAbuseDetector(ratePerSecond: perSecond, factor: policy.abuseFactor, windowMillis: policy.abuseWindowMillis)
            return
        }
        bucket = existing.bucket.resized(ratePerSecond: perSecond, burst: burst)
        abuse = existing.abuse
        abuse.rerate(ratePerSecond: perSecond, factor: policy.abuseFactor, windowMillis: policy.abuseWindowMillis)
    }

    var ratePerSecond: Double { bucket.ratePerSecond }

    mutating func admit(nowMillis: Int64) -> SessionGuard.RateVerdict {
        if bucket.take(nowMillis: nowMillis) { return .allowed }
        return abuse.refused(nowMillis: nowMillis) ? .abusive : .refused
    }
}
