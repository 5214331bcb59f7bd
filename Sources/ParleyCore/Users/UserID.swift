/// A *user*: someone with any number of connections (devices, doors, nodes) who reads rooms,
/// has unread counts and direct messages. A member (``Member``) is one connection's identity
/// in a room; ``Member/user`` names its user.
///
/// Where the id comes from (docs/protocols.md, "Users"): a verified token's `user` claim; in
/// an open channel, the handshake's `user_id` (which proves nothing: anyone may claim any
/// id); otherwise the connection's own client id, so a connection without one is a user of
/// its own that lasts as long as it does.
public enum UserID {
    /// Longest user id, in bytes.
    public static let maxBytes = 64

    /// Why `id` cannot be a user id, or nil: 1–64 bytes of ASCII letters, digits, `.`, `_`,
    /// `-` and `@` (so a direct room's name, `dm+alice+bob`, can list its users).
    public static func problem(with id: String) -> String? {
        guard !id.isEmpty, id.utf8.count <= maxBytes else { return "a user id must be 1-\(maxBytes) bytes" }
        guard id.utf8.allSatisfy(isAllowed) else {
            return "a user id may hold only ASCII letters, digits and . _ - @"
        }
        return nil
    }

    @inline(__always) static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "@"):
            true
        default:
            false
        }
    }
}

/// A direct room: a conversation of two users (or a small group, up to ``maxUsers``), named
/// after them, `dm+alice+bob` with the ids sorted, so either may start it and both reach the
/// same room. Only its users may read or write it (``ChatRules``), whatever else a token allows.
public enum DirectRoom {
    public static let prefix = "dm+"
    /// Most users of one direct room.
    public static let maxUsers = 8

    /// The direct room of `users` (duplicates dropped, sorted), or why there is none.
    public static func name(of users: [String]) -> Result<String, DirectRoomProblem> {
        let unique = Array(Set(users)).sorted()
        guard unique.count >= 2 else { return .failure(DirectRoomProblem("a direct room needs at least two different users")) }
        guard unique.count <= maxUsers else { return .failure(DirectRoomProblem("a direct room holds at most \(maxUsers) users")) }
        for user in unique {
            if let problem = UserID.problem(with: user) { return .failure(DirectRoomProblem("\"\(user.prefix(64))\": \(problem)")) }
        }
        let name = prefix + unique.joined(separator: "+")
        guard name.utf8.count <= RoomKey.maxNameLength else {
            return .failure(DirectRoomProblem("the users' ids are too long together for a room name (\(RoomKey.maxNameLength) bytes)"))
        }
        return .success(name)
    }

    /// Whether `room` is named as a direct room (it may still be malformed).
    @inline(__always) public static func isDirect(_ room: String) -> Bool { room.hasPrefix(prefix) }

    /// The users of the direct room `room`; nil when `room` is not one, or not in its one
    /// spelling (ids sorted, no duplicate): such a room cannot be used at all.
    public static func users(of room: String) -> [String]? {
        guard isDirect(room) else { return nil }
        let users = room.dropFirst(prefix.count).split(separator: "+", omittingEmptySubsequences: false).map(String.init)
        guard case .success(let canonical) = name(of: users), canonical == room else { return nil }
        return users
    }
}

public struct DirectRoomProblem: Error, Equatable, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
}

/// Room names the server keeps for itself: a user's notice room (``noticeRoom(of:)``), where
/// the nodes tell a user's sessions that a conversation joined their inbox. No client may
/// subscribe or publish to one.
public enum ReservedRoom {
    public static let prefix = "~"
    @inline(__always) public static func isReserved(_ room: String) -> Bool { room.hasPrefix(prefix) }
    /// The notice room of `user`.
    public static func noticeRoom(of user: String) -> String { "~inbox+" + user }
}
