import ParleyCore
import ParleyIO
import Synchronization

/// Options of ``RedisBroker``.
public struct RedisBrokerOptions: Sendable, Equatable {
    /// Publishes waiting for Redis at once; more are refused at once (`.unavailable`).
    public var maxPendingPublishes: Int = 100_000
    /// A subscription Redis has not confirmed (and filled from the stream) within this long
    /// fails, so a subscribe never hangs while Redis is down.
    public var subscribeTimeoutMillis: Int = 10_000
    /// Events of one room kept while its gap is filled from the stream; past it they are
    /// dropped and read again (messages) or rebuilt from presence (joins and leaves).
    public var maxBufferedEventsPerRoom: Int = 100_000
    /// Messages read per `XRANGE` while filling a gap.
    public var refillPageSize: Int = 1_000
    /// Pause before a failed gap fill is tried again.
    public var refillRetryMillis: Int = 500

    public init() {}
}

/// The cluster ``Broker``: every node that points at the same Redis (or Redis Cluster)
/// shares each room's order.
///
/// - **Publish** is one script on the room's slot (``RedisBackendScripts/append``): the
///   client message id is checked, the room's offset incremented, the message appended to
///   the room's stream (trimmed by retention) and published on the room's sharded channel,
///   so the channel's order is the offset order. The publisher's completion runs once Redis
///   has answered.
/// - **Broadcasts** (typing, joins, leaves) are an `SPUBLISH` on the same channel: Redis
///   orders them among the publishes as it runs them.
/// - **Subscribe** (counted per room) reads the room's offset `L`, subscribes to its channel
///   with `SSUBSCRIBE`, fills from the stream what was stored after `L` before the
///   subscription was active, and completes with `RoomPosition(stored: L, published: L)`.
/// - **Delivery**: each room lives on one loop (chosen by a hash of the room), which decodes
///   each message once and delivers the room's events one at a time. It tracks the last
///   offset delivered: a duplicate is dropped; a gap is filled from the stream (`XRANGE`)
///   before anything after it is delivered (events meanwhile wait, bounded). After a lost
///   connection or a moved slot every subscribed room is filled from its last offset and
///   rebuilt from presence (``BrokerDelivery/broker(resynchronize:)``).
/// - Redis down: a publish fails with `.unavailable` naming Redis, a subscribe fails after
///   ``RedisBrokerOptions/subscribeTimeoutMillis``; everything resumes when Redis is back.
public final class RedisBroker: Broker {
    public let redisStore: RedisMessageStore
    public var store: any MessageStore { redisStore }
    public let options: RedisBrokerOptions
    let routing: RedisRouting
    private let delivery = DeliveryTarget()
    private let inFlight = Atomic<Int>(0)
    private let shards: [LoopBound<FeedShard>]
    private let subscribers: [RedisSubscriber]
    private let closed = Atomic<Bool>(false)

    /// A broker over `store`'s Redis and keyspace. With `presence`, a room rebuilt after a
    /// lost connection waits until this node's members are back in presence (so its own
    /// sessions do not see each other leave and join again).
    public init(store: RedisMessageStore, options: RedisBrokerOptions = RedisBrokerOptions(), presence: RedisPresenceStore? = nil) {
        redisStore = store
        self.options = options
        routing = store.routing
        let target = delivery
        var shards: [LoopBound<FeedShard>] = []
        var subscribers: [RedisSubscriber] = []
        for loop in store.routing.loops {
            let shard = FeedShard(loop: loop, routing: store.routing, options: options, presence: presence) {
                target.current
            }
            let bound = LoopBound(shard, on: loop)
            // The handler runs on the subscriber's loop, which is the shard's. (The shard keeps
            // the subscriber until it is closed, which breaks this cycle.)
            let subscriber = store.redis.makeSubscriber(on: loop) { event in
                bound.runNow { $0.handle(event) }
            }
            shard.subscriber = subscriber
            shards.append(bound)
            subscribers.append(subscriber)
        }
        self.shards = shards
        self.subscribers = subscribers
    }

    deinit { close() }

    /// Closes the subscriber connections (the Redis client is the caller's to close).
    public func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        for shard in shards { shard.run { $0.close() } }
        for subscriber in subscribers { subscriber.close() }
    }

    public func setDelivery(_ delivery: any BrokerDelivery) {
        self.delivery.set(delivery)
    }

    /// Publishes waiting for Redis.
    public var pendingPublishes: Int { inFlight.load(ordering: .relaxed) }

    /// Redis's command connections and this broker's subscriber connections together.
    public var status: RedisStatus {
        RedisStatus.combined([routing.redis.status] + subscribers.map(\.status))
    }

    private func shard(for room: RoomKey) -> LoopBound<FeedShard> {
        shards[Int(RedisRouting.hash(room) % UInt64(shards.count))]
    }

    // MARK: Broker

    public func publish(_ message: Message, clientMessageID: String?,
                        completion: @escaping @Sendable (Result<Message, ParleyError>) -> Void) throws(ParleyError) {
        guard !closed.load(ordering: .relaxed) else { throw ParleyError(.unavailable, "the Redis broker is closed") }
        guard inFlight.add(1, ordering: .relaxed).newValue <= options.maxPendingPublishes else {
            inFlight.subtract(1, ordering: .relaxed)
            throw ParleyError(.unavailable, "more than \(options.maxPendingPublishes) publishes are waiting for Redis")
        }
        let store = redisStore
        let (keys, addToIndex) = store.rooms.use(message.room, nowMillis: store.clock.nowMillis(), indexing: true)
        let arguments = store.appendArguments(message, clientMessageID: clientMessageID, channel: keys.channel, expectedOffset: 0)
        routing.onLoop(for: message.room) { [self] in
            store.indexIfNeeded(message.room, addToIndex)
            routing.evaluate(RedisBackendScripts.append, keys: RedisMessageStore.appendKeys(keys), arguments: arguments,
                             replicas: store.options.replicasToAcknowledge, timeoutMillis: store.options.replicasTimeoutMillis) { [self] result in
                inFlight.subtract(1, ordering: .relaxed)
                completion(Self.published(message, result))
            }
        }
    }

    static func published(_ message: Message, _ result: Result<RedisValue, RedisError>) -> Result<Message, ParleyError> {
        let doing = "publishing to \(message.room)"
        switch result {
        case .failure(let error):
            return .failure(RedisRouting.error(error, doing))
        case .success(let reply):
            let parts = reply.array ?? []
            switch parts.first?.int {
            case 1:
                guard parts.count > 1, let offset = parts[1].int else { return .failure(RedisRouting.unexpected(reply, doing)) }
                return .success(message.placed(offset: offset))
            case 0:
                guard parts.count > 1, let text = parts[1].string,
                      let known = RedisMessageStore.remembered(text, clientMessageID: "", room: message.room) else {
                    return .failure(RedisRouting.unexpected(reply, doing))
                }
                return .success(message.placed(id: known.id, offset: known.offset, timestampMillis: known.timestampMillis))
            case -2:
                return .failure(ParleyError(.unavailable, "Redis refused a message of \(message.room): \(parts.count > 1 ? parts[1].string ?? "" : "")"))
            default:
                return .failure(RedisRouting.unexpected(reply, doing))
            }
        }
    }

    public func broadcast(_ event: RoomEvent, in room: RoomKey) {
        guard !closed.load(ordering: .relaxed) else { return }
        let store = redisStore
        let keys = store.rooms.use(room, nowMillis: store.clock.nowMillis()).keys
        let command = RedisCommand("SPUBLISH", .string(keys.channel), .bytes(RedisRecords.channelPayload(event)))
        let shard = self.shard(for: room)
        routing.onLoop(for: room) { [routing] in
            routing.send(command) { result in
                // Redis could not take it: this node still sees it (in the room's order from
                // here on), so its own sessions' joins complete; the other nodes rebuild the
                // room from presence when they are back in touch.
                guard case .failure = result else { return }
                shard.run { $0.deliverLocally(event, in: room) }
            }
        }
    }

    public func subscribe(_ room: RoomKey, completion: @escaping @Sendable (Result<RoomPosition, ParleyError>) -> Void) {
        guard !closed.load(ordering: .relaxed) else {
            return completion(.failure(ParleyError(.unavailable, "the Redis broker is closed")))
        }
        let keys = redisStore.rooms.use(room, nowMillis: redisStore.clock.nowMillis()).keys
        // A stopped loop drops what it is given: answer here, or the subscribe waits forever.
        guard shard(for: room).tryRun({ $0.subscribe(room, keys: keys, completion: completion) }) else {
            return completion(.failure(ParleyError(.unavailable, "the Redis broker's event loop has stopped")))
        }
    }

    public func unsubscribe(_ room: RoomKey) {
        shard(for: room).run { $0.unsubscribe(room) }
    }

    /// Forgets the key names of rooms unused for `idleMillis` (a subscribed room's feed stays
    /// until its last unsubscribe); returns how many.
    @discardableResult
    public func evictIdle(nowMillis: Int64, idleMillis: Int64) -> Int {
        let (cutoff, overflow) = nowMillis.subtractingReportingOverflow(idleMillis)
        return redisStore.rooms.evict(before: overflow ? .min : cutoff)
    }
}

/// Where a broker's deliveries go, set once by the hub.
private final class DeliveryTarget: Sendable {
    private let value = Mutex<(any BrokerDelivery)?>(nil)
    func set(_ delivery: any BrokerDelivery) { value.withLock { $0 = delivery } }
    var current: (any BrokerDelivery)? { value.withLock { $0 } }
}

/// What arrives for a room while it cannot be delivered yet.
private typealias Incoming = RedisRecords.ChannelMessage

/// One room followed by this node: its subscription and where its delivery stands. Loop-confined.
private final class RoomFeed {
    let room: RoomKey
    let keys: RoomKeys
    let channel: RedisChannel
    var uses = 1
    /// Subscribe completions waiting for the subscription and the first fill.
    var waiters: [@Sendable (Result<RoomPosition, ParleyError>) -> Void] = []
    /// Where the subscription started (`L`).
    var position: Int64 = 0
    var subscribing = false
    var live = false
    var closed = false
    /// The newest offset delivered.
    var last: Int64 = 0
    /// Offsets up to here were read from the stream: whatever of them is missing was
    /// dropped by retention and is not waited for again.
    var settled: Int64 = 0
    var refilling = false
    /// Fill again from the last offset once the current fill is done (events were dropped).
    var refillAgain = false
    /// Rebuild the room from presence once the fills are done.
    var resynchronize = false
    /// Unsubscribed by its last use: what was stored until now is still delivered (one last
    /// fill), then the feed ends.
    var draining = false
    var buffer: [Incoming] = []
    var bufferHead = 0
    var timeout: LoopTimer?
    var retry: LoopTimer?

    init(room: RoomKey, keys: RoomKeys) {
        self.room = room
        self.keys = keys
        channel = .sharded(keys.channel)
    }

    var buffered: Int { buffer.count - bufferHead }

    func popBuffered() {
        bufferHead += 1
        if bufferHead == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1024)
            bufferHead = 0
        }
    }
}

/// The rooms of one loop: their subscriptions on this loop's subscriber, their gap fills on
/// this loop's command connection, their deliveries in order. Loop-confined.
private final class FeedShard {
    let loop: EventLoop
    let routing: RedisRouting
    let options: RedisBrokerOptions
    let presence: RedisPresenceStore?
    let delivery: @Sendable () -> (any BrokerDelivery)?
    var subscriber: RedisSubscriber?
    private var feeds: [RoomKey: RoomFeed] = [:]
    private var byChannel: [String: RoomFeed] = [:]
    private var isClosed = false

    init(loop: EventLoop, routing: RedisRouting, options: RedisBrokerOptions, presence: RedisPresenceStore?,
         delivery: @escaping @Sendable () -> (any BrokerDelivery)?) {
        self.loop = loop
        self.routing = routing
        self.options = options
        self.presence = presence
        self.delivery = delivery
    }

    private var me: LoopBound<FeedShard> { LoopBound(self, on: loop) }

    func close() {
        isClosed = true
        let error = ParleyError(.unavailable, "the Redis broker is closed")
        for feed in feeds.values { end(feed, failing: error) }
        feeds = [:]
        byChannel = [:]
        subscriber = nil
    }

    // MARK: subscriptions

    func subscribe(_ room: RoomKey, keys: RoomKeys, completion: @escaping @Sendable (Result<RoomPosition, ParleyError>) -> Void) {
        guard !isClosed else { return completion(.failure(ParleyError(.unavailable, "the Redis broker is closed"))) }
        if let feed = feeds[room] {
            feed.uses += 1
            feed.draining = false
            if feed.live {
                completion(.success(RoomPosition(stored: feed.last, published: feed.last)))
            } else {
                feed.waiters.append(completion)
            }
            return
        }
        let feed = RoomFeed(room: room, keys: keys)
        feed.waiters.append(completion)
        feeds[room] = feed
        byChannel[keys.channel] = feed
        let timeout = LoopTimer(loop: loop)
        feed.timeout = timeout
        let seconds = Double(options.subscribeTimeoutMillis) / 1000
        timeout.start(after: UInt64(max(1, options.subscribeTimeoutMillis))) { [weak self, weak feed] in
            guard let self, let feed, !feed.live, !feed.closed else { return }
            self.fail(feed, ParleyError(.unavailable, "Redis did not confirm the subscription to \(room) within \(seconds) s"))
        }
        // `L` first, on the command connection: everything stored after it reaches this node,
        // through the channel or the fill that follows the subscription.
        let me = self.me, bound = LoopBound(feed, on: loop)
        routing.send(RedisCommand("GET", .string(keys.offset))) { result in
            // Usually on this loop already; a Redis Cluster client that had no slot map yet
            // answers on another loop.
            me.run { shard in
                let feed = bound.runNow { $0 }
                guard !feed.closed else { return }
                switch result {
                case .failure(let error):
                    shard.fail(feed, RedisRouting.error(error, "subscribing to \(room)"))
                case .success(let value):
                    let offset = value.isNull ? 0 : value.int ?? 0
                    feed.position = offset
                    feed.last = offset
                    feed.settled = offset
                    feed.subscribing = true
                    shard.subscriber?.subscribe(feed.channel) { result in
                        me.run { shard in shard.confirmed(bound.runNow { $0 }, result) }
                    }
                }
            }
        }
    }

    private func confirmed(_ feed: RoomFeed, _ result: Result<Void, RedisError>) {
        guard !feed.closed else { return }
        switch result {
        case .failure(let error):
            fail(feed, RedisRouting.error(error, "subscribing to \(feed.room)"))
        case .success:
            refill(feed, through: nil)
        }
    }

    /// The first fill is done: completes the waiting subscribes.
    private func goLive(_ feed: RoomFeed) {
        feed.live = true
        feed.timeout?.stop()
        feed.timeout = nil
        let position = RoomPosition(stored: feed.position, published: feed.position)
        let waiters = feed.waiters
        feed.waiters = []
        for waiter in waiters { waiter(.success(position)) }
    }

    private func fail(_ feed: RoomFeed, _ error: ParleyError) {
        guard feeds[feed.room] === feed else { return }
        feeds[feed.room] = nil
        byChannel[feed.keys.channel] = nil
        end(feed, failing: error)
    }

    private func end(_ feed: RoomFeed, failing error: ParleyError) {
        feed.closed = true
        feed.timeout?.stop()
        feed.retry?.stop()
        feed.timeout = nil
        feed.retry = nil
        if feed.subscribing { subscriber?.unsubscribe(feed.channel) }
        let waiters = feed.waiters
        feed.waiters = []
        for waiter in waiters { waiter(.failure(error)) }
    }

    func unsubscribe(_ room: RoomKey) {
        guard let feed = feeds[room], !feed.draining else { return }
        feed.uses -= 1
        guard feed.uses <= 0 else { return }
        guard feed.live else {
            return fail(feed, ParleyError(.unavailable, "unsubscribed from \(room) before the subscription was in place"))
        }
        // Messages stored before the last unsubscribe still reach this node (their pub/sub
        // copies may still be on their way): one last fill, then the feed ends.
        feed.draining = true
        if feed.refilling { feed.refillAgain = true } else { refill(feed, through: nil) }
    }

    // MARK: events from Redis

    func handle(_ event: RedisSubscriberEvent) {
        guard !isClosed else { return }
        switch event {
        case .message(let channel, let payload):
            guard let feed = byChannel[channel.name], feed.subscribing else { return }
            guard let decoded = RedisRecords.channelMessage(payload, room: feed.room) else { return }
            receive(decoded, in: feed)
        case .resubscribed(let channels):
            // Messages published while the subscription was down were missed, and so were
            // joins and leaves: fill from the stream, then rebuild the members from presence.
            for channel in channels {
                guard let feed = byChannel[channel.name] else { continue }
                feed.resynchronize = true
                if feed.refilling { feed.refillAgain = true } else { refill(feed, through: nil) }
            }
        case .subscriptionFailed(let channel, let error):
            if let feed = byChannel[channel.name], !feed.live {
                fail(feed, RedisRouting.error(error, "subscribing to \(feed.room)"))
            }
        case .connection:
            break
        }
    }

    /// A broadcast Redis refused, for this node's own view of the room.
    func deliverLocally(_ event: RoomEvent, in room: RoomKey) {
        guard let feed = feeds[room], feed.subscribing else { return }
        receive(.event(event), in: feed)
    }

    private func receive(_ item: Incoming, in feed: RoomFeed) {
        if feed.live && !feed.refilling && feed.buffered == 0 {
            process(item, in: feed)
            return
        }
        guard feed.buffered < options.maxBufferedEventsPerRoom else {
            // Too much at once: drop what waits; messages are read again from the stream and
            // the members rebuilt from presence.
            feed.buffer = []
            feed.bufferHead = 0
            feed.refillAgain = true
            feed.resynchronize = true
            return
        }
        feed.buffer.append(item)
    }

    /// Delivers `item` unless it is a message after a gap; then fills the gap first and
    /// returns false (the item stays first in the buffer).
    @discardableResult
    private func process(_ item: Incoming, in feed: RoomFeed, fromBuffer: Bool = false) -> Bool {
        switch item {
        case .event(let event):
            deliver(event, in: feed)
        case .stored(let message):
            if message.offset <= feed.last { return true }  // a duplicate (the fill had it)
            if message.offset > feed.last + 1 && message.offset - 1 > feed.settled {
                if !fromBuffer { feed.buffer.insert(item, at: feed.bufferHead) }
                refill(feed, through: message.offset - 1)
                return false
            }
            feed.last = message.offset
            deliver(.message(message), in: feed)
        }
        return true
    }

    private func drain(_ feed: RoomFeed) {
        while !feed.refilling && !feed.closed && feed.bufferHead < feed.buffer.count {
            let item = feed.buffer[feed.bufferHead]
            guard process(item, in: feed, fromBuffer: true) else { return }
            feed.popBuffered()
        }
    }

    private func deliver(_ event: RoomEvent, in feed: RoomFeed) {
        delivery()?.broker(deliver: event, in: feed.room)
    }

    // MARK: filling from the stream

    /// Reads the stream after the last delivered offset (up to `through`, or its end),
    /// delivering as it goes; then goes live (first fill) and delivers what waited.
    private func refill(_ feed: RoomFeed, through: Int64?) {
        feed.refilling = true
        let start = feed.last + 1
        let page = max(1, options.refillPageSize)
        let end: RedisArgument = through.map { .integer($0) } ?? "+"
        let me = self.me, bound = LoopBound(feed, on: loop)
        routing.send(RedisCommand("XRANGE", .string(feed.keys.stream), .integer(start), end, "COUNT", .integer(Int64(page)))) { result in
            me.run { shard in shard.filled(bound.runNow { $0 }, through: through, page: page, result) }
        }
    }

    private func filled(_ feed: RoomFeed, through: Int64?, page pageSize: Int, _ result: Result<RedisValue, RedisError>) {
        guard !feed.closed else { return }
        var read: RedisRecords.RangePage?
        if case .success(let reply) = result { read = try? RedisRecords.range(reply, room: feed.room) }
        guard let page = read else {
            if feed.draining { return fail(feed, ParleyError(.unavailable, "unsubscribed")) }
            // Redis is down or the reply was bad: try again shortly (events keep waiting, bounded).
            let retry = feed.retry ?? LoopTimer(loop: loop)
            feed.retry = retry
            retry.start(after: UInt64(max(1, options.refillRetryMillis))) { [weak self, weak feed] in
                guard let self, let feed, !feed.closed else { return }
                self.refill(feed, through: through)
            }
            return
        }
        for message in page.messages where message.offset > feed.last {
            feed.last = message.offset
            deliver(.message(message), in: feed)
            if feed.closed { return }
        }
        // An entry that could not be decoded is passed over, not waited for.
        if let lastEntry = page.lastOffset { feed.last = max(feed.last, lastEntry) }
        if page.entries >= pageSize && (through.map { feed.last < $0 } ?? true) {
            refill(feed, through: through)
            return
        }
        feed.settled = max(feed.settled, through ?? feed.last)
        if feed.refillAgain {
            feed.refillAgain = false
            refill(feed, through: nil)
            return
        }
        feed.refilling = false
        if feed.draining {
            // Unsubscribed: what came after the last fill is not delivered.
            return fail(feed, ParleyError(.unavailable, "unsubscribed"))
        }
        if !feed.live { goLive(feed) }
        if feed.resynchronize {
            feed.resynchronize = false
            resynchronize(feed.room)
        }
        drain(feed)
    }

    private func resynchronize(_ room: RoomKey) {
        let delivery = self.delivery
        guard let presence else {
            delivery()?.broker(resynchronize: room)
            return
        }
        presence.afterMembersRestored { delivery()?.broker(resynchronize: room) }
    }
}
