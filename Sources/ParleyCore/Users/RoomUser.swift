/// One user in a room's user presence view: the room's members (connections, on any door
/// and node) folded into their users.
public struct RoomUser: Sendable, Hashable {
    public let user: String
    /// The name of the user's first device in the room.
    public let name: String
    /// How many of the user's connections are in the room.
    public let devices: Int

    public init(user: String, name: String, devices: Int) {
        self.user = user
        self.name = name
        self.devices = devices
    }

    /// `members` (in join order) folded by ``Member/user``, in the order each user first joined.
    public static func fold(_ members: [Member]) -> [RoomUser] {
        var order: [String] = []
        var found: [String: (name: String, devices: Int)] = [:]
        for member in members {
            let user = member.user
            if let seen = found[user] {
                found[user] = (seen.name, seen.devices + 1)
            } else {
                order.append(user)
                found[user] = (member.displayName, 1)
            }
        }
        return order.map { RoomUser(user: $0, name: found[$0]!.name, devices: found[$0]!.devices) }
    }
}

extension Hub {
    /// The users of `key` on every node (its first `limit` members, folded by user), and how
    /// many members it has in all.
    public func users(of key: RoomKey, limit: Int,
                      completion: @escaping @Sendable (Result<(users: [RoomUser], members: Int), ParleyError>) -> Void) {
        members(of: key, limit: limit) { result in completion(result.map { (RoomUser.fold($0.members), $0.total) }) }
    }
}
