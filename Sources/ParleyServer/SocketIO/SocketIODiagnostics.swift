import Synchronization

/// What the Socket.IO door counts for `/metrics` beyond the shared limit breaches: events it
/// ignored (it never answers with an event named `error`), packets it failed to encode, and
/// the long-polling sessions open now. Lock-free: every loop counts at once.
final class SocketIOCounters: Sendable {
    /// Why an event from a client was dropped without an answer (it asked for no ack).
    enum IgnoredEvent: String, CaseIterable, Sendable {
        /// An event name the application does not know.
        case unknownEvent = "unknown_event"
        /// A `chatMessage` / `startType` / `stopType` over the message rate.
        case rateLimited = "rate_limited"
        /// A known event refused: bad arguments, not allowed, or not stored.
        case refused = "refused"
    }

    private let unknownEvents = Atomic<Int>(0)
    private let rateLimited = Atomic<Int>(0)
    private let refused = Atomic<Int>(0)
    /// Packets that could not be encoded (or re-framed) and so were not sent.
    let encodeFailures = Atomic<Int>(0)

    init() {}

    func ignoredEvent(_ reason: IgnoredEvent) {
        switch reason {
        case .unknownEvent: unknownEvents.add(1, ordering: .relaxed)
        case .rateLimited: rateLimited.add(1, ordering: .relaxed)
        case .refused: refused.add(1, ordering: .relaxed)
        }
    }

    func count(_ reason: IgnoredEvent) -> Int {
        switch reason {
        case .unknownEvent: unknownEvents.load(ordering: .relaxed)
        case .rateLimited: rateLimited.load(ordering: .relaxed)
        case .refused: refused.load(ordering: .relaxed)
        }
    }

    func encodeFailed() { encodeFailures.add(1, ordering: .relaxed) }
}

/// The Socket.IO door's log: what it dropped and why, once per connection rather than once per
/// packet, so a misbehaving client cannot flood it.
///
/// LOGGING: the server-wide logging API is being added separately. Until it lands, lines are
/// kept here (the last ``capacity``, and a count) where tests and the lead can read them; when
/// it lands, ``warning(_:)`` forwards to it and this buffer goes.
final class SocketIOLog: Sendable {
    static let capacity = 100
    private let lines = Mutex<[String]>([])
    private let written = Atomic<Int>(0)

    init() {}

    func warning(_ message: @autoclosure () -> String) {
        let line = message()
        written.add(1, ordering: .relaxed)
        lines.withLock { lines in
            if lines.count == Self.capacity { lines.removeFirst() }
            lines.append(line)
        }
    }

    /// Lines written so far.
    var count: Int { written.load(ordering: .relaxed) }
    /// The most recent lines, oldest first.
    var recent: [String] { lines.withLock { $0 } }
}

extension SocketIOShared {
    /// The door's lines of `/metrics` (Prometheus text format).
    /// The Socket.IO door's lines of `/metrics`.
    func writeMetrics(into out: inout PrometheusText) {
        out.family("parley_socketio_ignored_events_total", "counter",
                   help: "Socket.IO events dropped without an answer (no ack asked for).")
        for reason in SocketIOCounters.IgnoredEvent.allCases {
            out.sample("parley_socketio_ignored_events_total", counters.count(reason), labels: ["reason": reason.rawValue])
        }
        out.family("parley_socketio_encode_failures_total", "counter",
                   help: "Socket.IO packets that could not be encoded and were not sent.")
        out.sample("parley_socketio_encode_failures_total", counters.encodeFailures.load(ordering: .relaxed))
        out.family("parley_socketio_polling_sessions", "gauge", help: "Engine.IO long-polling sessions open now.")
        out.sample("parley_socketio_polling_sessions", pollingSessions.load(ordering: .relaxed))
    }
}
