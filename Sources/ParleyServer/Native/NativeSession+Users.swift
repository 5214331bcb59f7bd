import ParleyCore
import ParleyIO

/// The native door's users commands and events (docs/protocols.md, "Users"): `read`, `dm`,
/// `inbox`, and a subscribe's `receipts` and `unread`.
extension NativeSession {
    func setOptions(receipts: Bool, unread: Bool, for key: RoomKey) {
        if receipts || unread { roomOptions[key] = (receipts, unread) } else { roomOptions[key] = nil }
        if !unread {
            unreadCounts[key] = nil
            unreadPending[key] = nil
            unreadRecounts.forget(key)
        }
        followsUsers = !roomOptions.isEmpty
    }

    /// A delivery in a room while some room follows users, or a receipt: whether the frame
    /// goes out. Receipts go to rooms that asked (a private one only to its own user); an
    /// own receipt reads the unread count again; a message counts as unread.
    func usersEvent(_ event: RoomEvent, in room: RoomKey, frame: IOBuffer) -> Bool {
        let options = roomOptions[room]
        switch event {
        case .read(let receipt):
            let own = receipt.user == chat.user
            if own, options?.unread == true { countUnread(in: room, lastOffset: nil) }
            return options?.receipts == true && (receipt.isShared || own)
        case .message(let message):
            guard options?.unread == true, message.offset > 0 else { return true }
            if unreadPending[room] != nil, unreadPending[room]!.count < Self.maxUnreadPending { unreadPending[room]!.append(message) }
            guard var state = unreadCounts[room], message.offset > state.readOffset,
                  let member = chat.member, UnreadCounter.counts(message, for: member.user) else { return true }
            state.count.add(message, for: member.user, name: member.displayName)
            unreadCounts[room] = state
            webSocket.sendPreEncoded(frame)
            sendJSON(NativeEncoding.unread(room: room, readOffset: state.readOffset, state.count))
            return false
        case .messageDeleted(let offset):
            // An operator's delete of a message the count may hold takes it out (and its
            // mention): read the count again (paced). Not for an author's delete: any member
            // can make those at the publish rate, and each would make every follower of the
            // room read the store (a room of a thousand, four thousand reads a second).
            if options?.unread == true, let state = unreadCounts[room], offset > state.readOffset { countUnread(in: room, lastOffset: nil) }
            return true
        default:
            return true
        }
    }

    /// The room's subscribe is in place: its `receipts` list and `unread` count, if asked for.
    func subscribed(_ snapshot: SubscribeSnapshot) {
        guard let options = roomOptions[snapshot.room] else { return }
        let me = LoopBound(self, on: connection.loop), room = snapshot.room
        if options.receipts {
            chat.receipts(in: room) { result in
                guard case .success(let readers) = result else { return }
                me.execute { session in
                    guard session.roomOptions[room]?.receipts == true else { return }
                    session.sendJSON(NativeEncoding.receipts(room: room, readers))
                }
            }
        }
        if options.unread { countUnread(in: room, lastOffset: snapshot.lastOffset) }
    }

    /// Reads the room's unread count from the stores and sends it (`unread`): now, or paced
    /// (``unreadRecounts``) when one is out or the last was less than 250 ms ago.
    func countUnread(in room: RoomKey, lastOffset: Int64?) {
        pacedUnreadCount(room, unreadRecounts.ask(room, now: context.nowMillis), lastOffset: lastOffset)
    }

    private func pacedUnreadCount(_ room: RoomKey, _ decision: RefreshPacer<RoomKey>.Decision, lastOffset: Int64? = nil) {
        let me = LoopBound(self, on: connection.loop)
        decision.carryOut(on: connection.loop, start: { readUnreadCount(in: room, lastOffset: lastOffset) }) {
            me.run { session in session.pacedUnreadCount(room, session.unreadRecounts.due(room, now: session.context.nowMillis)) }
        }
    }

    /// The read of `room`'s count is over (answered or failed): one more when asked meanwhile.
    private func unreadCountEnded(_ room: RoomKey) {
        pacedUnreadCount(room, unreadRecounts.ended(room, now: context.nowMillis))
    }

    private func readUnreadCount(in room: RoomKey, lastOffset: Int64?) {
        let me = LoopBound(self, on: connection.loop)
        if unreadPending[room] == nil { unreadPending[room] = [] }
        guard let lastOffset else {
            context.hub.lastOffset(of: room) { result in
                guard case .success(let last) = result else { return me.execute { $0.unreadCountEnded(room) } }
                me.execute { $0.readUnreadCount(in: room, lastOffset: last) }
            }
            return
        }
        chat.unread(in: room, lastOffset: lastOffset) { result in
            guard case .success(let (offset, count)) = result else { return me.execute { $0.unreadCountEnded(room) } }
            me.execute { session in
                defer { session.unreadCountEnded(room) }
                guard session.roomOptions[room]?.unread == true, let member = session.chat.member else { return }
                // What was delivered while the store was read, and the count has not seen.
                var count = count
                for message in session.unreadPending.removeValue(forKey: room) ?? []
                where message.offset > max(count.through, offset) {
                    count.add(message, for: member.user, name: member.displayName)
                }
                session.unreadCounts[room] = (offset, count)
                session.sendJSON(NativeEncoding.unread(room: room, readOffset: offset, count))
            }
        }
    }

    func markRead(_ room: String, upTo offset: Int64, callback: Int?) {
        let me = LoopBound(self, on: connection.loop)
        let refusal = chat.markRead(room, upTo: offset) { result in
            me.execute { session in
                switch result {
                case .success(let mark): if let callback { session.sendJSON(NativeEncoding.readMark(callback: callback, mark)) }
                case .failure(let refusal): session.sendJSON(NativeEncoding.refusal(callback: callback, refusal))
                }
            }
        }
        if let refusal { sendJSON(NativeEncoding.refusal(callback: callback, refusal)) }
    }

    func openDirect(with users: [String], callback: Int?) {
        let me = LoopBound(self, on: connection.loop)
        let refusal = chat.openDirect(with: users) { result in
            me.execute { session in
                switch result {
                case .success(let room): session.sendJSON(NativeEncoding.directRoom(callback: callback, room))
                case .failure(let refusal): session.sendJSON(NativeEncoding.refusal(callback: callback, refusal))
                }
            }
        }
        if let refusal { sendJSON(NativeEncoding.refusal(callback: callback, refusal)) }
    }

    func inbox(limit: Int, watch: Bool?, callback: Int?) {
        if watch == false { stopWatchingInbox() }
        let me = LoopBound(self, on: connection.loop)
        let refusal = chat.inbox(limit: limit) { result in
            me.execute { session in
                switch result {
                case .success(let page):
                    session.sendJSON(NativeEncoding.inbox(callback: callback, page.conversations, hasMore: page.hasMore))
                    if watch == true { session.watchInbox(page.conversations) }
                case .failure(let error):
                    session.sendJSON(NativeEncoding.reply(callback: callback, error: error.message))
                }
            }
        }
        if let refusal { sendJSON(NativeEncoding.refusal(callback: callback, refusal)) }
    }

    /// A push command: refused now (the reply says why), or answered `{callback}` (or with
    /// the error) once the push store has it.
    func answerPush(_ callback: Int?, _ start: (@escaping @Sendable (ParleyError?) -> Void) -> ChatRefusal?) {
        let me = LoopBound(self, on: connection.loop)
        let refusal = start { error in
            me.execute { session in
                if let error { session.sendJSON(NativeEncoding.reply(callback: callback, error: error.message)) }
                else if let callback { session.sendJSON(NativeEncoding.reply(callback: callback)) }
            }
        }
        if let refusal { sendJSON(NativeEncoding.refusal(callback: callback, refusal)) }
    }

    func roomUsers(_ room: String, callback: Int?) {
        let me = LoopBound(self, on: connection.loop)
        let refusal = chat.roomUsers(room) { result in
            me.execute { session in
                switch result {
                case .success(let found): session.sendJSON(NativeEncoding.roomUsers(callback: callback, found.users, members: found.members))
                case .failure(let error): session.sendJSON(NativeEncoding.reply(callback: callback, error: error.message))
                }
            }
        }
        if let refusal { sendJSON(NativeEncoding.refusal(callback: callback, refusal)) }
    }

    /// Follows `conversations` (and any that join later) until the connection ends.
    func watchInbox(_ conversations: [Conversation]) {
        guard connection.state == .open, let member = chat.member, let channel = chat.channel else { return }
        let watch = inboxWatch ?? {
            let watch = InboxWatch(session: self, sessionID: sessionID | (1 << 46), user: member.user, name: member.displayName,
                                   channel: channel, limit: context.configuration.maxInboxWatchRooms)
            context.loopHub(connection.loop).register(watch)
            watch.listen(to: RoomKey(channel: channel, room: ReservedRoom.noticeRoom(of: member.user)))
            inboxWatch = watch
            return watch
        }()
        for conversation in conversations.reversed() { watch.follow(conversation) }
    }

    func stopWatchingInbox() {
        guard let watch = inboxWatch else { return }
        inboxWatch = nil
        watch.stop()
    }

    /// A conversation of the live inbox changed.
    func conversationChanged(_ conversation: Conversation) {
        guard connection.state == .open else { return }
        sendJSON(NativeEncoding.conversationUpdate(conversation))
    }
}

extension RoomEvent {
    /// A read receipt (checked on every native delivery, so a cheap test).
    @inline(__always) var isRead: Bool { if case .read = self { true } else { false } }
}

/// A native session's live inbox: it listens to the user's newest conversations (no
/// membership: nobody sees it join) and to the user's notice room, keeps each conversation
/// current from the deliveries, and tells the session of every change. Confined to the
/// session's loop; it lives as long as the session watches.
final class InboxWatch: RoomSubscriber {
    let sessionID: SessionID
    let wireFormat = WireFormat.native
    /// The session owns the watch and stops it before it goes (``NativeSession/stopWatchingInbox()``).
    private unowned let session: NativeSession
    private let user: String
    private let name: String
    private let channel: String
    private let limit: Int
    private var conversations: [RoomKey: Conversation] = [:]
    /// Followed rooms, least recently active first.
    private var order: [RoomKey] = []
    private var listening: Set<RoomKey> = []
    /// Reads of a conversation again on events (an action on its newest message, a delete, an
    /// own receipt, a new conversation): one at a time per room, at most one every 250 ms.
    private var refreshes = RefreshPacer<RoomKey>(intervalMillis: NativeSession.usersRefreshMillis)

    init(session: NativeSession, sessionID: SessionID, user: String, name: String, channel: String, limit: Int) {
        self.session = session
        self.sessionID = sessionID
        self.user = user
        self.name = name
        self.channel = channel
        self.limit = limit
    }

    func listen(to key: RoomKey) {
        guard listening.insert(key).inserted else { return }
        do {
            try session.context.hub.listen(sessionID, to: key, inbox: session.context.inbox(session.connection.loop))
        } catch {
            listening.remove(key)
        }
    }

    /// Follows `conversation` from now on; past the limit, the least recently active goes.
    func follow(_ conversation: Conversation) {
        guard limit > 0 else { return }
        let key = conversation.room
        conversations[key] = conversation
        order.removeAll { $0 == key }
        order.append(key)
        listen(to: key)
        while order.count > limit {
            let gone = order.removeFirst()
            conversations[gone] = nil
            refreshes.forget(gone)
            if listening.remove(gone) != nil { session.context.hub.unsubscribe(sessionID, from: gone) }
        }
    }

    func stop() {
        for key in listening { session.context.hub.unsubscribe(sessionID, from: key) }
        listening.removeAll()
        session.context.loopHub(session.connection.loop).unregister(sessionID)
    }

    func receive(_ event: RoomEvent, in room: RoomKey, frame: IOBuffer?) {
        switch event {
        case .conversationAdded(let added) where room.room == ReservedRoom.noticeRoom(of: user):
            refresh(RoomKey(channel: channel, room: added))
        case .message(let message) where message.offset > 0:
            guard var conversation = conversations[room] else { return }
            if let action = message.action, action.target.offset != conversation.last?.offset {
                // An action on an older message changes nothing the inbox shows.
                return
            }
            if message.isAction { return refresh(room) }
            conversation.arrived(message, for: user, name: name)
            conversations[room] = conversation
            order.removeAll { $0 == room }
            order.append(room)
            session.conversationChanged(conversation)
        case .messageDeleted:
            if conversations[room] != nil { refresh(room) }
        case .read(let receipt) where receipt.user == user:
            if conversations[room] != nil { refresh(room) }
        default:
            break
        }
    }

    /// Reads one conversation again from the stores after an event, then follows it and tells
    /// the session: now, or paced (``refreshes``) when a read of it is out or the last was
    /// less than 250 ms ago.
    private func refresh(_ key: RoomKey) {
        paced(key, refreshes.ask(key, now: session.context.nowMillis))
    }

    private func paced(_ key: RoomKey, _ decision: RefreshPacer<RoomKey>.Decision) {
        let me = LoopBound(session, on: session.connection.loop)
        decision.carryOut(on: session.connection.loop, start: { read(key, onlyIfChanged: false, paced: true) }) {
            me.run { session in
                guard let watch = session.inboxWatch else { return }
                watch.paced(key, watch.refreshes.due(key, now: session.context.nowMillis))
            }
        }
    }

    /// Reads one conversation again from the stores, then follows it and tells the session
    /// (with `onlyIfChanged`, only when it differs from what the watch holds). A `paced` read
    /// tells ``refreshes`` when it is over, answered or not.
    private func read(_ key: RoomKey, onlyIfChanged: Bool, paced: Bool = false) {
        let me = LoopBound(session, on: session.connection.loop)
        session.chat.conversation(key) { result in
            me.execute { session in
                guard let watch = session.inboxWatch else { return }
                if case .success(let conversation?) = result { watch.arrived(conversation, onlyIfChanged: onlyIfChanged) }
                if paced { watch.paced(key, watch.refreshes.ended(key, now: session.context.nowMillis)) }
            }
        }
    }

    private func arrived(_ conversation: Conversation, onlyIfChanged: Bool) {
        if onlyIfChanged, conversations[conversation.room] == conversation { return }
        follow(conversation)
        session.conversationChanged(conversation)
    }

    /// A listen is in place (in a cluster that takes a round trip to Redis): what happened
    /// before it was read from the stores, not heard. So read again: the room's conversation,
    /// or for the notice room the user's newest conversations (one a stranger opened while
    /// the watch was starting).
    func didSubscribe(_ snapshot: SubscribeSnapshot) {
        guard snapshot.failure == nil else { return }
        guard snapshot.room.room == ReservedRoom.noticeRoom(of: user) else { return read(snapshot.room, onlyIfChanged: true) }
        let me = LoopBound(session, on: session.connection.loop)
        let charge = session.chat.historyBytesCharge
        session.context.inboxReader.inbox(of: user, name: name, in: channel, limit: limit) { result in
            guard case .success(let page) = result else { return }
            charge(page.bytesRead)
            me.execute { session in
                guard let watch = session.inboxWatch else { return }
                for conversation in page.conversations.reversed() { watch.arrived(conversation, onlyIfChanged: true) }
            }
        }
    }
    func didUnsubscribe(from room: RoomKey) {}
}
