import Synchronization

/// Limits and defaults of the room registry.
public struct HubConfiguration: Sendable {
    /// How long a client-chosen `message_id` makes a retried publish idempotent.
    public var idempotencyWindowMillis: Int64 = 24 * 3_600_000
    /// Messages kept in memory per room for `history_count` and history paging.
    public var historyCapacity: Int = 1_000
    /// Bytes of messages kept in memory per room.
    public var historyBytesPerRoom: Int = 1 << 20
    /// Bytes of messages kept in memory across all rooms (nil: no shared limit).
    public var historyBytesTotal: Int? = 256 << 20
    /// A typing flag clears itself after this long without a refresh.
    public var typingTimeoutMillis: Int64 = 6_000
    /// Most rooms held in memory at once (across channels).
    public var maxRooms: Int = 1_000_000
    /// Most members one room may hold.
    public var maxMembersPerRoom: Int = 100_000
    /// A room with no member here leaves memory after this long without activity (its
    /// history stays in the store).
    public var roomIdleMillis: Int64 = 60_000
    /// Most events buffered for a room while this node subscribes to it.
    public var maxBufferedEvents: Int = 100_000
    /// A room whose deliveries and publishes in progress on this node pass this many slows
    /// its publishers down (their connections stop being read) until half of it is done.
    public var backlogHighMark: Int = 4_096
    /// Most messages one replay page holds (a resume from far back goes page by page, each
    /// read when the session has written the one before).
    public var replayPageSize: Int = 1_000
    /// Most bytes (``Message/approximateSize``) of messages in one page of history: a
    /// `history` reply, a subscribe's `history_count`, an admin listing. A page always holds
    /// one message, however large, and says there is more when it ends early.
    public var historyPageBytes: Int = 1 << 20
    /// Most bytes of history pages being read from the store at once, over every door and
    /// connection (each read counts as a full page until it is answered). A read past it is
    /// refused as unavailable (retry in a moment); one read always goes.
    public var maxHistoryBytesInFlight: Int = 64 << 20
    /// Most publishes one session may make to a room while its join to it is still on its
    /// way; they go out once it is back (``Hub/publish(_:to:from:session:messageID:whenStored:)``).
    public var maxPublishesAwaitingJoin: Int = 64

    public init() {}
}

/// The rooms of this node and who is in them: the domain's centre. Doors subscribe sessions
/// and publish through it; a ``Broker`` orders each room's events and carries them between
/// nodes, a ``PresenceStore`` knows every room's members, and the broker's ``MessageStore``
/// keeps history. Thread-safe: each room has its own lock.
///
/// Each room a session on this node is in is a ``NodeRoom``: the node subscribes to it at the
/// broker and mirrors it (members, typists, recent messages) from the events the broker
/// delivers, in the room's order, and fans those events out to the inboxes of its sessions
/// (one per event loop). A publish goes to the broker and is seen by everyone, the sender
/// included, when the broker delivers it (once stored). A subscribe announces the member's
/// join through the broker and completes when that join comes back: the snapshot then has
/// everything published before the subscribe, and what follows reaches the session live,
/// with no gap and no duplicate.
public final class Hub: Sendable {
    public let configuration: HubConfiguration
    public let clock: any WallClock
    public let broker: any Broker
    public let presence: any PresenceStore
    /// Where history lives; each room's in-memory history is its recent tail.
    public var store: any MessageStore { broker.store }
    /// The bytes every room's history cache holds together.
    public let historyBudget: HistoryBudget?
    let rooms = Mutex<[RoomKey: NodeRoom]>([:])
    /// How many rooms of each channel ``rooms`` holds (changed with it, under its lock).
    let channelRooms = Mutex<[String: Int]>([:])
    let ids = MessageIDGenerator()
    let subscribeTokens = Atomic<UInt64>(0)
    /// Typists whose typing signal went out through this node: this node announces their
    /// flag's expiry (every node would otherwise announce it once).
    let localTypists = Mutex<[RoomKey: TypingTracker]>([:])
    /// Told of every message stored through this node's publishes (push notifications).
    let storedObserver = Mutex<Callback<@Sendable (Message) -> Void>?>(nil)
    /// History pages being read now (``HubConfiguration/maxHistoryBytesInFlight``): explicit
    /// reads and the reads subscriptions need.
    let historyReads: HistoryReadGate

    /// `observer` is told of every message (and action) this node publishes, once stored, on
    /// the store's thread: it must return at once. One observer; a second call replaces it.
    public func observeStored(_ observer: @escaping @Sendable (Message) -> Void) {
        storedObserver.withLock { $0 = Callback(observer) }
    }

    /// A single-node hub in memory (keeping `historyCapacity` messages per room).
    public convenience init(configuration: HubConfiguration = .init(), clock: any WallClock = SystemWallClock()) {
        let store = InMemoryMessageStore(retention: StoreRetention(maxMessagesPerRoom: configuration.historyCapacity))
        self.init(configuration: configuration, clock: clock, store: store)
    }

    /// A single-node hub over `store` (``SingleNodeBroker``, ``MemoryPresenceStore``).
    public convenience init(configuration: HubConfiguration = .init(), clock: any WallClock = SystemWallClock(),
                            store: any MessageStore) {
        let broker = SingleNodeBroker(store: store, clock: clock, idempotencyWindowMillis: configuration.idempotencyWindowMillis,
                                 maxRooms: configuration.maxRooms)
        self.init(configuration: configuration, clock: clock, broker: broker, presence: MemoryPresenceStore())
    }

    /// A hub over any broker and presence store (the cluster's come from ParleyRedis).
    public init(configuration: HubConfiguration = .init(), clock: any WallClock = SystemWallClock(),
                broker: any Broker, presence: any PresenceStore) {
        self.configuration = configuration
        self.clock = clock
        self.broker = broker
        self.presence = presence
        historyBudget = configuration.historyBytesTotal.map { HistoryBudget(limit: $0) }
        historyReads = HistoryReadGate(maxBytes: configuration.maxHistoryBytesInFlight)
        broker.setDelivery(HubDelivery(hub: self))
    }

    // MARK: publishing

    /// Publishes `body` to `key` (a member need not be subscribed to publish). Every
    /// subscriber gets the message, the sender included, once the store has it.
    /// `{"typing": bool}` bodies are delivered at once but never stored (offset 0).
    ///
    /// `whenStored` runs once (on any thread) with the message and its offset when it is
    /// durable, or with the error that kept it from being stored. With `messageID`, a retry
    /// of a publish seen in the room within ``HubConfiguration/idempotencyWindowMillis`` is
    /// neither stored nor delivered again: `whenStored` reports the original's id and offset.
    /// Throws when the publish is refused at once (e.g. the room limit).
    ///
    /// Returns the room's backlog when this node follows the room: a door slows a publisher
    /// down while it is over its high mark (``RoomBacklog/isOverHigh``).
    ///
    /// With `session`, a publish from a session whose subscribe to `key` is still on its way
    /// (the join not yet back through the broker) waits for that join and then goes out, in
    /// the order it was made: nobody sees a member's message before its join, and the member
    /// gets its own message live, whichever node it is on. At most
    /// ``HubConfiguration/maxPublishesAwaitingJoin`` wait per session and room; a failed
    /// subscribe fails them through `whenStored`.
    ///
    /// With `replyTo` the message is a reply; with `action` it is an action on another message
    /// of the room (docs/protocols.md, "Message actions"), stored and delivered in order like
    /// a message. The hub checks no rule: the door's chat session does
    /// (``message(withID:in:completion:)`` finds the target).
    @discardableResult
    public func publish(_ body: JSONValue, to key: RoomKey, from sender: Member?, session: SessionID? = nil,
                        messageID: String? = nil, replyTo: MessageReference? = nil, action: MessageAction? = nil,
                        whenStored: (@Sendable (Result<Message, ParleyError>) -> Void)? = nil) throws(ParleyError) -> RoomBacklog? {
        let room = rooms.withLock { $0[key] }
        // The parked publish is made only when it is parked (not on every publish: it holds
        // all of this call's arguments).
        if let session, let room,
           try hold(session, in: room, {
               { [self] failure in
                   if let failure { whenStored?(.failure(failure)); return }
                   do throws(ParleyError) {
                       _ = try dispatch(body, to: key, from: sender, messageID: messageID, replyTo: replyTo, action: action,
                                        backlog: room.backlog, whenStored: whenStored)
                   } catch {
                       whenStored?(.failure(error))
                   }
               }
           }) {
            return room.backlog
        }
        return try dispatch(body, to: key, from: sender, messageID: messageID, replyTo: replyTo, action: action,
                            backlog: room?.backlog, whenStored: whenStored)
    }

    /// Parks `publish` with `session`'s subscribe to `room` while its join is on its way;
    /// false when the session is not joining it (live, a listener, or not in the room).
    private func hold(_ session: SessionID, in room: NodeRoom,
                      _ publish: () -> @Sendable (ParleyError?) -> Void) throws(ParleyError) -> Bool {
        let limit = configuration.maxPublishesAwaitingJoin
        return try room.lock.withLock { state throws(ParleyError) -> Bool in
            // Held while the join is on its way, and after it until the held ones are sent.
            guard let entry = state.sessions[session], !entry.listensOnly,
                  entry.stage == .awaitingRoom || entry.stage == .awaitingJoin || !entry.held.isEmpty else { return false }
            guard entry.held.count < limit else {
                throw ParleyError(.limitReached, "too many messages sent before the join to \(room.key.room) completed (limit \(limit))")
            }
            state.sessions[session]!.held.append(publish())
            return true
        }
    }

    private func dispatch(_ body: JSONValue, to key: RoomKey, from sender: Member?, messageID: String?,
                          replyTo: MessageReference?, action: MessageAction?, backlog: RoomBacklog?,
                          whenStored: (@Sendable (Result<Message, ParleyError>) -> Void)?) throws(ParleyError) -> RoomBacklog? {
        let now = clock.nowMillis()
        let message = Message(id: ids.next(), offset: 0, timestampMillis: now, room: key, sender: sender, body: body,
                              replyTo: replyTo, action: action)
        if action == nil, let flag = Message.typingState(of: body) {
            if let sender {
                localTypists.withLock { typists in
                    _ = typists[key, default: TypingTracker(timeoutMillis: configuration.typingTimeoutMillis)]
                        .set(sender, typing: flag, nowMillis: now)
                    if typists[key]?.members.isEmpty == true { typists[key] = nil }
                }
            }
            broker.broadcast(.message(message), in: key)
            whenStored?(.success(message))
            return backlog
        }
        if let sender { stopLocalTyping(sender, in: key) }
        backlog?.add()
        do {
            let observer = storedObserver.withLock { $0 }
            try broker.publish(message, clientMessageID: messageID) { result in
                whenStored?(result)
                backlog?.done()
                // Only a message stored now: a retry of a known `message_id` (answered with the
                // original, whose id is not this draft's) was observed when it was stored, on
                // whichever node; observing it again would push it again.
                if let observer, case .success(let stored) = result, stored.id == message.id { observer.call(stored) }
            }
        } catch {
            backlog?.done()
            throw error
        }
        return backlog
    }

    func stopLocalTyping(_ sender: Member, in key: RoomKey) {
        localTypists.withLock { typists in
            guard typists[key] != nil else { return }
            _ = typists[key]!.clear(sender.id)
            if typists[key]!.members.isEmpty { typists[key] = nil }
        }
    }

    /// Clears typing flags of this node's typists that were not refreshed in time, announcing
    /// each as a `{"typing": false}` message from that member. Call it about once a second.
    public func expireTyping() {
        let now = clock.nowMillis()
        let expired = localTypists.withLock { typists -> [(RoomKey, Member)] in
            var expired: [(RoomKey, Member)] = []
            for key in Array(typists.keys) {
                for member in typists[key]!.expire(nowMillis: now) { expired.append((key, member)) }
                if typists[key]!.members.isEmpty { typists[key] = nil }
            }
            return expired
        }
        for (key, member) in expired {
            let stop = Message(id: ids.next(), offset: 0, timestampMillis: now, room: key, sender: member, body: .object(["typing": false]))
            broker.broadcast(.message(stop), in: key)
        }
    }

    /// Whether this node holds a room of `channel` in memory now.
    public func holdsRooms(inChannel channel: String) -> Bool { channelRooms.withLock { $0[channel] != nil } }

    /// How many channels this node holds rooms of now.
    public var channelCount: Int { channelRooms.withLock { $0.count } }

    static func count(_ counts: inout [String: Int], _ channel: String, _ delta: Int) {
        let value = (counts[channel] ?? 0) + delta
        counts[channel] = value > 0 ? value : nil
    }

    // MARK: queries

    /// Members of a room in join order, as this node sees it: rooms with no member here are
    /// not followed and answer empty (ask ``members(of:limit:completion:)`` for any room).
    public func members(of key: RoomKey) -> [Member] {
        guard let room = rooms.withLock({ $0[key] }) else { return [] }
        return room.lock.withLock { $0.presence.members.list() }
    }

    /// Members typing in a room now, as this node sees it.
    public func typingMembers(of key: RoomKey) -> [Member] {
        guard let room = rooms.withLock({ $0[key] }) else { return [] }
        return room.lock.withLock { $0.presence.typing.members }
    }

    /// Members of any room across every node (at most `limit`), and how many there are.
    public func members(of key: RoomKey, limit: Int,
                        completion: @escaping @Sendable (Result<(members: [Member], total: Int), ParleyError>) -> Void) {
        presence.members(of: key, limit: limit, completion: completion)
    }

    /// Rooms of a channel that have members (on any node), sorted by name, a page at a time.
    public func occupiedRooms(in channel: String, after cursor: String? = nil, limit: Int,
                              completion: @escaping @Sendable (Result<[String], ParleyError>) -> Void) {
        presence.rooms(in: channel, after: cursor, limit: limit, completion: completion)
    }

    /// Up to `limit` stored messages before `offset` (the newest when nil), oldest first,
    /// and at most ``HubConfiguration/historyPageBytes`` of them (`hasMore` when the page
    /// ended early), read from the store: any amount of history, page by page. `completion`
    /// runs on a store thread. This is the call for every door (native `history`, Socket.IO,
    /// REST, admin).
    public func storedHistory(of key: RoomKey, before offset: Int64? = nil, limit: Int,
                              completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        let page = configuration.historyPageBytes
        guard historyReads.tryReserve(page) else {
            return completion(.failure(Self.tooMuchHistory))
        }
        store.messages(in: key, before: offset, limit: limit, maxBytes: page) { [historyReads] result in
            completion(result)
            historyReads.release(page)
        }
    }

    static let tooMuchHistory = ParleyError(.unavailable, "the server is reading too much history at once; retry in a moment")

    /// Bytes of history being read from the store now, for `/metrics`.
    public var historyReadBytesInFlight: Int { historyReads.bytesInFlight }
    /// Subscriptions' history reads waiting for their turn now, for `/metrics`.
    public var historyReadsWaiting: Int { historyReads.waitingReads }

    /// The message `id` of `key` in its current state (nil when the room has no such message,
    /// or retention dropped it; an action's id is no message), from the store: what a
    /// session checks an action's rules against.
    public func message(withID id: String, in key: RoomKey, completion: @escaping @Sendable (Result<Message?, ParleyError>) -> Void) {
        store.message(withID: id, in: key, completion: completion)
    }

    /// The offset of a room's newest stored message (0 when none), from the store.
    public func lastOffset(of key: RoomKey, completion: @escaping @Sendable (Result<Int64, ParleyError>) -> Void) {
        store.loadRoom(key, clientMessageIDsSince: .max) { result in completion(result.map(\.lastOffset)) }
    }

    /// Rooms this node holds in memory now.
    public var roomsInMemory: Int { rooms.withLock { $0.count } }

    /// Forgets rooms with no session here and no activity for ``HubConfiguration/roomIdleMillis``
    /// (unsubscribing from them at the broker); their history stays in the store. Call it
    /// every few seconds. Returns how many rooms left memory.
    @discardableResult
    public func evictIdleRooms() -> Int {
        let cutoff = clock.nowMillis() - configuration.roomIdleMillis
        let evicted = rooms.withLock { rooms -> [RoomKey] in
            var evicted: [RoomKey] = []
            for (key, room) in rooms {
                let idle = room.lock.withLock { state -> Bool in
                    guard state.sessions.isEmpty, state.lastActivityMillis < cutoff, case .live = state.phase else { return false }
                    state.history.removeAll()
                    return true
                }
                if idle { evicted.append(key) }
            }
            for key in evicted { rooms.removeValue(forKey: key) }
            channelRooms.withLock { counts in for key in evicted { Self.count(&counts, key.channel, -1) } }
            return evicted
        }
        for key in evicted { broker.unsubscribe(key) }
        _ = broker.evictIdle(nowMillis: clock.nowMillis(), idleMillis: configuration.roomIdleMillis)
        return evicted.count
    }
}

/// The hub's face towards its broker. A separate object so the broker does not keep the hub
/// (which keeps the broker) alive forever.
final class HubDelivery: BrokerDelivery {
    weak let hub: Hub?
    init(hub: Hub) { self.hub = hub }
    func broker(deliver event: RoomEvent, in room: RoomKey) { hub?.deliver(event, in: room) }
    func broker(resynchronize room: RoomKey) { hub?.resynchronize(room) }
}
