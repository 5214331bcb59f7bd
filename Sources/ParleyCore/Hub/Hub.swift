import Synchronization

/// Limits and defaults of the room registry.
public struct HubConfiguration: Sendable {
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
public final class Hub: Sendable {
    public let configuration: HubConfiguration
    public let clock: any Clock
    private let rooms = Mutex<[RoomKey: Room]>([:])
    private let typingRooms = Mutex<Set<RoomKey>>([])
    private let ids = MessageIDGenerator()

    public init(configuration: HubConfiguration = .init(), clock: any Clock = SystemClock()) {
        self.configuration = configuration
        self.clock = clock
    }

    private func room(_ key: RoomKey, create: Bool) throws(ParleyError) -> Room? {
        let result = rooms.withLock { rooms -> Room?? in
            if let room = rooms[key] { return room }
            guard create else { return .some(nil) }
            guard rooms.count < configuration.maxRooms else { return nil }
            let room = Room(RoomState(key: key, historyCapacity: configuration.historyCapacity,
                                      typingTimeoutMillis: configuration.typingTimeoutMillis))
            rooms[key] = room
            return room
        }
        guard let result else {
            throw ParleyError(.limitReached, "this server holds its maximum of \(configuration.maxRooms) rooms")
        }
        return result
    }

    // MARK: membership

    /// Adds `session` to `key` as `member`. Its inbox gets `.subscribed` with the snapshot
    /// (and up to `historyCount` recent messages); the others get `.memberJoined`.
    /// Subscribing twice is harmless: the second gets a fresh snapshot and nobody sees a join.
    public func subscribe(_ session: SessionID, as member: Member, to key: RoomKey, inbox: any Inbox,
                          historyCount: Int = 0) throws(ParleyError) {
        let room = try self.room(key, create: true)!
        let limit = configuration.maxMembersPerRoom
        let full = room.lock.withLock { locked -> Bool in
            if !locked.state.contains(session) {
                guard locked.state.memberCount < limit else { return true }
                _ = locked.state.join(session, as: member)
                for target in locked.inboxes.values { target.inbox.post(.event(key, .memberJoined(member))) }
                locked.addInbox(inbox, for: session)
            }
            // Only observable rooms show their members; copying a large room's list on every
            // join made subscribing O(members) in time and in transient memory.
            let snapshot = SubscribeSnapshot(room: key, members: key.isObservable ? locked.state.memberList : [],
                                             history: locked.state.history.latest(historyCount),
                                             lastOffset: locked.state.lastOffset)
            inbox.post(.subscribed(session, snapshot))
            return false
        }
        if full { throw ParleyError(.limitReached, "room \(key.room) is full (\(limit) members)") }
    }

    /// Removes `session` from `key`: its inbox gets `.unsubscribed`, the others `.memberLeft`.
    /// Returns false when it was not a member.
    @discardableResult
    public func unsubscribe(_ session: SessionID, from key: RoomKey) -> Bool {
        guard let room = try? self.room(key, create: false) else { return false }
        return room.lock.withLock { locked -> Bool in
            guard let member = locked.state.leave(session) else { return false }
            if let inbox = locked.removeInbox(for: session) { inbox.post(.unsubscribed(session, key)) }
            for target in locked.inboxes.values { target.inbox.post(.event(key, .memberLeft(member))) }
            return true
        }
    }

    // MARK: messages

    /// Publishes `body` to `key` (a member need not be subscribed to publish). Every
    /// subscriber gets the message, the sender included. `{"typing": bool}` bodies are
    /// delivered but not stored (offset 0).
    @discardableResult
    public func publish(_ body: JSONValue, to key: RoomKey, from sender: Member?) throws(ParleyError) -> Message {
        let room = try self.room(key, create: true)!
        let id = ids.next()
        let now = clock.nowMillis()
        let message = room.lock.withLock { locked -> Message in
            let message = locked.state.accept(body: body, from: sender, id: id, nowMillis: now)
            for target in locked.inboxes.values { target.inbox.post(.event(key, .message(message))) }
            return message
        }
        if message.offset == 0, Message.typingState(of: body) == true {
            typingRooms.withLock { _ = $0.insert(key) }
        }
        return message
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
        guard let room = try? self.room(key, create: false) else { return 0 }
        return room.lock.withLock { $0.state.lastOffset }
    }
}

/// One room behind its lock, with the inboxes that serve its subscribers.
final class Room: Sendable {
    struct Locked {
        var state: RoomState
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
}

extension RoomState {
    mutating func typingExpire(nowMillis: Int64) -> [Member] {
        var tracker = typing
        let expired = tracker.expire(nowMillis: nowMillis)
        replaceTyping(tracker)
        return expired
    }
}
