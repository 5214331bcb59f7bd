import Synchronization

/// One entry of SocketChat's `userList` (docs/protocols.md, "Socket.IO").
public struct SocketChatUser: Sendable, Equatable {
    public let id: String
    public let nickname: String
    public let isConnected: Bool

    public init(id: String, nickname: String, isConnected: Bool) {
        self.id = id
        self.nickname = nickname
        self.isConnected = isConnected
    }
}

/// SocketChat's user list over Parley's lobby: everybody in the lobby (from every door) is a
/// connected user, and Socket.IO users who disconnected without `exitUser` stay listed with
/// `isConnected: false`, as the original SocketChat server kept them, until they come back or
/// exit, or for at most ``departedLifetimeMillis`` (the original kept them forever, so its list
/// only grew). At most ``maxDeparted`` departed users are kept; beyond that the oldest go
/// first. Nicknames are the key (the original server found users by nickname). Thread-safe.
public final class SocketChatRoster: Sendable {
    /// How long a departed user stays listed by default: an hour.
    public static let defaultDepartedLifetimeMillis: Int64 = 3_600_000
    /// How many departed users are listed at most by default.
    public static let defaultMaxDeparted = 1_000

    public let departedLifetimeMillis: Int64
    public let maxDeparted: Int
    let clock: any WallClock
    /// Departed users, oldest departure first, with the time each left.
    let departed = Mutex<[(user: SocketChatUser, leftMillis: Int64)]>([])
    /// Bumped whenever the departed list changes, so a list encoded from it can tell it is
    /// stale (``generation``).
    private let changes = Atomic<Int>(0)

    /// Changes so far to the departed list: read it before building a list from the roster,
    /// and build again when it has moved.
    public var generation: Int { changes.load(ordering: .acquiring) }

    private func changed() { changes.add(1, ordering: .releasing) }

    public init(departedLifetimeMillis: Int64 = SocketChatRoster.defaultDepartedLifetimeMillis,
                maxDeparted: Int = SocketChatRoster.defaultMaxDeparted, clock: any WallClock = SystemWallClock()) {
        self.departedLifetimeMillis = departedLifetimeMillis
        self.maxDeparted = max(0, maxDeparted)
        self.clock = clock
    }

    /// A Socket.IO user identified (`connectUser`): no longer listed as departed.
    public func connected(nickname: String) {
        forget(nickname)
    }

    private func forget(_ nickname: String) {
        let removed = departed.withLock { list in
            let count = list.count
            list.removeAll { $0.user.nickname == nickname }
            return list.count != count
        }
        if removed { changed() }
    }

    /// A Socket.IO user's socket went away without `exitUser`: keep it, disconnected, for a while.
    public func disconnected(id: String, nickname: String) {
        let now = clock.nowMillis()
        departed.withLock { list in
            list.removeAll { $0.user.nickname == nickname }
            list.append((SocketChatUser(id: id, nickname: nickname, isConnected: false), now))
            expire(&list, now: now)
        }
        changed()
    }

    /// `exitUser`: the user is gone for good.
    public func exited(nickname: String) {
        forget(nickname)
    }

    /// Departed users listed now.
    public var departedCount: Int {
        let now = clock.nowMillis()
        return departed.withLock { list in
            expire(&list, now: now)
            return list.count
        }
    }

    /// Drops the departures older than the lifetime, and the oldest beyond the bound (the list
    /// is in departure order, so both are at its front).
    func expire(_ list: inout [(user: SocketChatUser, leftMillis: Int64)], now: Int64) {
        var drop = max(0, list.count - maxDeparted)
        while drop < list.count, now - list[drop].leftMillis >= departedLifetimeMillis { drop += 1 }
        if drop > 0 {
            list.removeFirst(drop)
            changed()
        }
    }

    /// The `userList` for the lobby's current members.
    public func users(connected members: [Member]) -> [SocketChatUser] {
        let now = clock.nowMillis()
        let list = departed.withLock { list in
            expire(&list, now: now)
            return list.map(\.user)
        }
        return Self.users(connected: members, departed: list)
    }

    /// Connected members first (join order, one entry per nickname), then departed users
    /// whose nickname is not connected again.
    public static func users(connected members: [Member], departed: [SocketChatUser]) -> [SocketChatUser] {
        var seen = Set<String>()
        var users: [SocketChatUser] = []
        for member in members where seen.insert(member.displayName).inserted {
            users.append(SocketChatUser(id: member.id, nickname: member.displayName, isConnected: true))
        }
        for user in departed where seen.insert(user.nickname).inserted {
            users.append(user)
        }
        return users
    }

    /// `userTypingUpdate`'s argument: `{nickname: 1, ...}` for the members typing now, the
    /// first `limit` nicknames whose bytes stay within `maxNameBytes` in all.
    public static func typingMap(_ typing: [Member], limit: Int = .max, maxNameBytes: Int = .max) -> JSONValue {
        var object = JSONObject()
        var bytes = 0
        for member in typing where object[member.displayName] == nil {
            let name = member.displayName
            guard object.count < limit, bytes + name.utf8.count <= maxNameBytes else { break }
            bytes += name.utf8.count
            object.append(key: name, value: 1)
        }
        return .object(object)
    }

    /// Whether `name` is acceptable as a nickname: the rule of every door, ``MemberName``.
    public static func isValidNickname(_ name: String) -> Bool { MemberName.isValid(name) }
}

/// A departed SocketChat user and when it left.
public struct DepartedUser: Sendable, Equatable {
    public let user: SocketChatUser
    public let leftMillis: Int64
    public init(user: SocketChatUser, leftMillis: Int64) {
        self.user = user
        self.leftMillis = leftMillis
    }
}

/// The departed users of a cluster, kept where every node reads them (Redis), so that every
/// node sends the same `userList`. A node keeps its ``SocketChatRoster`` as the copy it reads,
/// writes each change here too, and reads the list again when the version moved.
///
/// Contract (Tests/ContractTests/SocketChatRosterStoreContractTests.swift): `departed` keeps one
/// entry per nickname (the latest) and at most `maxDeparted` (the oldest go first);
/// `returned` forgets a nickname; `load` returns the entries not older than `lifetimeMillis`
/// at `nowMillis`, oldest departure first; every change moves the version.
public protocol SocketChatRosterStore: AnyObject, Sendable {
    func departed(_ user: SocketChatUser, leftMillis: Int64, maxDeparted: Int) async throws(ParleyError)
    func returned(nickname: String) async throws(ParleyError)
    func load(nowMillis: Int64, lifetimeMillis: Int64) async throws(ParleyError) -> (entries: [DepartedUser], version: Int64)
    func version() async throws(ParleyError) -> Int64
}

extension SocketChatRoster {
    /// The departed users listed now, oldest departure first.
    public var departedUsers: [DepartedUser] {
        let now = clock.nowMillis()
        return departed.withLock { list in
            expire(&list, now: now)
            return list.map { DepartedUser(user: $0.user, leftMillis: $0.leftMillis) }
        }
    }

    /// Replaces the departed users with a store's; true when the list changed.
    @discardableResult
    public func replaceDeparted(with entries: [DepartedUser]) -> Bool {
        let now = clock.nowMillis()
        return departed.withLock { list in
            let before = list.map { DepartedUser(user: $0.user, leftMillis: $0.leftMillis) }
            list = entries.sorted { $0.leftMillis < $1.leftMillis }.map { ($0.user, $0.leftMillis) }
            expire(&list, now: now)
            let differs = list.map { DepartedUser(user: $0.user, leftMillis: $0.leftMillis) } != before
            if differs { changed() }
            return differs
        }
    }
}

/// Departed users in memory: the roster store of tests (a single node needs none).
public final class InMemorySocketChatRosterStore: SocketChatRosterStore {
    private let state = Mutex<(entries: [String: DepartedUser], version: Int64)>(([:], 0))
    public init() {}

    public func departed(_ user: SocketChatUser, leftMillis: Int64, maxDeparted: Int) async throws(ParleyError) {
        state.withLock { state in
            state.entries[user.nickname] = DepartedUser(user: user, leftMillis: leftMillis)
            let extra = state.entries.count - max(0, maxDeparted)
            if extra > 0 {
                for oldest in state.entries.values.sorted(by: { $0.leftMillis < $1.leftMillis }).prefix(extra) {
                    state.entries[oldest.user.nickname] = nil
                }
            }
            state.version += 1
        }
    }

    public func returned(nickname: String) async throws(ParleyError) {
        state.withLock { state in
            if state.entries.removeValue(forKey: nickname) != nil { state.version += 1 }
        }
    }

    public func load(nowMillis: Int64, lifetimeMillis: Int64) async throws(ParleyError) -> (entries: [DepartedUser], version: Int64) {
        state.withLock { state in
            state.entries = state.entries.filter { $0.value.leftMillis > nowMillis - lifetimeMillis }
            let entries = state.entries.values.sorted { ($0.leftMillis, $0.user.nickname) < ($1.leftMillis, $1.user.nickname) }
            return (entries, state.version)
        }
    }

    public func version() async throws(ParleyError) -> Int64 { state.withLock { $0.version } }
}
