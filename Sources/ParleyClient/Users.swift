import Foundation
import ParleyCore

private typealias Field = NativeProtocol.Field

/// A user's read receipt in a room: `user` (shown as `name`) has read up to `offset`.
public struct ReadReceiptInfo: Sendable, Hashable {
    public let user: String
    public let name: String
    public let offset: Int
    public init(user: String, name: String, offset: Int) {
        self.user = user
        self.name = name
        self.offset = offset
    }

    init?(_ value: JSONValue) {
        guard let user = value[Field.user]?.stringValue, let offset = value[Field.offset]?.intValue else { return nil }
        self.init(user: user, name: value[Field.name]?.stringValue ?? user, offset: offset)
    }

    /// Who has seen the message at `offset`: the users whose receipt reached it, but `me`.
    public static func seenBy(_ offset: Int, in receipts: [ReadReceiptInfo], excluding me: String? = nil) -> [ReadReceiptInfo] {
        receipts.filter { $0.offset >= offset && $0.user != me }
    }
}

/// This user's unread messages in a room: those after their read mark that others sent.
public struct UnreadInfo: Sendable, Hashable {
    public let readOffset: Int
    public let unread: Int
    /// How many of the unread messages mention the user.
    public let mentions: Int
    /// The server stopped counting: there are at least ``unread``.
    public let capped: Bool
    public init(readOffset: Int, unread: Int, mentions: Int, capped: Bool = false) {
        self.readOffset = readOffset
        self.unread = unread
        self.mentions = mentions
        self.capped = capped
    }

    init(_ value: JSONValue) {
        self.init(readOffset: value[Field.readOffset]?.intValue ?? 0, unread: value[Field.unread]?.intValue ?? 0,
                  mentions: value[Field.mentions]?.intValue ?? 0, capped: value[Field.unreadCapped]?.boolValue ?? false)
    }

    /// A badge: the count, "99+" past 99 (or when the server stopped counting), nil at 0.
    public var badge: String? {
        if unread == 0 { return nil }
        return unread > 99 || (capped && unread >= 99) ? "99+" : capped ? "\(unread)+" : "\(unread)"
    }
}

/// One of the user's conversations: a room or a direct room, with its newest message and
/// the user's unread count.
public struct ChatConversation: Sendable, Hashable, Identifiable {
    public var id: String { room }
    public let room: String
    /// The users of a direct room; nil for other rooms.
    public let users: [String]?
    public let unread: UnreadInfo
    /// When something last happened (second precision).
    public let activity: Date
    /// The newest message, or nil.
    public let last: ChatMessage?
    /// The newest message's sender's name.
    public let lastSenderName: String?

    public init(room: String, users: [String]?, unread: UnreadInfo, activity: Date, last: ChatMessage?, lastSenderName: String?) {
        self.room = room
        self.users = users
        self.unread = unread
        self.activity = activity
        self.last = last
        self.lastSenderName = lastSenderName
    }

    /// Whether this is a direct room.
    public var isDirect: Bool { users != nil }

    /// A title: the other users of a direct room (ids), else the room's name.
    public func title(me: String?) -> String {
        guard let users else { return room }
        let others = users.filter { $0 != me }
        return others.isEmpty ? room : others.joined(separator: ", ")
    }
}

/// A page of the inbox, newest activity first.
public struct InboxPage: Sendable, Hashable {
    public let conversations: [ChatConversation]
    public let hasMore: Bool
}

/// The direct room of a set of users, as the server names it (`dm+` and the sorted ids).
public func directRoomName(of users: [String]) -> String? {
    try? DirectRoom.name(of: users).get()
}
