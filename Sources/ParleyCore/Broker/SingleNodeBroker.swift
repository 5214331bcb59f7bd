import Synchronization

/// The single-node ``Broker``: offsets are assigned in this process, messages are kept by a
/// ``MessageStore`` (SQLite under `--data`, or memory), and events go straight to this
/// node's delivery.
///
/// Each room has a sequencer behind its own lock. A publish takes the next offset and is
/// handed to the store under that lock, so the store gets a room's messages in offset order;
/// events wait in the room's queue, in call order, until every message before them is
/// stored, and go to the delivery from there. A failed write rewinds the room's offset so
/// stored offsets stay 1…n (the messages after it fail too: their offsets no longer follow).
/// A room's sequencer is loaded from the store on first use and leaves memory when it has
/// been idle for a while (``evictIdle(nowMillis:idleMillis:)``).
public final class SingleNodeBroker: Broker {
    public let store: any MessageStore
    private let clock: any WallClock
    private let idempotencyWindowMillis: Int64
    private let maxRooms: Int
    private let rooms = Mutex<[RoomKey: Sequencer]>([:])
    /// When the last sweep of a full table found no idle room: no new sweep before this
    /// time (``makeRoomAtTheBound(_:)``). Written under the table's lock.
    private let noSweepBefore = Atomic<Int64>(0)
    private let target = Mutex<(any BrokerDelivery)?>(nil)

    /// Client message ids remembered at most per room, and in all rooms together: past
    /// either bound a room forgets its own oldest before it remembers another (so the
    /// window is shorter than `idempotencyWindowMillis` for a room that holds that many).
    public static let maxRememberedPerRoom = 100_000
    public static let maxRemembered = 1_000_000
    private let remembered: RememberedCount

    /// A broker over `store`. `maxRooms` bounds the rooms held in memory at once,
    /// `maxRememberedPerRoom` and `maxRemembered` the client message ids kept.
    public init(store: any MessageStore, clock: any WallClock = SystemWallClock(),
                idempotencyWindowMillis: Int64 = 24 * 3_600_000, maxRooms: Int = 1_000_000,
                maxRememberedPerRoom: Int = SingleNodeBroker.maxRememberedPerRoom,
                maxRemembered: Int = SingleNodeBroker.maxRemembered) {
        self.store = store
        self.clock = clock
        self.idempotencyWindowMillis = idempotencyWindowMillis
        self.maxRooms = maxRooms
        remembered = RememberedCount(perRoom: max(1, maxRememberedPerRoom), total: max(1, maxRemembered))
    }

    /// Client message ids remembered now, in all rooms (tests and diagnostics).
    public var rememberedClientMessageIDs: Int { remembered.count.load(ordering: .relaxed) }

    public func setDelivery(_ delivery: any BrokerDelivery) {
        target.withLock { $0 = delivery }
    }

    /// Rooms whose sequencer is in memory now.
    public var roomsInMemory: Int { rooms.withLock { $0.count } }

    // MARK: Broker

    public func publish(_ message: Message, clientMessageID: String?,
                        completion: @escaping @Sendable (Result<Message, ParleyError>) -> Void) throws(ParleyError) {
        let sequencer = try self.sequencer(for: message.room)
        run(sequencer, .publish(message, clientMessageID, completion))
    }

    /// An event goes only to subscribers, and a room with a subscriber has its sequencer in
    /// memory: a room without one has nobody to tell, and no sequencer is made for it (a
    /// `{"typing": true}` to made-up rooms would otherwise fill the room table).
    public func broadcast(_ event: RoomEvent, in room: RoomKey) {
        guard let sequencer = rooms.withLock({ $0[room] }) else { return }
        run(sequencer, .broadcast(event))
    }

    public func subscribe(_ room: RoomKey, completion: @escaping @Sendable (Result<RoomPosition, ParleyError>) -> Void) {
        do {
            run(try sequencer(for: room), .subscribe(completion))
        } catch {
            completion(.failure(error))
        }
    }

    public func unsubscribe(_ room: RoomKey) {
        guard let sequencer = rooms.withLock({ $0[room] }) else { return }
        run(sequencer, .unsubscribe)
    }

    /// Forgets rooms nobody has used for `idleMillis`: nothing queued, nothing in flight, no
    /// subscriber. Their offsets and recent client message ids are read from the store again
    /// when they are next used. Returns how many left memory.
    @discardableResult
    public func evictIdle(nowMillis: Int64, idleMillis: Int64) -> Int {
        rooms.withLock { rooms in
            let idle = rooms.filter { $0.value.retireIfIdle(before: nowMillis - idleMillis) }.map(\.key)
            for key in idle { rooms.removeValue(forKey: key) }
            return idle.count
        }
    }

    // MARK: sequencers

    private func sequencer(for room: RoomKey) throws(ParleyError) -> Sequencer {
        let (sequencer, isNew) = try rooms.withLock { rooms throws(ParleyError) -> (Sequencer, Bool) in
            if let existing = rooms[room] { return (existing, false) }
            guard rooms.count < maxRooms || makeRoomAtTheBound(&rooms) else {
                throw ParleyError(.limitReached, "this server holds its maximum of \(maxRooms) rooms")
            }
            let created = Sequencer(room: room, nowMillis: clock.nowMillis(), remembered: remembered)
            rooms[room] = created
            return (created, true)
        }
        if isNew { load(sequencer) }
        return sequencer
    }

    /// The table is full: rather than refuse every publish to a room not in memory (anyone
    /// can fill the table with publishes to made-up rooms), forget rooms idle for a second
    /// at least (no subscriber, nothing queued or in flight; they are read from the store
    /// again when next used), up to a tenth of the bound. A sweep that found less than a
    /// tenth of that makes the next wait a second, so a table of busy rooms refuses without
    /// a walk of the table each time. Called with the table's lock held. True when there is
    /// room now.
    private func makeRoomAtTheBound(_ rooms: inout [RoomKey: Sequencer]) -> Bool {
        let now = clock.nowMillis()
        guard now >= noSweepBefore.load(ordering: .relaxed) else { return false }
        var idle: [RoomKey] = []
        let wanted = max(1, maxRooms / 10)
        for (key, sequencer) in rooms where sequencer.retireIfIdle(before: now - Self.idleAtTheBoundMillis) {
            idle.append(key)
            if idle.count == wanted { break }
        }
        for key in idle { rooms.removeValue(forKey: key) }
        noSweepBefore.store(idle.count < max(1, wanted / 10) ? now + 1_000 : 0, ordering: .relaxed)
        return rooms.count < maxRooms
    }

    /// How long a room must have been unused to be forgotten at the bound.
    static let idleAtTheBoundMillis: Int64 = 1_000

    private func load(_ sequencer: Sequencer) {
        let since = clock.nowMillis() - idempotencyWindowMillis
        store.loadRoom(sequencer.room, clientMessageIDsSince: since) { [self] result in
            var callbacks: [@Sendable () -> Void] = []
            let failed = sequencer.lock.withLock { state -> Bool in
                guard case .loading(let deferred) = state.phase else { return false }
                switch result {
                case .success(let recovery):
                    state.phase = .ready
                    state.nextOffset = recovery.lastOffset + 1
                    state.storedOffset = recovery.lastOffset
                    for publish in recovery.recentPublishes {
                        state.remember(publish.clientMessageID,
                                       Remembered(id: publish.id, offset: publish.offset, timestampMillis: publish.timestampMillis, waiters: nil),
                                       counting: sequencer.rememberedCount)
                    }
                    for operation in deferred { callbacks += apply(operation, to: sequencer, in: &state) }
                    return false
                case .failure(let error):
                    state.phase = .failed
                    for operation in deferred { callbacks += operation.fail(error) }
                    return true
                }
            }
            if failed { rooms.withLock { if $0[sequencer.room] === sequencer { $0[sequencer.room] = nil } } }
            for callback in callbacks { callback() }
        }
    }

    private func run(_ sequencer: Sequencer, _ operation: Operation) {
        var retry = false
        let callbacks = sequencer.lock.withLock { state -> [@Sendable () -> Void] in
            // Giving a subscription back is not a use: it must not keep the room in memory.
            if case .unsubscribe = operation {} else { state.lastUsedMillis = clock.nowMillis() }
            switch state.phase {
            case .loading(var deferred):
                deferred.append(operation)
                state.phase = .loading(deferred)
                return []
            case .failed:
                retry = true
                return []
            case .ready:
                return apply(operation, to: sequencer, in: &state)
            }
        }
        if retry {
            // The room failed to load, or left the table while this caller held it. A room
            // that left had no subscriber: an event or an unsubscribe has nothing to do there
            // (and must not bring the room back). Anything else loads it afresh.
            switch operation {
            case .broadcast, .unsubscribe: return
            case .publish, .subscribe: break
            }
            let failure: ParleyError
            do throws(ParleyError) {
                let fresh = try self.sequencer(for: sequencer.room)
                if fresh !== sequencer { return run(fresh, operation) }
                failure = ParleyError(.unavailable, "the store cannot read room \(sequencer.room)")
            } catch {
                failure = error
            }
            for callback in operation.fail(failure) { callback() }
            return
        }
        for callback in callbacks { callback() }
    }

    /// One operation on a ready room, lock held. Returns what to call once unlocked.
    private func apply(_ operation: Operation, to sequencer: Sequencer, in state: inout Sequencer.State) -> [@Sendable () -> Void] {
        switch operation {
        case .publish(let message, let clientMessageID, let completion):
            return publish(message, clientMessageID: clientMessageID, completion: completion, sequencer: sequencer, in: &state)
        case .broadcast(let event):
            guard state.subscriptions > 0 else { return [] }
            state.queue.append(.event(event))
            flush(sequencer.room, &state)
            return []
        case .subscribe(let completion):
            state.subscriptions += 1
            let position = RoomPosition(stored: state.storedOffset, published: state.nextOffset - 1)
            return [{ completion(.success(position)) }]
        case .unsubscribe:
            state.subscriptions = max(0, state.subscriptions - 1)
            if state.subscriptions == 0 { state.queue.removeAll { if case .event = $0 { true } else { false } } }
            return []
        }
    }

    private func publish(_ draft: Message, clientMessageID: String?,
                         completion: @escaping @Sendable (Result<Message, ParleyError>) -> Void,
                         sequencer: Sequencer, in state: inout Sequencer.State) -> [@Sendable () -> Void] {
        let now = draft.timestampMillis
        if let clientMessageID {
            state.forget(before: now - idempotencyWindowMillis, counting: sequencer.rememberedCount)
            if let known = state.remembered[clientMessageID] {
                let original = draft.placed(id: known.id, offset: known.offset, timestampMillis: known.timestampMillis)
                if known.waiters != nil {
                    state.remembered[clientMessageID]!.waiters!.append(completion)
                    return []
                }
                return [{ completion(.success(original)) }]
            }
        }
        let message = draft.placed(offset: state.nextOffset, timestampMillis: now)
        state.nextOffset += 1
        state.inFlight += 1
        if let clientMessageID {
            state.remember(clientMessageID, Remembered(id: message.id, offset: message.offset, timestampMillis: now, waiters: []),
                           counting: sequencer.rememberedCount)
        }
        state.queue.append(.message(message, stored: false))
        // One object per publish carries it to the store's answer and back (the append's
        // completion captures only it).
        let pending = PendingAppend(broker: self, sequencer: sequencer, message: message, epoch: state.epoch,
                                    clientMessageID: clientMessageID, completion: completion)
        store.append(message, clientMessageID: clientMessageID) { result in pending.storeAnswered(result) }
        guard let early = pending.appendReturned() else { return [] }
        let answer = stored(pending, early, in: &state)
        return [{ answer.call() }]
    }

    /// The store answered for `pending`, on the store's thread after `append` returned.
    fileprivate func storeAnswered(_ pending: PendingAppend, _ result: Result<Void, ParleyError>) {
        let answer = pending.sequencer.lock.withLock { state in stored(pending, result, in: &state) }
        answer.call()
    }

    /// The store answered for `pending`'s message; room lock held. Returns what to call once
    /// unlocked.
    private func stored(_ pending: PendingAppend, _ result: Result<Void, ParleyError>,
                        in state: inout Sequencer.State) -> StoredAnswer {
        let message = pending.message
        state.inFlight -= 1
        var others: [@Sendable (Result<Message, ParleyError>) -> Void] = []
        let outcome: Result<Message, ParleyError>
        switch result {
        case .success:
            state.storedOffset = message.offset
            // Usually the head: messages are stored in order.
            state.queue.updateFirst(where: { $0.isMessage(at: message.offset) }) { $0 = .message(message, stored: true) }
            if let clientMessageID = pending.clientMessageID {
                others = state.remembered[clientMessageID]?.waiters ?? []
                state.remembered[clientMessageID]?.waiters = nil
            }
            outcome = .success(message)
        case .failure(let error):
            if pending.epoch == state.epoch {
                // The messages after it fail too (their offsets no longer follow): rewind once.
                state.epoch += 1
                state.nextOffset = state.storedOffset + 1
            }
            state.queue.removeAll { $0.isMessage(id: message.id) }
            if let clientMessageID = pending.clientMessageID, state.remembered[clientMessageID]?.offset == message.offset {
                others = state.forgetFailed(clientMessageID, counting: pending.sequencer.rememberedCount)
            }
            outcome = .failure(error.code == .conflict
                ? ParleyError(.unavailable, "not stored: an earlier message of this room could not be stored")
                : error)
        }
        flush(pending.sequencer.room, &state)
        return StoredAnswer(outcome: outcome, first: pending.completion, others: others)
    }

    /// Delivers the queue's head while it is ready: broadcasts, and messages once stored.
    private func flush(_ room: RoomKey, _ state: inout Sequencer.State) {
        guard let first = state.queue.first, first.isReady else { return }
        let delivery = state.subscriptions > 0 ? target.withLock { $0 } : nil
        while let entry = state.queue.first, entry.isReady {
            state.queue.popFirst()
            guard let delivery else { continue }
            switch entry {
            case .event(let event): delivery.broker(deliver: event, in: room)
            case .message(let message, _): delivery.broker(deliver: .message(message), in: room)
            }
        }
    }
}

/// What a caller asked of a room, kept while the room loads.
private enum Operation: Sendable {
    case publish(Message, String?, @Sendable (Result<Message, ParleyError>) -> Void)
    case broadcast(RoomEvent)
    case subscribe(@Sendable (Result<RoomPosition, ParleyError>) -> Void)
    case unsubscribe

    /// The callbacks that report `error` for this operation.
    func fail(_ error: ParleyError) -> [@Sendable () -> Void] {
        switch self {
        case .publish(_, _, let completion): [{ completion(.failure(error)) }]
        case .subscribe(let completion): [{ completion(.failure(error)) }]
        case .broadcast, .unsubscribe: []
        }
    }
}

/// A client message id seen in a room: the original's id and offset, and who waits for it to
/// be stored (nil once stored).
private struct Remembered {
    let id: String
    let offset: Int64
    let timestampMillis: Int64
    var waiters: [@Sendable (Result<Message, ParleyError>) -> Void]?
}

/// How many client message ids all of a broker's rooms remember, and the bounds.
private final class RememberedCount: Sendable {
    let count = Atomic<Int>(0)
    /// Rooms remembering at least one id: the total bound's share of each is `total / rooms`.
    let rooms = Atomic<Int>(0)
    let perRoom: Int
    let total: Int

    init(perRoom: Int, total: Int) {
        self.perRoom = perRoom
        self.total = total
    }
}

/// One room of a ``SingleNodeBroker``.
private final class Sequencer: Sendable {
    enum Entry {
        case message(Message, stored: Bool)
        case event(RoomEvent)

        var isReady: Bool {
            if case .message(_, let stored) = self { return stored }
            return true
        }
        func isMessage(at offset: Int64) -> Bool {
            if case .message(let message, _) = self { return message.offset == offset }
            return false
        }
        func isMessage(id: String) -> Bool {
            if case .message(let message, _) = self { return message.id == id }
            return false
        }
    }

    enum Phase {
        case loading([Operation])
        case ready
        /// The store could not read it, or it left the table: get a fresh one.
        case failed
    }

    struct State {
        var phase = Phase.loading([])
        /// The offset the next message gets.
        var nextOffset: Int64 = 1
        /// The newest offset the store has confirmed.
        var storedOffset: Int64 = 0
        /// Bumped when a write fails, so the failures that follow rewind only once.
        var epoch: UInt64 = 0
        var inFlight = 0
        /// Events in call order, each delivered once everything before it is ready.
        var queue = FIFO<Entry>()
        var subscriptions = 0
        var lastUsedMillis: Int64
        var remembered: [String: Remembered] = [:]
        /// Client message ids in the order they were seen, to forget them after the window.
        var rememberedOrder: [(timestampMillis: Int64, messageID: String)] = []
        var rememberedStart = 0

        /// Remembers `messageID`. At the room's bound, or past the broker's while the room holds
        /// its share of it or more (the bound ÷ the rooms remembering ids), the room first
        /// forgets its own oldest id whose message is stored (one still on its way is kept:
        /// those are bounded by the store's queue). So the busiest rooms give way first, a
        /// quiet room keeps its share, and the total stays under twice the bound.
        mutating func remember(_ messageID: String, _ entry: Remembered, counting count: RememberedCount) {
            let share = count.total / max(1, count.rooms.load(ordering: .relaxed))
            if remembered.count >= count.perRoom
                || (count.count.load(ordering: .relaxed) >= count.total && remembered.count >= max(1, share)) {
                forgetOldest(counting: count)
            }
            let first = remembered.isEmpty
            if remembered.updateValue(entry, forKey: messageID) == nil {
                count.count.add(1, ordering: .relaxed)
                if first { count.rooms.add(1, ordering: .relaxed) }
            }
            rememberedOrder.append((entry.timestampMillis, messageID))
        }

        /// The message of `messageID` could not be stored: the id is free again. Returns the
        /// retries that waited for it.
        mutating func forgetFailed(_ messageID: String, counting count: RememberedCount) -> [@Sendable (Result<Message, ParleyError>) -> Void] {
            guard let known = remembered.removeValue(forKey: messageID) else { return [] }
            removed(counting: count)
            return known.waiters ?? []
        }

        /// One id left `remembered`.
        private mutating func removed(counting count: RememberedCount) {
            count.count.subtract(1, ordering: .relaxed)
            if remembered.isEmpty { count.rooms.subtract(1, ordering: .relaxed) }
        }

        /// The room leaves memory: its ids leave the count.
        mutating func forgetAll(counting count: RememberedCount) {
            guard !remembered.isEmpty else { return }
            count.count.subtract(remembered.count, ordering: .relaxed)
            count.rooms.subtract(1, ordering: .relaxed)
            remembered = [:]
            rememberedOrder = []
            rememberedStart = 0
        }

        mutating func forget(before millis: Int64, counting count: RememberedCount) {
            while rememberedStart < rememberedOrder.count, rememberedOrder[rememberedStart].timestampMillis < millis {
                let id = rememberedOrder[rememberedStart].messageID
                if remembered[id]?.timestampMillis ?? .max < millis, remembered[id]?.waiters == nil {
                    remembered[id] = nil
                    removed(counting: count)
                }
                rememberedStart += 1
            }
            compactOrder()
        }

        /// Forgets the oldest id still remembered, unless its message is on its way.
        private mutating func forgetOldest(counting count: RememberedCount) {
            while rememberedStart < rememberedOrder.count {
                let (timestamp, id) = rememberedOrder[rememberedStart]
                guard let known = remembered[id], known.timestampMillis == timestamp else {
                    rememberedStart += 1  // forgotten already, or remembered again later
                    continue
                }
                guard known.waiters == nil else { break }
                remembered[id] = nil
                removed(counting: count)
                rememberedStart += 1
                break
            }
            compactOrder()
        }

        private mutating func compactOrder() {
            if rememberedStart > 1024 && rememberedStart * 2 > rememberedOrder.count {
                rememberedOrder.removeFirst(rememberedStart)
                rememberedStart = 0
            }
        }
    }

    let room: RoomKey
    let lock: Mutex<State>
    /// The broker's count of remembered ids, which this room's ids are part of.
    let rememberedCount: RememberedCount

    init(room: RoomKey, nowMillis: Int64, remembered: RememberedCount) {
        self.room = room
        rememberedCount = remembered
        lock = Mutex(State(lastUsedMillis: nowMillis))
    }

    /// Leaves the table if idle since before `millis`: marked gone under its lock, so a
    /// caller that took it from the table just before runs its operation on a fresh one
    /// (``SingleNodeBroker/run(_:_:)`` retries a room that is not usable) instead of on a
    /// sequencer nobody else sees any more.
    func retireIfIdle(before millis: Int64) -> Bool {
        lock.withLock { state in
            guard case .ready = state.phase else { return false }
            guard state.subscriptions == 0 && state.inFlight == 0 && state.queue.isEmpty
                && state.lastUsedMillis < millis else { return false }
            // No remembered id has waiters then: an id has them only while its message is on
            // its way to the store (counted in `inFlight`), so there is no need to walk up to
            // 100,000 of them under the table's lock.
            state.phase = .failed
            state.forgetAll(counting: rememberedCount)
            return true
        }
    }
}

/// A publish handed to the store, until the store answers. The store's answer is handled by
/// whoever finishes second: the publisher still holding the room lock (the store answered
/// before `append` returned, e.g. in memory), or the store's thread.
///
/// Kept under 128 bytes (an early result is boxed): it is made on an event loop and freed on
/// the store's answer thread, and glibc frees a chunk that size into another thread's arena
/// without that arena's lock. At 144 bytes every free took the loop's arena lock, and the
/// loop's own allocations waited on it (thousands of futex calls a second at 18,000/s).
private final class PendingAppend: Sendable {
    private final class Early: Sendable {
        let result: Result<Void, ParleyError>
        init(_ result: Result<Void, ParleyError>) { self.result = result }
    }
    private enum Handoff { case waiting, early(Early), returned }
    let broker: SingleNodeBroker
    let sequencer: Sequencer
    let message: Message
    let epoch: UInt64
    let clientMessageID: String?
    let completion: @Sendable (Result<Message, ParleyError>) -> Void
    private let handoff = Mutex<Handoff>(.waiting)

    init(broker: SingleNodeBroker, sequencer: Sequencer, message: Message, epoch: UInt64, clientMessageID: String?,
         completion: @escaping @Sendable (Result<Message, ParleyError>) -> Void) {
        self.broker = broker
        self.sequencer = sequencer
        self.message = message
        self.epoch = epoch
        self.clientMessageID = clientMessageID
        self.completion = completion
    }

    /// Store side: hands the result to the publisher if `append` has not returned yet, else
    /// handles it here.
    func storeAnswered(_ result: Result<Void, ParleyError>) {
        let early = handoff.withLock { handoff in
            guard case .waiting = handoff else { return false }
            handoff = .early(Early(result))
            return true
        }
        if !early { broker.storeAnswered(self, result) }
    }

    /// Publisher side, once `append` returned: the result if it already came.
    func appendReturned() -> Result<Void, ParleyError>? {
        handoff.withLock { handoff in
            if case .early(let early) = handoff { return early.result }
            handoff = .returned
            return nil
        }
    }
}

/// Who to tell what once a message is stored (or not): the publisher, and the publishes of
/// the same client message id that waited for it.
private struct StoredAnswer: Sendable {
    let outcome: Result<Message, ParleyError>
    let first: @Sendable (Result<Message, ParleyError>) -> Void
    let others: [@Sendable (Result<Message, ParleyError>) -> Void]

    func call() {
        first(outcome)
        for other in others { other(outcome) }
    }
}
