extension Hub {
    /// Adds `session` to `key` as `member`. Its inbox gets `.subscribed` with the snapshot:
    /// up to `historyCount` recent messages, and with `since`, every stored message after that
    /// offset in `replay`; everything later reaches it live, with no gap and no duplicate. The
    /// others get `.memberJoined`. The snapshot comes once the join has gone through the
    /// broker (and the history, when memory does not hold it, has been read), so it holds
    /// everything published before this call. Subscribing twice is harmless: the second gets
    /// a fresh snapshot and nobody sees a join.
    public func subscribe(_ session: SessionID, as member: Member, to key: RoomKey, inbox: any Inbox,
                          historyCount: Int = 0, since: Int64? = nil) throws(ParleyError) {
        let token = subscribeTokens.wrappingAdd(1, ordering: .relaxed).newValue
        let entry = NodeRoom.Session(member: member, inbox: inbox, stage: .awaitingRoom, token: token,
                                      historyCount: max(0, historyCount), since: since, start: nil)
        try enter(session, entry, to: key)
    }

    /// Adds `session` to `key` as a listener: its inbox gets `.subscribed` (with the member
    /// list of an observable room) and then the room's events, like a member's, but nobody
    /// sees it join or leave and it takes no member's place. For doors whose protocol sends
    /// room events to connections that have not identified (SocketChat's `io.emit`). Leave
    /// with ``unsubscribe(_:from:)``. A session is either a listener or a member of a room:
    /// use another session id for each.
    public func listen(_ session: SessionID, to key: RoomKey, inbox: any Inbox) throws(ParleyError) {
        let token = subscribeTokens.wrappingAdd(1, ordering: .relaxed).newValue
        var entry = NodeRoom.Session(member: Member(id: ""), inbox: inbox, stage: .awaitingRoom, token: token,
                                      historyCount: 0, since: nil, start: nil)
        entry.listensOnly = true
        try enter(session, entry, to: key)
    }

    private func enter(_ session: SessionID, _ entry: NodeRoom.Session, to key: RoomKey) throws(ParleyError) {
        let limit = configuration.maxMembersPerRoom
        let member = entry.member
        let now = clock.nowMillis()
        let (room, created) = try rooms.withLock { rooms throws(ParleyError) -> (NodeRoom, Bool) in
            if let room = rooms[key] { return (room, false) }
            guard rooms.count < configuration.maxRooms else {
                throw ParleyError(.limitReached, "this server holds its maximum of \(configuration.maxRooms) rooms")
            }
            let room = NodeRoom(key: key, configuration: configuration, budget: historyBudget, nowMillis: now)
            rooms[key] = room
            channelRooms.withLock { Self.count(&$0, key.channel, 1) }
            return (room, true)
        }
        enum Next { case wait, announce, done, read(@Sendable () -> Void) }
        let next = try room.lock.withLock { state throws(ParleyError) -> Next in
            state.lastActivityMillis = now
            if let existing = state.sessions[session], case .live = existing.stage {
                // Already in: a fresh snapshot from memory, and no join for anybody.
                let snapshot = SubscribeSnapshot(room: key, members: key.isObservable ? state.presence.members.list() : [],
                                                 history: state.history.before(.max, limit: entry.historyCount,
                                                                                        maxBytes: configuration.historyPageBytes),
                                                 lastOffset: state.deliveredOffset)
                entry.inbox.post(.subscribed(session, snapshot))
                return .done
            }
            guard entry.listensOnly || state.presence.members.contains(member.id) || state.presence.members.count < limit else {
                throw ParleyError(.limitReached, "room \(key.room) is full (\(limit) members)")
            }
            var entry = entry
            if case .live = state.phase { entry.stage = .awaitingJoin }
            // A second subscribe while the first is on its way keeps what waits for the join.
            entry.held = state.sessions[session]?.held ?? []
            state.sessions[session] = entry
            guard state.phase == .live else { return .wait }
            // A listener has no join to wait for: it starts here, after what was delivered.
            if entry.listensOnly {
                return complete(session, in: room, state: &state).map(Next.read) ?? .done
            }
            return .announce
        }
        if created {
            broker.subscribe(key) { [self] result in subscribed(room, result) }
        } else {
            switch next {
            case .announce: announceJoin(member, in: room, session: session, token: entry.token)
            case .read(let read): read()
            case .wait, .done: break
            }
        }
    }

    /// The broker subscription is in place (or failed): seed the room from presence, then
    /// announce the waiting sessions' joins.
    private func subscribed(_ room: NodeRoom, _ result: Result<RoomPosition, ParleyError>) {
        switch result {
        case .failure(let error):
            failAll(room, error)
        case .success(let position):
            presence.members(of: room.key, limit: configuration.maxMembersPerRoom) { [self] result in
                switch result {
                case .failure(let error):
                    failAll(room, error)
                case .success(let (members, _)):
                    var reads: [@Sendable () -> Void] = []
                    let waiting = room.lock.withLock { state -> [(SessionID, NodeRoom.Session)] in
                        state.phase = .live
                        state.presence.members = MemberMirror(members)
                        state.deliveredOffset = position.stored
                        let buffered = state.buffered
                        state.buffered = []
                        for event in buffered { _ = apply(event, to: &state) }
                        var waiting: [(SessionID, NodeRoom.Session)] = []
                        for (id, session) in state.sessions where session.stage == .awaitingRoom {
                            state.sessions[id]!.stage = .awaitingJoin
                            // They start where the node's subscription starts (their subscribe
                            // came first): what is published meanwhile reaches them as replay.
                            state.sessions[id]!.start = position.published
                            if session.listensOnly {
                                if let read = complete(id, in: room, state: &state) { reads.append(read) }
                            } else {
                                waiting.append((id, session))
                            }
                        }
                        return waiting
                    }
                    for read in reads { read() }
                    for (id, session) in waiting {
                        announceJoin(session.member, in: room, session: id, token: session.token)
                    }
                }
            }
        }
    }

    /// The room could not be followed: every session waiting for it is told, and the room
    /// leaves memory (the next subscribe tries again).
    private func failAll(_ room: NodeRoom, _ error: ParleyError) {
        let (failed, held) = room.lock.withLock { state -> ([(SessionID, any Inbox)], [@Sendable (ParleyError?) -> Void]) in
            let failed = state.sessions.map { ($0.key, $0.value.inbox) }
            let held = state.sessions.values.flatMap(\.held)
            state.sessions = [:]
            return (failed, held)
        }
        rooms.withLock {
            guard $0[room.key] === room else { return }
            $0[room.key] = nil
            channelRooms.withLock { Self.count(&$0, room.key.channel, -1) }
        }
        for publish in held { publish(error) }
        for (session, inbox) in failed {
            var snapshot = SubscribeSnapshot(room: room.key, members: [], history: [], lastOffset: 0)
            snapshot.failure = error
            inbox.post(.subscribed(session, snapshot))
        }
    }

    /// Adds the member to the room's presence and sends its join through the broker; the
    /// session completes when the join is delivered back here.
    private func announceJoin(_ member: Member, in room: NodeRoom, session: SessionID, token: UInt64) {
        presence.add(member, to: room.key) { [self] result in
            switch result {
            case .success:
                broker.broadcast(.memberJoined(member), in: room.key)
            case .failure(let error):
                failSubscribe(room, session: session, token: token, error: error)
            }
        }
    }

    /// A delivered join completes the subscribes waiting for it (lock held). Returns the
    /// store reads to start once unlocked.
    func joinArrived(_ member: Member, in room: NodeRoom, state: inout NodeRoom.State) -> [@Sendable () -> Void] {
        var reads: [@Sendable () -> Void] = []
        for (id, session) in state.sessions where session.stage == .awaitingJoin && session.member.id == member.id {
            if let read = complete(id, in: room, state: &state) { reads.append(read) }
            // What it sent meanwhile goes out now, after its join in the room's order: from
            // its inbox, not from inside the broker's delivery. What it sends until then
            // queues behind (see ``hold``).
            if !session.held.isEmpty {
                session.inbox.post(.perform { [self] in releaseHeld(id, in: room) })
            }
        }
        return reads
    }

    /// Sends the publishes `session` made while its join was on its way, in order.
    private func releaseHeld(_ session: SessionID, in room: NodeRoom) {
        let held = room.lock.withLock { state -> [@Sendable (ParleyError?) -> Void] in
            guard let held = state.sessions[session]?.held else { return [] }
            state.sessions[session]!.held = []
            return held
        }
        for publish in held { publish(nil) }
    }

    /// Completes a subscribe from memory when it holds what is needed; else marks it reading
    /// and returns the store read to start once unlocked.
    private func complete(_ id: SessionID, in room: NodeRoom, state: inout NodeRoom.State) -> (@Sendable () -> Void)? {
        guard let session = state.sessions[id] else { return nil }
        let delivered = state.deliveredOffset
        // With `since`: everything after it as replay, and the newest history. Without: the
        // session starts at `start` (or now), with the history up to there.
        let from: Int64, historyEnd: Int64
        if let since = session.since {
            from = min(max(since, 0), delivered)
            historyEnd = delivered
        } else {
            from = min(session.start ?? delivered, delivered)
            historyEnd = from
        }
        guard state.covers(historyCount: session.historyCount, endingAt: historyEnd, after: from) else {
            state.sessions[id]!.stage = .reading
            let token = session.token
            return { [self] in readHistory(room: room, session: id, token: token, historyCount: session.historyCount,
                                           endingAt: historyEnd, from: from, upTo: delivered) }
        }
        goLive(id, in: room, state: &state,
               history: state.history.before(historyEnd + 1, limit: session.historyCount, maxBytes: configuration.historyPageBytes),
               replay: state.tail(after: from))
        return nil
    }

    private func goLive(_ id: SessionID, in room: NodeRoom, state: inout NodeRoom.State, history: [Message], replay: [Message]) {
        guard let session = state.sessions[id] else { return }
        state.sessions[id]!.stage = .live
        state.addInbox(session.inbox)
        // Only observable rooms show their members: copying a large room's list on every
        // join made subscribing O(members) in time and transient memory.
        var snapshot = SubscribeSnapshot(room: room.key, members: room.key.isObservable ? state.presence.members.list() : [],
                                         history: history, lastOffset: state.deliveredOffset)
        snapshot.replay = replay
        session.inbox.post(.subscribed(id, snapshot))
    }

    /// Reads the history and the first replay page a subscriber needs from the store, then
    /// catches up with what was delivered meanwhile and completes it (or starts a paged
    /// replay when there is more than a page).
    private func readHistory(room: NodeRoom, session: SessionID, token: UInt64, historyCount: Int,
                             endingAt historyEnd: Int64, from: Int64, upTo stored: Int64) {
        let store = self.store
        let key = room.key
        let page = configuration.replayPageSize
        let maxBytes = configuration.historyPageBytes
        func history(_ done: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
            if historyCount == 0 { done(.success(MessagePage(messages: [], hasMore: false))); return }
            subscriptionRead(maxBytes, done) { store.messages(in: key, before: historyEnd + 1, limit: historyCount, maxBytes: maxBytes, completion: $0) }
        }
        history { historyResult in
            let replay: (@escaping @Sendable (Result<[Message], ParleyError>) -> Void) -> Void = { done in
                if stored <= from { done(.success([])); return }
                self.subscriptionRead(maxBytes, done) {
                    store.messages(in: key, after: from, limit: min(page, Int(stored - from)), maxBytes: maxBytes, completion: $0)
                }
            }
            replay { replayResult in
                switch (historyResult, replayResult) {
                case (.success(let history), .success(let replay)):
                    self.catchUp(room: room, session: session, token: token, history: history.messages, replay: replay,
                                 upTo: replay.last?.offset ?? from)
                case (.failure(let error), _), (_, .failure(let error)):
                    self.failSubscribe(room, session: session, token: token, error: error)
                }
            }
        }
    }

    /// The session has `replay` up to offset `read` ready: when memory covers the rest it
    /// goes live with it; when less than a page is missing (``HubConfiguration/replayPageSize``
    /// messages, ``HubConfiguration/historyPageBytes`` bytes), that is read and it tries
    /// again; otherwise `replay` goes out as a page and the rest follows page by page.
    private func catchUp(room: NodeRoom, session: SessionID, token: UInt64, history: [Message]?, replay: [Message], upTo read: Int64) {
        enum Next { case done, readMore(after: Int64, limit: Int, maxBytes: Int) }
        let page = configuration.replayPageSize
        let budget = configuration.historyPageBytes
        let replayBytes = replay.reduce(0) { $0 + $1.approximateSize }
        let next = room.lock.withLock { state -> Next in
            guard let entry = state.sessions[session], entry.token == token else { return .done }
            switch entry.stage {
            case .reading, .replaying(_, true): break
            default: return .done
            }
            let delivered = state.deliveredOffset
            if delivered <= read || state.covers(historyCount: 0, endingAt: read, after: read) {
                // Memory holds the rest (at most the history cache): finish with it, live.
                let rest = delivered > read ? state.tail(after: read) : []
                if let history {
                    goLive(session, in: room, state: &state, history: history, replay: replay + rest)
                } else {
                    state.sessions[session]!.stage = .live
                    state.addInbox(entry.inbox)
                    entry.inbox.post(.replay(session, room.key, replay + rest, complete: true))
                }
                return .done
            } else if replay.count < page && replayBytes < budget {
                return .readMore(after: read, limit: min(page - replay.count, Int(delivered - read)), maxBytes: budget - replayBytes)
            }
            // A full page: send it and wait until the session asks for the next.
            state.sessions[session]!.stage = .replaying(after: read, requested: false)
            if let history {
                var snapshot = SubscribeSnapshot(room: room.key, members: room.key.isObservable ? state.presence.members.list() : [],
                                                 history: history, lastOffset: state.deliveredOffset)
                snapshot.replay = replay
                snapshot.replayComplete = false
                entry.inbox.post(.subscribed(session, snapshot))
            } else {
                entry.inbox.post(.replay(session, room.key, replay, complete: false))
            }
            return .done
        }
        guard case .readMore(let after, let limit, let maxBytes) = next else { return }
        let store = self.store
        subscriptionRead(maxBytes, { result in
            switch result {
            case .success(let more):
                self.catchUp(room: room, session: session, token: token, history: history, replay: replay + more,
                             upTo: more.last?.offset ?? after)
            case .failure(let error):
                self.failSubscribe(room, session: session, token: token, error: error)
            }
        }) { store.messages(in: room.key, after: after, limit: limit, maxBytes: maxBytes, completion: $0) }
    }

    /// A store read a subscription needs (its history, a page of its replay), counted in the
    /// server-wide bound on history being read (``HistoryReadGate``): it waits for its turn
    /// rather than being refused, so a crowd of resuming clients reads a bounded amount at
    /// once. `completion` runs before the read's bytes are released.
    func subscriptionRead<T: Sendable>(_ bytes: Int, _ completion: @escaping @Sendable (Result<T, ParleyError>) -> Void,
                                       read: @escaping @Sendable (@escaping @Sendable (Result<T, ParleyError>) -> Void) -> Void) {
        let gate = historyReads
        let started = gate.reserveOrWait(bytes) {
            read { result in
                completion(result)
                gate.release(bytes)
            }
        }
        if !started { completion(.failure(Self.tooMuchHistory)) }
    }

    /// The session has written its last replay page and wants the next (see
    /// ``SubscribeSnapshot/replayComplete``).
    public func continueReplay(_ session: SessionID, in key: RoomKey) {
        guard let room = rooms.withLock({ $0[key] }) else { return }
        let position = room.lock.withLock { state -> (after: Int64, token: UInt64, upTo: Int64)? in
            guard let entry = state.sessions[session], case .replaying(let after, false) = entry.stage else { return nil }
            state.sessions[session]!.stage = .replaying(after: after, requested: true)
            return (after, entry.token, state.deliveredOffset)
        }
        guard let position else { return }
        let limit = max(1, min(configuration.replayPageSize, Int(position.upTo - position.after)))
        let (store, maxBytes) = (self.store, configuration.historyPageBytes)
        subscriptionRead(maxBytes, { (result: Result<[Message], ParleyError>) in
            switch result {
            case .success(let page):
                self.catchUp(room: room, session: session, token: position.token, history: nil, replay: page,
                             upTo: page.last?.offset ?? position.after)
            case .failure(let error):
                self.failSubscribe(room, session: session, token: position.token, error: error)
            }
        }) { store.messages(in: key, after: position.after, limit: limit, maxBytes: maxBytes, completion: $0) }
    }

    private func failSubscribe(_ room: NodeRoom, session: SessionID, token: UInt64, error: ParleyError) {
        let member = room.lock.withLock { state -> (Member, Bool, [@Sendable (ParleyError?) -> Void])? in
            guard let entry = state.sessions[session], entry.token == token else { return nil }
            state.sessions[session] = nil
            var snapshot = SubscribeSnapshot(room: room.key, members: [], history: [], lastOffset: state.deliveredOffset)
            snapshot.failure = error
            entry.inbox.post(.subscribed(session, snapshot))
            return (entry.member, entry.listensOnly, entry.held)
        }
        guard let (member, listensOnly, held) = member else { return }
        for publish in held { publish(error) }
        if !listensOnly { announceLeave(member, in: room.key) }
    }

    /// Removes `session` from `key`: its inbox gets `.unsubscribed` at once, the others
    /// `.memberLeft` once the leave has gone through the broker. Returns false when it was
    /// not in the room.
    @discardableResult
    public func unsubscribe(_ session: SessionID, from key: RoomKey) -> Bool {
        guard let room = rooms.withLock({ $0[key] }) else { return false }
        let now = clock.nowMillis()
        let left = room.lock.withLock { state -> NodeRoom.Session? in
            guard let entry = state.sessions.removeValue(forKey: session) else { return nil }
            state.lastActivityMillis = now
            if case .live = entry.stage {
                state.removeInbox(entry.inbox)
                entry.inbox.post(.unsubscribed(session, key))
            }
            return entry
        }
        guard let left else { return false }
        let gone = ParleyError(.unavailable, "left \(key.room) before the join completed; message not sent")
        for publish in left.held { publish(gone) }
        // A session that never got past the node's own subscription was never announced.
        if left.stage != .awaitingRoom, !left.listensOnly { announceLeave(left.member, in: key) }
        return true
    }

    private func announceLeave(_ member: Member, in key: RoomKey) {
        stopLocalTyping(member, in: key)
        presence.remove(member, from: key) { [self] result in
            if case .success(true) = result { broker.broadcast(.memberLeft(member), in: key) }
        }
    }
}
