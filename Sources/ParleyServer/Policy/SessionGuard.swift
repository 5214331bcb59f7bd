import ParleyCore
import ParleyIO

/// One connection's (or Socket.IO session's) share of its door's ``DoorPolicy``: its place
/// at the gate, the handshake timer, the idle watch and the message-rate bucket with its
/// abuse detector. Every breach is counted in `/metrics` here, so doors only decide what to
/// tell the peer. Loop-confined; ``end()`` stops everything and gives the place back.
final class SessionGuard {
    let policy: DoorPolicy
    private let loop: EventLoop
    private let core: ServerCore
    private var ticket: AdmissionTicket?
    private var handshakeTimer: LoopTimer?
    private var idleWatch: IdleWatch?
    private var rate: TokenBucket?
    private var abuse: RateAbuseDetector?

    init(_ policy: DoorPolicy, loop: EventLoop, core: ServerCore, ticket: AdmissionTicket?) {
        self.policy = policy
        self.loop = loop
        self.core = core
        self.ticket = ticket
        if let rate = policy.rate { limitRate(perSecond: rate.perSecond, burst: rate.burst) }
    }

    /// Takes over `other`'s place at the gate (a connection upgraded to another door).
    func takeTicket(from other: SessionGuard) {
        ticket = other.ticket
        other.ticket = nil
    }

    /// Starts the handshake timer: unless ``handshakeCompleted()`` comes first, the breach is
    /// counted and `onTimeout` runs (it tells the peer and closes).
    func expectHandshake(onTimeout: @escaping () -> Void) {
        let timer = handshakeTimer ?? LoopTimer(loop: loop)
        handshakeTimer = timer
        timer.start(after: policy.handshakeTimeoutMillis) { [weak self] in
            guard let self, self.handshakeTimer != nil else { return }
            self.handshakeTimer = nil
            self.core.limits.breached(.handshakeTimeout)
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
            self.core.limits.breached(.idleTimeout)
            onIdle()
        }
    }

    /// The peer sent a message (heartbeats do not count).
    @inline(__always) func heard() { idleWatch?.touch() }

    /// Replaces the door's message rate (a channel with its own limit).
    func limitRate(perSecond: Double, burst: Double) {
        rate = TokenBucket(ratePerSecond: perSecond, burst: burst)
        abuse = RateAbuseDetector(ratePerSecond: perSecond, factor: policy.abuseFactor, windowMillis: policy.abuseWindowMillis)
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

    /// Takes a token for one message; refusals are counted, sustained abuse too.
    func admitMessage() -> RateVerdict {
        guard var bucket = rate else { return .allowed }
        let now = core.hub.clock.nowMillis()
        let allowed = bucket.take(nowMillis: now)
        rate = bucket
        if allowed { return .allowed }
        core.limits.breached(.messageRate)
        guard abuse?.refused(nowMillis: now) == true else { return .refused }
        core.limits.breached(.rateAbuseDisconnect)
        return .abusive
    }

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
        core.limits.breached(.publisherThrottled)
        let me = LoopBound(self, on: loop)
        backlog.whenBelowLowMark { me.run { $0.resumeReading() } }
    }

    private func resumeReading() {
        guard let connection = throttled else { return }
        throttled = nil
        connection.startReading()
    }

    /// The connection is gone: stop the timers and give its place back.
    func end() {
        handshakeCompleted()
        idleWatch?.stop()
        idleWatch = nil
        ticket?.release()
        ticket = nil
    }
}
