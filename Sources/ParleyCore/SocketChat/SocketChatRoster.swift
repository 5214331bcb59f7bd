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
/// exit. Nicknames are the key (the original server found users by nickname). Thread-safe.
public final class SocketChatRoster: Sendable {
    private let departed = Mutex<[SocketChatUser]>([])

    public init() {}

    /// A Socket.IO user identified (`connectUser`): no longer listed as departed.
    public func connected(nickname: String) {
        departed.withLock { $0.removeAll { $0.nickname == nickname } }
    }

    /// A Socket.IO user's socket went away without `exitUser`: keep it, disconnected.
    public func disconnected(id: String, nickname: String) {
        departed.withLock { list in
            list.removeAll { $0.nickname == nickname }
            list.append(SocketChatUser(id: id, nickname: nickname, isConnected: false))
        }
    }

    /// `exitUser`: the user is gone for good.
    public func exited(nickname: String) {
        departed.withLock { $0.removeAll { $0.nickname == nickname } }
    }

    /// The `userList` for the lobby's current members.
    public func users(connected members: [Member]) -> [SocketChatUser] {
        Self.users(connected: members, departed: departed.withLock { $0 })
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

    /// `userTypingUpdate`'s argument: `{nickname: 1, ...}` for the members typing now.
    public static func typingMap(_ typing: [Member]) -> JSONValue {
        var object = JSONObject()
        for member in typing where object[member.displayName] == nil {
            object.append(key: member.displayName, value: 1)
        }
        return .object(object)
    }

    /// Whether `name` is acceptable as a nickname: 1–64 characters, no control characters.
    public static func isValidNickname(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64
            && !name.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}
