import ParleyCore

/// Room rules that hold on every door before any token is asked: the server's own rooms are
/// nobody's, and a direct room is its users' alone.
enum ChatRules {
    /// Why `user` may not use `room` at all, or nil.
    static func roomRefusal(_ room: String, user: String?) -> ChatRefusal? {
        if ReservedRoom.isReserved(room) {
            return ChatRefusal(.forbidden, "room names starting with \"\\(ReservedRoom.prefix)\" are the server's own")
        }
        guard DirectRoom.isDirect(room) else { return nil }
        guard let users = DirectRoom.users(of: room) else {
            return ChatRefusal(.forbidden, "\"\\(DoorWording.quoted(room))\" is no direct room: use dm+ and the users' ids, sorted, joined by +")
        }
        guard let user, users.contains(user) else {
            return ChatRefusal(.forbidden, "only the users of a direct room may use it")
        }
        return nil
    }
}
