import ParleyCore

/// Users' read state, direct rooms and the inbox, for every door that offers them
/// (docs/protocols.md, "Users"). A session whose member has no lasting user (no token claim,
/// no `user_id`) reads and marks like any other; its conversations last as long as the
/// connection's id is used.
extension ChatSession {
    /// The member's user, for read state: its user id, or the member id.
    var user: String? { member?.user }

    /// Whether the user outlives the connection (a token's claim, or a chosen id): only then
    /// does joining a room make it one of the user's conversations.
    var hasLastingUser: Bool { member?.userID != nil }

    /// The user's own mark of `key` now, as stores take it (name and receipt setting).
    private func mark(_ key: RoomKey, offset: Int64) -> ReadMark? {
        guard let member else { return nil }
        return ReadMark(user: member.user, room: key, offset: offset, name: ReadMark.clipped(member.displayName),
                        sharesReceipts: sharesReceipts, updatedMillis: context.nowMillis)
    }

    /// Joined `key`: the room is one of the user's conversations from now on (a direct room is
    /// one of each of its users'). Their live inboxes hear of a conversation new to them.
    func noteConversation(_ key: RoomKey) {
        guard hasLastingUser, let own = mark(key, offset: 0) else { return }
        var marks = [own]
        for other in DirectRoom.users(of: key.room) ?? [] where other != own.user {
            marks.append(ReadMark(user: other, room: key, offset: 0, name: "", sharesReceipts: true, updatedMillis: own.updatedMillis))
        }
        record(marks, in: key) { _ in }
    }

    /// Records `marks` of `key` (a direct room's for each of its users), announcing each
    /// conversation that is new to its user; `completion` gets the first failure, if any.
    private func record(_ marks: [ReadMark], in key: RoomKey, completion: @escaping @Sendable (ParleyError?) -> Void) {
        let (reads, hub, channel) = (context.reads, context.hub, key.channel)
        // Marks made for the other users of a direct room never push their own conversations out.
        gather(marks, { mark, done in reads.record(mark, evicting: !mark.name.isEmpty, completion: done) }) { result in
            switch result {
            case .success(let updates):
                for update in updates where update.added { hub.announceConversation(key.room, to: update.mark.user, in: channel) }
                completion(nil)
            case .failure(let error):
                completion(error)
            }
        }
    }

    /// Marks `room` read up to `offset` (capped at the room's newest offset; a mark never moves
    /// back), within the message rate. The room's sessions hear of it (`read`; a private
    /// mark only the user's own). `completion` gets the mark as stored, on a store thread.
    func markRead(_ room: String, upTo offset: Int64,
                  completion: @escaping @Sendable (Result<ReadMark, ChatRefusal>) -> Void) -> ChatRefusal? {
        guard member != nil, let key = key(room) else { return ChatRefusal(.notIdentified, "handshake first") }
        if case .failure(let refusal) = check(.subscribe, room: room) { return refusal }
        if let refusal = admitRate() { return refusal }
        guard let mark = mark(key, offset: offset) else { return ChatRefusal(.notIdentified, "handshake first") }
        context.hub.markRead(mark, in: context.reads) { completion($0.mapError { ChatRefusal(.refused, $0.message) }) }
        return nil
    }

    /// Opens the direct room of the member's user and `users` (made on first use by any of
    /// them): every one of them has it among their conversations, and their live inboxes hear
    /// of it. `completion` gets the room's name, on a store thread.
    func openDirect(with users: [String], completion: @escaping @Sendable (Result<String, ChatRefusal>) -> Void) -> ChatRefusal? {
        guard let member, let channel else { return ChatRefusal(.notIdentified, "handshake first") }
        guard users.count < DirectRoom.maxUsers else {
            return ChatRefusal(.badDirectRoom, "a direct room holds at most \(DirectRoom.maxUsers) users")
        }
        let room: String
        switch DirectRoom.name(of: users + [member.user]) {
        case .success(let name): room = name
        case .failure(let problem): return ChatRefusal(.badDirectRoom, problem.message)
        }
        if case .failure(let refusal) = check(.subscribe, room: room) { return refusal }
        if let refusal = admitRate() { return refusal }
        let key = RoomKey(channel: channel, room: room)
        guard let own = mark(key, offset: 0) else { return ChatRefusal(.notIdentified, "handshake first") }
        let marks = [own] + (DirectRoom.users(of: room) ?? []).filter { $0 != own.user }.map {
            ReadMark(user: $0, room: key, offset: 0, name: "", sharesReceipts: true, updatedMillis: own.updatedMillis)
        }
        record(marks, in: key) { error in
            completion(error.map { .failure(ChatRefusal(.refused, $0.message)) } ?? .success(room))
        }
        return nil
    }

    /// The user's unread count in `key`, whose newest offset is `lastOffset`, and their mark.
    func unread(in key: RoomKey, lastOffset: Int64,
                completion: @escaping @Sendable (Result<(readOffset: Int64, count: UnreadCount), ParleyError>) -> Void) {
        guard let member else { return }
        let (reads, reader, name) = (context.reads, context.inboxReader, member.displayName)
        reads.mark(of: member.user, in: key) { result in
            switch result {
            case .failure(let error): completion(.failure(error))
            case .success(let mark):
                let offset = mark?.offset ?? 0
                reader.unread(of: member.user, name: name, in: key, after: offset, lastOffset: lastOffset) { result in
                    completion(result.map { (offset, $0) })
                }
            }
        }
    }

    /// The receipts of `key`: who read how far, furthest first, at most `users.receipts_listed`.
    func receipts(in key: RoomKey, completion: @escaping @Sendable (Result<[ReadReceipt], ParleyError>) -> Void) {
        context.reads.readers(of: key, limit: configuration.maxReceiptsListed, completion: completion)
    }

    /// The newest `limit` conversations of the member's user, within the history rate and the
    /// address's history bytes. A page costs what it read, not only what it sends: the newest
    /// message of each of the user's conversations (up to ``ReadStateStore/maxRoomsPerUser``)
    /// and the messages its unread counts read, charged once read, as a `history` page.
    func inbox(limit: Int, completion: @escaping @Sendable (Result<InboxRead, ParleyError>) -> Void)
        -> ChatRefusal? {
        guard let member, let channel else { return ChatRefusal(.notIdentified, "handshake first") }
        if needsToken { return ChatRefusal(.authRequired, "authentication required: this channel needs a token (send authenticate first)") }
        guard sessionGuard.admitHistoryRequest() else {
            return ChatRefusal(.historyRateLimited,
                               "history rate limit exceeded (\(Int(sessionGuard.historyRatePerSecond)) requests per second); try again shortly")
        }
        if let refusal = historyBudgetSpent() { return refusal }
        let charge = historyBytesCharge
        context.inboxReader.inbox(of: member.user, name: member.displayName, in: channel, limit: limit) { result in
            if case .success(let page) = result { charge(page.bytesRead) }
            completion(result)
        }
        return nil
    }

    /// The users of `room` (its members on every node, folded by user; the first
    /// `--max-members-listed` members), within the history rate: the token must let the
    /// session subscribe to it.
    func roomUsers(_ room: String, completion: @escaping @Sendable (Result<(users: [RoomUser], members: Int), ParleyError>) -> Void)
        -> ChatRefusal? {
        guard member != nil, let key = key(room) else { return ChatRefusal(.notIdentified, "handshake first") }
        if case .failure(let refusal) = check(.subscribe, room: room) { return refusal }
        guard sessionGuard.admitHistoryRequest() else {
            return ChatRefusal(.historyRateLimited,
                               "history rate limit exceeded (\(Int(sessionGuard.historyRatePerSecond)) requests per second); try again shortly")
        }
        context.hub.users(of: key, limit: configuration.maxMembersListed, completion: completion)
        return nil
    }

    /// One conversation of the member's user, read again (after a read, or when it joined).
    func conversation(_ key: RoomKey, completion: @escaping @Sendable (Result<Conversation?, ParleyError>) -> Void) {
        guard let member else { return }
        let (reads, reader, name) = (context.reads, context.inboxReader, member.displayName)
        reads.mark(of: member.user, in: key) { result in
            switch result {
            case .failure(let error): completion(.failure(error))
            case .success(nil): completion(.success(nil))
            case .success(let mark?): reader.conversation(mark, name: name) { completion($0.map { $0 }) }
            }
        }
    }
}
