import ParleyCore
import ParleyIO
import ParleyLog
import Synchronization

/// What a door's sessions may use of the server, and nothing else: the hub, the settings in
/// force, the directory of identified clients, the bans, the limit counters and metrics, the
/// logger. A door's session is written against this, not against the whole server, so it can
/// be built and tested without sockets (Tests/ParleyServerTests/ChatSessionTests.swift builds
/// one by hand, with a ``ManualClock``).
struct DoorContext: Sendable {
    let hub: Hub
    /// The settings in force: a reload swaps the snapshot, so read it when needed.
    let settings: SettingsSource
    let directory: SessionDirectory
    let bans: BanList
    let limits: LimitCounters
    let metrics: ServerMetrics
    let logger: Logger
    let logThrottle: LogThrottle
    /// Where each loop's deliveries go (``LoopInbox``s; a recording inbox in tests).
    let inbox: @Sendable (EventLoop) -> any Inbox
    /// Put in member ids a door makes from per-process numbers (``processMemberIDTag(node:)``):
    /// such an id is never given again, after a restart nor by another node, so it is never
    /// the author of someone else's messages.
    let memberIDTag: String

    /// `NODE-` in cluster mode, then six random characters and `-` for this process: the
    /// numbers restart with each process, the author check compares member ids, and stored
    /// messages keep theirs (a line user of yesterday's `line-3` must not edit them today).
    static func processMemberIDTag(node: String?) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        let random = String((0..<6).map { _ in alphabet[Int(generator.next(upperBound: UInt64(alphabet.count)))] })
        return (node.map { "\($0)-" } ?? "") + random + "-"
    }
    /// Each loop's hub of sessions and rooms (the node's).
    let loopContexts: LoopLocal<LoopContext>
    /// Users' read marks and conversations (SQLite, Redis in a cluster, memory in tests).
    var reads: any ReadStateStore = InMemoryReadStateStore()

    /// Bytes of history each client address may read (``ServerConfiguration/historyBytesPerIPPerSecond``),
    /// over all its connections and doors.
    var historyBytes = DoorContext.byteBudget(ServerConfiguration().historyBytesPerIPPerSecond)
    /// Bytes of messages each client address may publish (``ServerConfiguration/publishBytesPerIPPerSecond``),
    /// over all its connections and doors, REST included.
    var publishBytes = DoorContext.byteBudget(ServerConfiguration().publishBytesPerIPPerSecond)

    /// A per-address budget of `perSecond` bytes, with four seconds' worth as its burst.
    static func byteBudget(_ perSecond: Int) -> IPRateLimiter {
        IPRateLimiter(ratePerSecond: Double(perSecond), burst: 4 * Double(perSecond))
    }

    /// Charges `bytes` published by `address` to its budget: a refusal (counted) when the
    /// address had nothing left (the bytes are not charged then).
    func chargePublish(_ bytes: Int, from address: String?) -> ChatRefusal? {
        chargePublish(bytes, from: IPRateLimiter.Key(address ?? ""))
    }

    /// As ``chargePublish(_:from:)`` for an address already keyed (a session's own).
    func chargePublish(_ bytes: Int, from key: IPRateLimiter.Key) -> ChatRefusal? {
        guard !publishBytes.spend(key, Double(bytes), nowMillis: nowMillis) else { return nil }
        limits.breached(.publishBytes, remote: key.address)
        metrics.publishesRefused.counter(.rateLimited).increment()
        return ChatRefusal(.rateLimited, "publish byte budget of your address spent (\(configuration.publishBytesPerIPPerSecond) bytes per second); slow down")
    }

    /// The refusal (counted) when `key`'s address has spent its history bytes (it is in
    /// debt); nil while it may read.
    func historyBudgetSpent(_ key: IPRateLimiter.Key) -> ChatRefusal? {
        guard !historyBytes.hasBudget(key, nowMillis: nowMillis) else { return nil }
        limits.breached(.historyRate, remote: key.address)
        return ChatRefusal(.historyRateLimited,
                           "history byte budget of your address spent (\(configuration.historyBytesPerIPPerSecond) bytes per second); try again shortly")
    }

    /// Charges `bytes` of history read to `key`'s address: a read's cost is known once it is
    /// read, so the address may go into debt and waits it off. Callable from any thread.
    func chargeHistory(_ bytes: Int, to key: IPRateLimiter.Key) {
        guard bytes > 0 else { return }
        historyBytes.charge(key, Double(bytes), nowMillis: nowMillis)
    }

    /// Push notifications, once the server set them up (nil: off).
    var push = StartedService<PushService>()

    /// Reads inboxes, unread counts and newest messages from the stores.
    var inboxReader: InboxReader { InboxReader(messages: hub.store, reads: reads) }

    /// `loop`'s sessions and rooms, where a session registers for its deliveries. On `loop` only.
    func loopHub(_ loop: EventLoop) -> LoopHub<IOBuffer> { loopContexts[loop].loopHub }
    /// `loop`'s fan-out counters.
    func loopMetrics(_ loop: EventLoop) -> LoopMetrics { metrics.loops[loop.index] }

    /// The clock of timestamps, token expiry and rate buckets (the hub's).
    var clock: any WallClock { hub.clock }
    var nowMillis: Int64 { hub.clock.nowMillis() }
    /// The configuration in force, as a snapshot (one read of a reference, not a copy).
    var configuration: ServerConfiguration { settings.current.configuration }

    /// Logs a refused credential at info, rate-limited; never the credential itself.
    func logAuthFailure(door: DoorKind, remote: String?, channel: String? = nil, reason: String) {
        logThrottle.log("auth failure", to: logger, .info, "authentication failed", metadata: {
            var metadata: LogMetadata = ["door": .string(door.rawValue)]
            if let remote { metadata["remote"] = .string(remote) }
            if let channel { metadata["channel"] = .string(channel) }
            metadata["reason"] = .string(String(reason.prefix(200)))
            return metadata
        }())
    }
}

/// One configuration in force and what is derived from it once (the web-origin rules): an
/// immutable snapshot, read by reference so that a session reading a setting does not copy
/// the whole configuration.
final class SettingsSnapshot: Sendable {
    let configuration: ServerConfiguration
    let webOrigins: WebOriginPolicy

    init(_ configuration: ServerConfiguration) {
        self.configuration = configuration
        webOrigins = WebOriginPolicy(configuration)
    }
}

/// The settings in force, swapped as a whole on reload (SIGHUP).
final class SettingsSource: Sendable {
    private let snapshot: Mutex<SettingsSnapshot>

    init(_ configuration: ServerConfiguration) {
        snapshot = Mutex(SettingsSnapshot(configuration))
    }

    var current: SettingsSnapshot { snapshot.withLock { $0 } }

    func replace(with configuration: ServerConfiguration) {
        let fresh = SettingsSnapshot(configuration)
        snapshot.withLock { $0 = fresh }
    }
}
