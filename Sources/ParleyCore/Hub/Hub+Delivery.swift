extension Hub {
    /// One event the broker delivered for `key`, in the room's order.
    func deliver(_ event: RoomEvent, in key: RoomKey) {
        guard let room = rooms.withLock({ $0[key] }) else { return }
        var resynchronize = false
        let reads = room.lock.withLock { state -> [@Sendable () -> Void] in
            guard case .live = state.phase else {
                // Still subscribing: kept until the snapshot is in. A room that floods past
                // the bound is rebuilt from presence instead (messages are never lost: the
                // snapshot's offset and the store cover them).
                if state.buffered.count < configuration.maxBufferedEvents {
                    state.buffered.append(event)
                } else {
                    resynchronize = true
                }
                return []
            }
            if apply(event, to: &state) { state.post(.event(key, event), counting: room.backlog) }
            // A join completes the subscribes waiting for it, also when it shows nothing new
            // (a session subscribing twice).
            guard case .memberJoined(let member) = event else { return [] }
            return joinArrived(member, in: room, state: &state)
        }
        for read in reads { read() }
        if resynchronize { self.resynchronize(key) }
    }

    /// Applies `event` to the room's view; false when it changes nothing the sessions must
    /// see (a join of a member already present, a leave of one already gone, a message
    /// already delivered).
    /// Members and typists follow ``RoomPresence``'s rules, the ones every mirror of a room
    /// follows; history and the delivered offset are the hub's own.
    func apply(_ event: RoomEvent, to state: inout NodeRoom.State) -> Bool {
        switch event {
        case .message(let message) where !message.isEphemeral:
            guard message.offset > state.deliveredOffset else { return false }
            state.deliveredOffset = message.offset
            state.history.append(message)
        case .messageDeleted(let offset):
            state.history.markDeleted(offset)
        case .message, .memberJoined, .memberLeft, .roomClosed, .read, .conversationAdded:
            break
        }
        return state.presence.apply(event)
    }

    /// Rebuilds a room's members from presence after the broker may have lost joins or
    /// leaves: the sessions here are told the difference as ordinary joins and leaves, and a
    /// subscribe still waiting for its own join (which may have been among the lost events)
    /// completes when presence has its member. The room's recent history in memory starts
    /// over: an operator's delete (`messageDeleted`, not an entry of the log) may have been
    /// among the lost events, and the cache would go on serving the deleted text; the store
    /// has the tombstone.
    func resynchronize(_ key: RoomKey) {
        guard let room = rooms.withLock({ $0[key] }) else { return }
        room.lock.withLock { state in state.history.removeAll() }
        presence.members(of: key, limit: configuration.maxMembersPerRoom) { [self] result in
            guard case .success(let (members, _)) = result else { return }
            let reads = room.lock.withLock { state -> [@Sendable () -> Void] in
                guard case .live = state.phase else { return [] }
                let fresh = Set(members.map(\.id))
                for member in state.presence.members.list() where !fresh.contains(member.id) {
                    if apply(.memberLeft(member), to: &state) { state.post(.event(key, .memberLeft(member))) }
                }
                for member in members where apply(.memberJoined(member), to: &state) {
                    state.post(.event(key, .memberJoined(member)))
                }
                var waiting: [String: Member] = [:]
                for session in state.sessions.values where session.stage == .awaitingJoin && fresh.contains(session.member.id) {
                    waiting[session.member.id] = session.member
                }
                return waiting.values.flatMap { joinArrived($0, in: room, state: &state) }
            }
            for read in reads { read() }
        }
    }
}
