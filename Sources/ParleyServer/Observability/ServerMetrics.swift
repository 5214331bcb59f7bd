import Foundation
import ParleyCore
import Synchronization

/// Why a publish was refused, named as in `parley_publishes_refused_total{reason}`.
enum PublishRefusal: String, CaseIterable, Sendable {
    /// Over the connection's message rate.
    case rateLimited = "rate_limited"
    /// The channel or the token does not allow it (or the sender is banned).
    case forbidden
    /// Malformed: bad room name, bad JSON, too large.
    case invalid
    /// A server limit (rooms in memory, members per room).
    case limitReached = "limit_reached"
    /// The store could not take it (full disk, I/O error): counted where appends fail.
    case storeFailed = "store_failed"
    /// Anything else.
    case other

    init(_ error: ParleyError) {
        switch error.code {
        case .rateLimited: self = .rateLimited
        case .unauthorized, .forbidden: self = .forbidden
        case .badRequest, .tooLarge, .notFound: self = .invalid
        case .limitReached: self = .limitReached
        case .unavailable, .internalError: self = .storeFailed
        default: self = .other
        }
    }
}

/// The server's counters: what `/metrics` reports beyond what it reads at scrape time (the
/// hub's rooms, the gate, the process). Thread-safe; recording is a relaxed atomic.
final class ServerMetrics: Sendable {
    /// Connections open now, by the door that holds them (an upgraded connection moves from
    /// `http` to `native`, `socketio` or `echo`).
    let openConnections = CounterFamilyGauge<DoorKind>()
    /// Connections accepted since start, by the door they came in by.
    let acceptedConnections = CounterFamily<DoorKind>()
    /// Messages a door took in for publishing (typing signals included), by door.
    let messagesReceived = CounterFamily<DoorKind>()
    let publishesRefused = CounterFamily<PublishRefusal>()
    /// From an append to the store's answer: the time a publisher waits for durability.
    let storeCommit = MetricHistogram(boundsMicros: MetricHistogram.latencyBoundsMicros)
    /// Appends handed to the store and not answered yet (its writer's queue plus the batch
    /// being committed).
    let storeQueueDepth = MetricGauge()
    let storeErrors = MetricCounter()
    /// SIGHUP reloads, applied or refused.
    let configurationReloads = CounterFamily<ReloadOutcome>()
    /// One per event loop, indexed by the loop's index.
    let loops: [LoopMetrics]

    enum ReloadOutcome: String, CaseIterable, Sendable { case applied, refused }

    init(loopCount: Int) {
        loops = (0..<loopCount).map { _ in LoopMetrics() }
    }
}

/// A gauge per value of a fixed label set.
struct CounterFamilyGauge<Label: Hashable & CaseIterable & Sendable>: Sendable where Label.AllCases: RandomAccessCollection {
    private let gauges: [MetricGauge]
    private let labels: [Label]

    init() {
        labels = Array(Label.allCases)
        gauges = labels.map { _ in MetricGauge() }
    }

    @inline(__always) func gauge(_ label: Label) -> MetricGauge { gauges[labels.firstIndex(of: label)!] }

    var all: [(Label, Int)] { zip(labels, gauges.map(\.current)).map { ($0, $1) } }
}

/// What one event loop counts on the fan-out path, written by that loop only (a plain load
/// and store each: no atomic read-modify-write, no sharing between loops) and read by a
/// scrape from any thread.
final class LoopMetrics: Sendable {
    /// Room events written to a subscriber, by the subscriber's door.
    let delivered = CounterFamily<DoorKind>()
    /// From a stored message's acceptance (its timestamp) to this loop having written it to
    /// its last subscriber here.
    let fanOut = MetricHistogram(boundsMicros: MetricHistogram.latencyBoundsMicros)

    /// `acceptedMillis` is the message's timestamp (Unix ms, when the hub accepted it).
    @inline(__always) func fannedOut(acceptedMillis: Int64) {
        let micros = Int(LoopMetrics.unixMicros() - acceptedMillis * 1000)
        fanOut.observeFromOwner(micros: micros)
    }

    static func unixMicros() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
    }
}
