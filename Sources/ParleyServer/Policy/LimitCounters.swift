import ParleyLog
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
    /// Open mode: a channel beyond `--max-open-channels`.
    case openChannels = "open_channels"
    /// Native `history` requests over the per-connection rate.
    case historyRate = "history_rate"
    /// Joins (native subscribes, the lobby) over the per-connection rate (`--join-rate`).
    case joinRate = "join_rate"
    /// An address past its bytes of published messages (`--publish-bytes-per-ip`), any door.
    case publishBytes = "publish_bytes"
    case restRate = "rest_rate"
    /// A REST channel listing refused while the node makes its most at once (503).
    case restListings = "rest_listings"
    /// File downloads over the per-IP rate (`--download-rate`, 429).
    case downloadRate = "download_rate"
    /// A request from a web page that may not use this server, or for a host it does not
    /// serve while bound to loopback (``WebOriginPolicy``).
    case webOrigin = "web_origin"
    /// Socket.IO long-polling requests over the per-IP rate (429), or sessions over the cap.
    case pollingRate = "socketio_polling_rate"
    case pollingSessions = "socketio_polling_sessions"
    /// Not a refusal: a publisher was slowed while its room's deliveries caught up.
    case publisherThrottled = "publisher_throttled"
}

/// How often each limit was breached since start, each breach also logged at info (at most a
/// few lines per second per limit; the rest are summed up). Lock-free counting: breaches can
/// come from every loop at once, and a flood must not make the counting itself a point of
/// contention.
final class LimitCounters: Sendable {
    private let counts: [Counter]
    private let logger: Logger
    private let throttle: LogThrottle

    /// One atomic per limit (an `Atomic` cannot live in an array directly: it is not copyable).
    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    init(logger: Logger = .disabled, throttle: LogThrottle = LogThrottle()) {
        counts = Limit.allCases.map { _ in Counter() }
        self.logger = logger
        self.throttle = throttle
    }

    private func counter(_ limit: Limit) -> Counter {
        counts[Limit.allCases.firstIndex(of: limit)!]
    }

    /// Counts and logs one breach; `remote` is the client's address when known.
    func breached(_ limit: Limit, remote: String? = nil) {
        counter(limit).value.add(1, ordering: .relaxed)
        throttle.log("limit \(limit.rawValue)", to: logger, .info, "limit breached", metadata: {
            var metadata: LogMetadata = ["limit": .string(limit.rawValue)]
            if let remote { metadata["remote"] = .string(remote) }
            return metadata
        }())
    }

    func count(_ limit: Limit) -> Int {
        counter(limit).value.load(ordering: .relaxed)
    }
}
