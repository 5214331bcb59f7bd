import Synchronization

/// Limits and defaults of the room registry.
public struct HubConfiguration: Sendable {
    /// How long a client-chosen `message_id` makes a retried publish idempotent.
    public var idempotencyWindowMillis: Int64 = 24 * 3_600_000
    /// Messages kept in memory per room for `history_count` and history paging.
    public var historyCapacity: Int = 1_000
    /// A typing flag clears itself after this long without a refresh.
    public var typingTimeoutMillis: Int64 = 6_000
    /// Most rooms the hub will hold (across channels).
    public var maxRooms: Int = 1_000_000
    /// Most members one room may hold.
    public var maxMembersPerRoom: Int = 100_000

    public init() {}
}

/// The rooms of this node and who is in them. Thread-safe: each room has its own lock, held
/// only to change that room and to post to the inboxes of its subscribers, so messages of one
/// room reach every inbox in the same order.
///
/// Stored messages are durable before anyone sees them: `publish` assigns the next offset and
/// hands the message to the ``MessageStore`` under the room lock (so the store gets a room's
/// messages in offset order); when the store confirms, the message enters the in-memory
/// history and goes to the subscribers, under the same lock, in offset order. A failed write
/// rewinds the room's offset so stored offsets stay 1…n; nobody ever saw the failed message.
public final class Hub: Sendable {
    public let configuration: HubConfiguration
    public let clock: any Clock
    /// Where history lives; the hub's in-memory history is its recent tail.
    public let store: any MessageStore
    private let rooms = Mutex<[RoomKey: Room]>([:])
    private let typingRooms = Mutex<Set<RoomKey>>([])
    private let ids = MessageIDGenerator()
    /// What the store said at startup, consumed as rooms are first touched.
    private let recovered: Mutex<(offsets: [RoomKey: Int64], publishes: [RoomKey: [RememberedPublish]])>
    private let subscribeTokens = Atomic<UInt64>(0)

    /// A hub over the in-memory store (keeping `historyCapacity` messages per room).
    public convenience init(configuration: HubConfiguration = .init(), clock: any Clock = SystemClock()) {
        let store = InMemoryMessageStore(retention: StoreRetention(maxMessagesPerRoom: configuration.historyCapacity))
        try! self.init(configuration: configuration, clock: clock, store: store)
    }

    /// A hub over `store`: reads each room's last offset and the recent client message ids
    /// from it first (blocking; call it before serving).
    public init(configuration: HubConfiguration = .init(), clock: any Clock = SystemClock(),
                store: any MessageStore) throws(ParleyError) {
        self.configuration = configuration
        self.clock = clock
        self.store = store
        let recovery = try store.recover(clientMessageIDsSince: clock.nowMillis() - configuration.idempotencyWindowMillis)
        recovered = Mutex((recovery.lastOffsets, Dictionary(grouping: recovery.recentPublishes, by: \.room)))
    }

    private func room(_ key: RoomKey, create: Bool) throws(ParleyError) -> Room? {
        let result = rooms.withLock { rooms -> Room?? in
            if let room = rooms[key] { return room }
            guard create else { return .some(nil) }
            guard rooms.count < configuration.maxRooms else { return nil }
            let (last, publishes) = recovered.withLock { ($0.offsets.removeValue(forKey: key) ?? 0, $0.publishes.removeValue(forKey: key) ?? []) }
            var state = Room.Locked(state: RoomState(key: key, historyCapacity: configuration.historyCapacity,
                                                     typingTimeoutMillis: configuration.typingTimeoutMillis, lastOffset: last))
            state.storedOffset = last
            for publish in publishes {
                state.remember(publish.clientMessageID, Room.Remembered(id: publish.id, offset: publish.offset,
                                                                       timestampMillis: publish.timestampMillis, waiters: nil))
            }
            let room = Room(state)
            rooms[key] = room
            return room
        }
        guard let result else {
            throw ParleyError(.limitReached, "this server holds its maximum of \(configuration.maxRooms) rooms")
        }
        return result
    }

    // MARK: membership

    /// Adds `session` to `key` as `member`. Its inbox gets `.subscribed` with the snapshot:
    /// up to `historyCount` recent messages, and with `since`, every stored message after that
    /// offset in `replay`; everything later reaches it live, with no gap and no duplicate. The
    /// others get `.memberJoined` at once. When the history must come from the store, the
    /// snapshot follows when it has been read (the subscriber gets no live message before it).
    /// Subscribing twice is harmless: the second gets a fresh snapshot and nobody sees a join.
    public func subscribe(_ session: SessionID, as member: Member, to key: RoomKey, inbox: any Inbox,
                          historyCount: Int = 0, since: Int64? = nil) throws(ParleyError) {
        let room = try self.room(key, create: true)!
        let limit = configuration.maxMembersPerRoom
        let historyCount = max(0, historyCount)
        let token = subscribeTokens.wrappingAdd(1, ordering: .relaxed).newValue
        let outcome = room.lock.withLock { locked -> SubscribeOutcome in
            if !locked.state.contains(session) {
                guard locked.state.memberCount < limit else { return .full }
                _ = locked.state.join(session, as: member)
                for target in locked.inboxes.values { target.inbox.post(.event(key, .memberJoined(member))) }
            } else if locked.pending[session] == nil, locked.sessionInbox[session] != nil {
                let snapshot = SubscribeSnapshot(room: key, members: locked.state.memberList,
                                                 history: locked.latest(historyCount), lastOffset: locked.storedOffset)
                inbox.post(.subscribed(session, snapshot))
                return .done
            }
            locked.pending[session] = token
            // Read-your-writes: what was published before this subscribe is in its snapshot,
            // so wait for messages still on their way to the store.
            let published = locked.state.lastOffset
            // Without `since`, the subscriber starts at this instant: whatever is stored after
            // `published` while it waits is delivered to it (as replay), not skipped.
            let since = since ?? published
            if published > locked.storedOffset {
                locked.storeWaiters.append((published, { [self] in
                    let next = room.lock.withLock { locked -> SubscribeOutcome in
                        self.attemptSubscribe(session, key: key, inbox: inbox, token: token, historyCount: historyCount,
                                              since: since, in: &locked)
                    }
                    if case .read(let stored, let from) = next {
                        self.readHistory(room: room, key: key, session: session, inbox: inbox, token: token,
                                         historyCount: historyCount, stored: stored, from: from)
                    }
                }))
                return .done
            }
            return attemptSubscribe(session, key: key, inbox: inbox, token: token, historyCount: historyCount,
                                    since: since, in: &locked)
        }
        switch outcome {
        case .full:
            throw ParleyError(.limitReached, "room \(key.room) is full (\(limit) members)")
        case .done:
            return
        case .read(let stored, let from):
            readHistory(room: room, key: key, session: session, inbox: inbox, token: token,
                        historyCount: historyCount, stored: stored, from: from)
        }
    }

    /// Completes a subscribe from memory when it holds what is needed; else says what to read.
    private func attemptSubscribe(_ session: SessionID, key: RoomKey, inbox: any Inbox, token: UInt64,
                                  historyCount: Int, since: Int64?, in locked: inout Room.Locked) -> SubscribeOutcome {
        guard locked.pending[session] == token else { return .done }
        let stored = locked.storedOffset
        let from = min(max(since ?? stored, 0), stored)
        guard locked.covers(historyCount: historyCount, after: from) else { return .read(stored: stored, from: from) }
        locked.pending[session] = nil
        locked.addInbox(inbox, for: session)
        // Only observable rooms show their members: copying a large room's list on every
        // join made subscribing O(members) in time and transient memory.
        var snapshot = SubscribeSnapshot(room: key, members: key.isObservable ? locked.state.memberList : [],
                                         history: locked.latest(historyCount), lastOffset: stored)
        snapshot.replay = locked.tail(after: from)
        inbox.post(.subscribed(session, snapshot))
        return .done
    }

    private enum SubscribeOutcome { case full, done, read(stored: Int64, from: Int64) }

    /// Reads the history and replay a subscriber needs from the store, then catches up with
    /// what was stored meanwhile (from memory, or the store again) and completes the subscribe.
    private func readHistory(room: Room, key: RoomKey, session: SessionID, inbox: any Inbox, token: UInt64,
                             historyCount: Int, stored: Int64, from: Int64) {
        let store = self.store
        func history(_ done: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
            if historyCount == 0 { done(.success(MessagePage(messages: [], hasMore: false))); return }
            store.messages(in: key, before: stored + 1, limit: historyCount, completion: done)
        }
        history { historyResult in
            let replay: (@escaping @Sendable (Result<[Message], ParleyError>) -> Void) -> Void = { done in
                if stored <= from { done(.success([])); return }
                store.messages(in: key, after: from, limit: Int(stored - from), completion: done)
            }
            replay { replayResult in
                switch (historyResult, replayResult) {
                case (.success(let history), .success(let replay)):
                    self.catchUp(room: room, key: key, session: session, inbox: inbox, token: token,
                                 history: history.messages, replay: replay, upTo: stored)
                case (.failure(let error), _), (_, .failure(let error)):
                    self.failSubscribe(room: room, key: key, session: session, inbox: inbox, token: token, error: error)
                }
            }
        }
    }

    private func catchUp(room: Room, key: RoomKey, session: SessionID, inbox: any Inbox, token: UInt64,
                         history: [Message], replay: [Message], upTo read: Int64) {
        let again = room.lock.withLock { locked -> Int64? in
            guard locked.pending[session] == token else { return nil }
            let stored = locked.storedOffset
            var replay = replay
            if stored > read {
                guard locked.covers(historyCount: 0, after: read) else { return read }
                replay += locked.tail(after: read)
            }
            locked.pending[session] = nil
            locked.addInbox(inbox, for: session)
            // Only observable rooms show their members: copying a large room's list on every
        // join made subscribing O(members) in time and transient memory.
        var snapshot = SubscribeSnapshot(room: key, members: key.isObservable ? locked.state.memberList : [], history: history, lastOffset: stored)
            snapshot.replay = replay
            inbox.post(.subscribed(session, snapshot))
            return nil
        }
        guard let again else { return }
        // More was stored meanwhile than memory holds: read it too, then try again.
        let stored = room.lock.withLock { $0.storedOffset }
        store.messages(in: key, after: again, limit: Int(stored - again)) { result in
            switch result {
            case .success(let more):
                self.catchUp(room: room, key: key, session: session, inbox: inbox, token: token,
                             history: history, replay: replay + more, upTo: more.last?.offset ?? again)
            case .failure(let error):
                self.failSubscribe(room: room, key: key, session: session, inbox: inbox, token: token, error: error)
            }
        }
    }

    private func failSubscribe(room: Room, key: RoomKey, session: SessionID, inbox: any Inbox, token: UInt64, error: ParleyError) {
        room.lock.withLock { locked in
            guard locked.pending[session] == token else { return }
            locked.pending[session] = nil
            var snapshot = SubscribeSnapshot(room: key, members: [], history: [], lastOffset: locked.storedOffset)
            snapshot.failure = error
            if let member = locked.state.leave(session) {
                for target in locked.inboxes.values { target.inbox.post(.event(key, .memberLeft(member))) }
            }
            inbox.post(.subscribed(session, snapshot))
        }
    }

    /// Removes `session` from `key`: its inbox gets `.unsubscribed`, the others `.memberLeft`.
    /// Returns false when it was not a member.
    @discardableResult
    public func unsubscribe(_ session: SessionID, from key: RoomKey) -> Bool {
        guard let room = try? self.room(key, create: false) else { return false }
        return room.lock.withLock { locked -> Bool in
            guard let member = locked.state.leave(session) else { return false }
            locked.pending[session] = nil
            if let inbox = locked.removeInbox(for: session) { inbox.post(.unsubscribed(session, key)) }
            for target in locked.inboxes.values { target.inbox.post(.event(key, .memberLeft(member))) }
            return true
        }
    }

    // MARK: messages

    /// Publishes `body` to `key` (a member need not be subscribed to publish). Every
    /// subscriber gets the message, the sender included, once the store has it.
    /// `{"typing": bool}` bodies are delivered at once but not stored (offset 0).
    ///
    /// Returns the message with its offset; `whenStored` runs (on any thread) once it is
    /// durable, or with the error that kept it from being stored. With `messageID`, a retry
    /// of a publish seen in the room within ``HubConfiguration/idempotencyWindowMillis`` is
    /// neither stored nor delivered again: it returns, and `whenStored` reports, the original
    /// id and offset.
    @discardableResult
    public func publish(_ body: JSONValue, to key: RoomKey, from sender: Member?, messageID: String? = nil,
                        whenStored: (@Sendable (Result<Message, ParleyError>) -> Void)? = nil) throws(ParleyError) -> Message {
        let room = try self.room(key, create: true)!
        let id = ids.next()
        let now = clock.nowMillis()
        let window = configuration.idempotencyWindowMillis
        var finished: [@Sendable () -> Void] = []
        let message = room.lock.withLock { locked -> Message in
            if let messageID, !Message.isEphemeral(body) {
                locked.forget(before: now - window)
                if let known = locked.remembered[messageID] {
                    let original = Message(id: known.id, offset: known.offset, timestampMillis: known.timestampMillis,
                                           room: key, sender: sender, body: body)
                    if let whenStored {
                        if known.waiters != nil {
                            locked.remembered[messageID]!.waiters!.append(whenStored)
                        } else {
                            finished.append { whenStored(.success(original)) }
                        }
                    }
                    return original
                }
            }
            let message = locked.state.assign(body: body, from: sender, id: id, nowMillis: now)
            guard message.offset > 0 else {
                for target in locked.inboxes.values { target.inbox.post(.event(key, .message(message))) }
                if let whenStored { finished.append { whenStored(.success(message)) } }
                return message
            }
            if let messageID {
                locked.remember(messageID, Room.Remembered(id: id, offset: message.offset, timestampMillis: now, waiters: []))
            }
            let epoch = locked.epoch
            let handoff = AppendHandoff()
            store.append(message, clientMessageID: messageID) { result in
                guard !handoff.resolveEarly(result) else { return }
                var callbacks: [@Sendable () -> Void] = []
                room.lock.withLock { locked in
                    callbacks = self.stored(message, result, epoch: epoch, messageID: messageID, whenStored: whenStored, in: &locked)
                }
                for callback in callbacks { callback() }
            }
            if let early = handoff.returned() {
                finished += stored(message, early, epoch: epoch, messageID: messageID, whenStored: whenStored, in: &locked)
            }
            return message
        }
        for callback in finished { callback() }
        if message.offset == 0, Message.typingState(of: body) == true {
            typingRooms.withLock { _ = $0.insert(key) }
        }
        return message
    }

    /// The store answered for `message`; room lock held. Returns what to call once unlocked.
    private func stored(_ message: Message, _ result: Result<Void, ParleyError>, epoch: UInt64, messageID: String?,
                        whenStored: (@Sendable (Result<Message, ParleyError>) -> Void)?,
                        in locked: inout Room.Locked) -> [@Sendable () -> Void] {
        var waiters: [@Sendable (Result<Message, ParleyError>) -> Void] = whenStored.map { [$0] } ?? []
        let outcome: Result<Message, ParleyError>
        switch result {
        case .success:
            locked.storedOffset = message.offset
            locked.state.commit(message)
            for target in locked.inboxes.values { target.inbox.post(.event(message.room, .message(message))) }
            if let messageID {
                waiters += locked.remembered[messageID]?.waiters ?? []
                locked.remembered[messageID]?.waiters = nil
            }
            outcome = .success(message)
        case .failure(let error):
            if epoch == locked.epoch {
                // Later messages of this epoch fail too (their offsets no longer follow).
                locked.epoch += 1
                locked.state.rewind(to: locked.storedOffset + 1)
            }
            if let messageID, locked.remembered[messageID]?.offset == message.offset {
                waiters += locked.remembered.removeValue(forKey: messageID)?.waiters ?? []
            }
            let shown = error.code == .conflict
                ? ParleyError(.unavailable, "not stored: an earlier message of this room could not be stored")
                : error
            outcome = .failure(shown)
        }
        return waiters.map { waiter in { waiter(outcome) } } + readyWaiters(in: &locked)
    }

    /// Subscribes waiting for the store that can go on now (everything they waited for is
    /// stored, or failed and was rewound).
    private func readyWaiters(in locked: inout Room.Locked) -> [@Sendable () -> Void] {
        guard !locked.storeWaiters.isEmpty else { return [] }
        let limit = min(locked.storedOffset, locked.state.lastOffset)
        var ready: [@Sendable () -> Void] = []
        locked.storeWaiters.removeAll { waiter in
            guard waiter.offset <= limit || locked.state.lastOffset <= locked.storedOffset else { return false }
            ready.append(waiter.resume)
            return true
        }
        return ready
    }
    /// Clears typing flags that were not refreshed in time, announcing each as a
    /// `{"typing": false}` message from that member. Call it about once a second.
    public func expireTyping() {
        let keys = typingRooms.withLock { rooms -> Set<RoomKey> in
            let keys = rooms
            rooms.removeAll()
            return keys
        }
        let now = clock.nowMillis()
        for key in keys {
            guard let room = try? self.room(key, create: false) else { continue }
            let stillTyping = room.lock.withLock { locked -> Bool in
                for member in locked.state.typingExpire(nowMillis: now) {
                    let message = Message(id: ids.next(), offset: 0, timestampMillis: now, room: key,
                                          sender: member, body: .object(["typing": false]))
                    for target in locked.inboxes.values { target.inbox.post(.event(key, .message(message))) }
                }
                return !locked.state.typing.members.isEmpty
            }
            if stillTyping { typingRooms.withLock { _ = $0.insert(key) } }
        }
    }

    // MARK: queries

    /// Members of a room in join order (empty when the room does not exist).
    public func members(of key: RoomKey) -> [Member] {
        guard let room = try? self.room(key, create: false) else { return [] }
        return room.lock.withLock { $0.state.memberList }
    }

    /// Members typing in a room now.
    public func typingMembers(of key: RoomKey) -> [Member] {
        guard let room = try? self.room(key, create: false) else { return [] }
        return room.lock.withLock { $0.state.typing.members }
    }

    /// Rooms of a channel that have members now, sorted by name.
    public func occupiedRooms(in channel: String) -> [String] {
        let candidates = rooms.withLock { rooms in rooms.filter { $0.key.channel == channel }.map { ($0.key, $0.value) } }
        return candidates.filter { !$0.1.lock.withLock { $0.state.isEmpty } }.map { $0.0.room }.sorted()
    }

    /// The occupied rooms of a channel with their members (join order), sorted by room name.
    public func roomMembers(in channel: String) -> [(room: String, members: [Member])] {
        let candidates = rooms.withLock { rooms in rooms.filter { $0.key.channel == channel }.map { ($0.key, $0.value) } }
        return candidates.map { key, room in (key.room, room.lock.withLock { $0.state.memberList }) }
            .filter { !$0.1.isEmpty }
            .sorted { $0.0 < $1.0 }
    }

    /// Distinct client ids connected to any room of a channel, in order of first appearance
    /// (rooms sorted by name).
    public func clientIDs(in channel: String) -> [String] {
        var seen = Set<String>(), ids: [String] = []
        for (_, members) in roomMembers(in: channel) {
            for member in members where seen.insert(member.id).inserted { ids.append(member.id) }
        }
        return ids
    }

    /// Up to `limit` stored messages before `offset` (newest of them), oldest first; the whole
    /// tail when `offset` is nil. `hasMore` tells whether older messages are kept.
    public func history(of key: RoomKey, before offset: Int64? = nil, limit: Int) -> (messages: [Message], hasMore: Bool) {
        guard let room = try? self.room(key, create: false) else { return ([], false) }
        return room.lock.withLock { locked in
            let bound = offset ?? Int64.max
            let page = locked.state.history.before(bound, limit: limit)
            let oldestKept = locked.state.history.all.first?.offset ?? 0
            let hasMore = (page.first?.offset ?? bound) > max(oldestKept, 1)
            return (page, hasMore && !page.isEmpty)
        }
    }

    /// The offset of the newest stored message of a room (0 when none).
    public func lastOffset(of key: RoomKey) -> Int64 {
        guard let room = try? self.room(key, create: false) else {
            return recovered.withLock { $0.offsets[key] ?? 0 }
        }
        return room.lock.withLock { $0.storedOffset }
    }

    /// Up to `limit` stored messages before `offset` (the newest when nil), oldest first,
    /// read from the store: any amount of history, page by page. `completion` runs on a
    /// store thread. This is the call for every door (native `history`, Socket.IO, REST).
    public func storedHistory(of key: RoomKey, before offset: Int64? = nil, limit: Int,
                              completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        store.messages(in: key, before: offset, limit: limit, completion: completion)
    }

    /// Stored messages after `offset`, oldest first (at most `limit`), from the store.
    public func storedMessages(of key: RoomKey, after offset: Int64, limit: Int,
                               completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        store.messages(in: key, after: offset, limit: limit, completion: completion)
    }
}

/// One room behind its lock, with the inboxes that serve its subscribers.
final class Room: Sendable {
    /// A client message id seen in this room: the original's id and offset, and who waits
    /// for it to be stored (nil once stored).
    struct Remembered {
        let id: String
        let offset: Int64
        let timestampMillis: Int64
        var waiters: [@Sendable (Result<Message, ParleyError>) -> Void]?
    }

    struct Locked {
        var state: RoomState
        /// The newest offset the store has confirmed; subscribers have seen exactly 1…this.
        var storedOffset: Int64 = 0
        /// Bumped when a write fails, so the failures that follow rewind only once.
        var epoch: UInt64 = 0
        /// Sessions whose subscribe waits for the store, with the token of that subscribe.
        var pending: [SessionID: UInt64] = [:]
        /// Subscribes waiting until the store has everything up to an offset.
        var storeWaiters: [(offset: Int64, resume: @Sendable () -> Void)] = []
        var remembered: [String: Remembered] = [:]
        /// Client message ids in the order they were seen, to forget them after the window.
        var rememberedOrder: [(timestampMillis: Int64, messageID: String)] = []
        var rememberedStart = 0

        mutating func remember(_ messageID: String, _ entry: Remembered) {
            remembered[messageID] = entry
            rememberedOrder.append((entry.timestampMillis, messageID))
        }

        mutating func forget(before millis: Int64) {
            while rememberedStart < rememberedOrder.count, rememberedOrder[rememberedStart].timestampMillis < millis {
                let id = rememberedOrder[rememberedStart].messageID
                if remembered[id]?.timestampMillis ?? .max < millis, remembered[id]?.waiters == nil { remembered[id] = nil }
                rememberedStart += 1
            }
            if rememberedStart > 1024 && rememberedStart * 2 > rememberedOrder.count {
                rememberedOrder.removeFirst(rememberedStart)
                rememberedStart = 0
            }
        }

        /// Whether memory holds the newest `historyCount` stored messages and every stored
        /// message after `offset`.
        func covers(historyCount: Int, after offset: Int64) -> Bool {
            let first = state.history.all.first?.offset ?? (storedOffset + 1)
            let wanted = min(Int64(historyCount), storedOffset)
            return first <= offset + 1 && (wanted == 0 || first <= storedOffset - wanted + 1)
        }

        func latest(_ count: Int) -> [Message] { state.history.latest(count) }
        func tail(after offset: Int64) -> [Message] { offset >= storedOffset ? [] : state.history.after(offset) }
        /// Inbox → how many of the room's sessions it serves.
        var inboxes: [ObjectIdentifier: (inbox: any Inbox, count: Int)] = [:]
        var sessionInbox: [SessionID: ObjectIdentifier] = [:]

        mutating func addInbox(_ inbox: any Inbox, for session: SessionID) {
            let id = ObjectIdentifier(inbox)
            sessionInbox[session] = id
            inboxes[id, default: (inbox, 0)].count += 1
        }

        mutating func removeInbox(for session: SessionID) -> (any Inbox)? {
            guard let id = sessionInbox.removeValue(forKey: session), let entry = inboxes[id] else { return nil }
            if entry.count <= 1 { inboxes.removeValue(forKey: id) } else { inboxes[id]!.count -= 1 }
            return entry.inbox
        }
    }

    let lock: Mutex<Locked>

    init(_ state: RoomState) { lock = Mutex(Locked(state: state)) }
    init(_ locked: Locked) { lock = Mutex(locked) }
}

extension RoomState {
    mutating func typingExpire(nowMillis: Int64) -> [Member] {
        var tracker = typing
        let expired = tracker.expire(nowMillis: nowMillis)
        replaceTyping(tracker)
        return expired
    }
}

/// Hands an append's result to whoever finishes second: the publisher still holding the room
/// lock (the store answered before `append` returned, e.g. in memory), or the store's thread.
private final class AppendHandoff: Sendable {
    private enum State { case waiting, early(Result<Void, ParleyError>), returned }
    private let state = Mutex<State>(.waiting)

    /// Store side: true when the publisher will handle the result itself.
    func resolveEarly(_ result: Result<Void, ParleyError>) -> Bool {
        state.withLock { state in
            guard case .waiting = state else { return false }
            state = .early(result)
            return true
        }
    }

    /// Publisher side, once `append` returned: the result if it already came.
    func returned() -> Result<Void, ParleyError>? {
        state.withLock { state in
            if case .early(let result) = state { return result }
            state = .returned
            return nil
        }
    }
}
