import ParleyCore
import ParleyHTTP
import ParleyIO
import Synchronization

/// The abuse limits a client can run into, named as in `/metrics`.
enum Limit: String, CaseIterable, Sendable {
    case maxConnections = "max_connections"
    case maxConnectionsPerIP = "max_connections_per_ip"
    case handshakeTimeout = "handshake_timeout"
    case idleTimeout = "idle_timeout"
    case messageSize = "message_size"
    case messageRate = "message_rate"
    case rateAbuseDisconnect = "rate_abuse_disconnect"
    case roomsPerConnection = "rooms_per_connection"
    case membersListed = "members_listed"
    case restRate = "rest_rate"
}

/// How often each limit was breached since start. Lock-free: breaches can come from every
/// loop at once, and a flood must not make the counting itself a point of contention.
final class LimitCounters: Sendable {
    private let counts: [Counter]

    /// One atomic per limit (an `Atomic` cannot live in an array directly: it is not copyable).
    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    init() { counts = Limit.allCases.map { _ in Counter() } }

    private func counter(_ limit: Limit) -> Counter {
        counts[Limit.allCases.firstIndex(of: limit)!]
    }

    func breached(_ limit: Limit) {
        counter(limit).value.add(1, ordering: .relaxed)
    }

    func count(_ limit: Limit) -> Int {
        counter(limit).value.load(ordering: .relaxed)
    }
}

/// Admission at accept time: the total and per-IP connection limits. Shared by all doors and
/// loops; touched once per accept and once per close.
final class ConnectionGate: Sendable {
    private let perIP = Mutex<[String: Int]>([:])

    /// Why a connection was refused, as a sentence for the peer.
    enum Refusal: Sendable {
        case full(Int)
        case tooManyFromIP(Int)

        var message: String {
            switch self {
            case .full(let limit): "server is full (limit \(limit) connections); try again later"
            case .tooManyFromIP(let limit): "too many connections from your address (limit \(limit))"
            }
        }

        var limit: Limit {
            switch self {
            case .full: .maxConnections
            case .tooManyFromIP: .maxConnectionsPerIP
            }
        }
    }

    /// Counts the connection in, or says why not (then nothing is counted).
    func admit(ip: String, core: ServerCore) -> Refusal? {
        let configuration = core.configuration
        let total = core.openConnections.add(1, ordering: .relaxed).newValue
        if total > configuration.maxConnections {
            core.openConnections.subtract(1, ordering: .relaxed)
            return .full(configuration.maxConnections)
        }
        let admitted = perIP.withLock { counts -> Bool in
            let current = counts[ip, default: 0]
            guard current < configuration.maxConnectionsPerIP else { return false }
            counts[ip] = current + 1
            return true
        }
        guard admitted else {
            core.openConnections.subtract(1, ordering: .relaxed)
            return .tooManyFromIP(configuration.maxConnectionsPerIP)
        }
        return nil
    }

    /// The connection admitted for `ip` has closed.
    func release(ip: String, core: ServerCore) {
        core.openConnections.subtract(1, ordering: .relaxed)
        perIP.withLock { counts in
            let current = counts[ip, default: 0]
            if current <= 1 { counts.removeValue(forKey: ip) } else { counts[ip] = current - 1 }
        }
    }
}

/// Per-IP token buckets for the REST API.
final class RESTRateLimiter: Sendable {
    private let buckets = Mutex<[String: TokenBucket]>([:])
    let ratePerSecond: Double
    let burst: Double

    init(ratePerSecond: Double, burst: Double) {
        self.ratePerSecond = ratePerSecond
        self.burst = burst
    }

    /// Takes a token for `ip`; false when it has none left.
    func allow(ip: String, nowMillis: Int64) -> Bool {
        buckets.withLock { buckets in
            // Forget addresses whose bucket has refilled, so the table stays small.
            if buckets.count > 10_000 {
                buckets = buckets.filter { !$0.value.isFull(nowMillis: nowMillis) }
            }
            var bucket = buckets[ip] ?? TokenBucket(ratePerSecond: ratePerSecond, burst: burst)
            let allowed = bucket.take(nowMillis: nowMillis)
            buckets[ip] = bucket
            return allowed
        }
    }

    /// Whole seconds until one request is allowed again (for `Retry-After`).
    var retryAfterSeconds: Int { max(1, Int((1 / ratePerSecond).rounded(.up))) }
}

/// Sustained abuse of a message rate: refusals counted over a fixed window. A connection
/// refused more than `factor` × its rate within the window is to be disconnected.
struct RateAbuseDetector {
    let threshold: Int
    let windowMillis: Int64
    private var windowStart: Int64 = 0
    private var refused = 0

    init(ratePerSecond: Double, configuration: ServerConfiguration) {
        threshold = max(1, Int(ratePerSecond * configuration.rateAbuseFactor))
        windowMillis = configuration.rateAbuseWindowMillis
    }

    /// Records one refusal; true when this one crosses the line.
    mutating func refused(nowMillis: Int64) -> Bool {
        if nowMillis - windowStart > windowMillis {
            windowStart = nowMillis
            refused = 0
        }
        refused += 1
        return refused > threshold
    }
}

/// Closes a connection that sends no message for the idle timeout. Re-armed lazily: activity
/// only stamps a time, the timer checks it when it fires. Loop-confined.
final class IdleWatch {
    private let timer: LoopTimer
    private let timeoutMillis: UInt64
    private var lastActivity: UInt64
    private let onIdle: () -> Void

    init(loop: EventLoop, timeoutMillis: UInt64, onIdle: @escaping () -> Void) {
        timer = LoopTimer(loop: loop)
        self.timeoutMillis = timeoutMillis
        self.onIdle = onIdle
        lastActivity = IdleWatch.now()
        arm(after: timeoutMillis)
    }

    private static let origin = ContinuousClock.now

    /// Monotonic milliseconds since the first watch.
    private static func now() -> UInt64 {
        let elapsed = ContinuousClock.now - origin
        return UInt64(elapsed.components.seconds) * 1000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000_000)
    }

    private func arm(after milliseconds: UInt64) {
        timer.start(after: milliseconds) { [weak self] in self?.check() }
    }

    private func check() {
        let idle = IdleWatch.now() - lastActivity
        if idle >= timeoutMillis {
            onIdle()
        } else {
            arm(after: timeoutMillis - idle)
        }
    }

    /// The peer sent a message.
    func touch() { lastActivity = IdleWatch.now() }

    func stop() { timer.stop() }
}

extension TokenBucket {
    /// True when the bucket would be full at `nowMillis` (nothing to remember).
    func isFull(nowMillis: Int64) -> Bool {
        var copy = self
        // A full bucket can give `burst` tokens right now.
        for _ in 0..<Int(burst.rounded(.down)) { if !copy.take(nowMillis: nowMillis) { return false } }
        return true
    }
}

extension ServerCore {
    /// `/metrics` as plain text (Prometheus exposition format).
    func metricsText() -> String {
        var lines = ["# HELP parley_open_connections Connections open across all doors.",
                     "# TYPE parley_open_connections gauge",
                     "parley_open_connections \(openConnections.load(ordering: .relaxed))",
                     "# HELP parley_limit_breaches_total Times a client ran into an abuse limit.",
                     "# TYPE parley_limit_breaches_total counter"]
        for limit in Limit.allCases {
            lines.append("parley_limit_breaches_total{limit=\"\(limit.rawValue)\"} \(limits.count(limit))")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// A connection refused at accept: says why (a line, or a 503 once the request has been read,
/// so closing does not reset a request the peer is still sending) and closes.
final class RefusedConnection: ConnectionHandler {
    let message: String
    let http: Bool
    private var received: [UInt8] = []
    private var timer: LoopTimer?
    private var answered = false

    init(connection: TCPConnection, message: String, http: Bool) {
        self.message = message
        self.http = http
        if http {
            // Wait briefly for the request head; answer anyway after a moment.
            let timer = LoopTimer(loop: connection.loop)
            self.timer = timer
            timer.start(after: 1000) { [weak self, weak connection] in
                guard let self, let connection else { return }
                self.answer(connection)
            }
        } else {
            connection.write("error: \(message)\n")
            connection.close()
            answered = true
        }
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard !answered else { return }
        received.append(contentsOf: bytes.prefix(max(0, 16_384 - received.count)))
        let text = received.suffix(4)
        if Array(text) == Array("\r\n\r\n".utf8) || received.count >= 16_384 { answer(connection) }
    }

    private func answer(_ connection: TCPConnection) {
        guard !answered else { return }
        answered = true
        timer?.stop()
        var response = HTTPResponse.text(503, message + "\n")
        response.headers.set("Retry-After", "5")
        connection.write(response.encoded(keepAlive: false))
        connection.close()
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        timer?.stop()
        timer = nil
    }
}
