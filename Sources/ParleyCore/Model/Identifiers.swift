/// A room within a channel (tenant).
public struct RoomKey: Hashable, Sendable, CustomStringConvertible {
    public let channel: String
    public let room: String
    /// Both names hashed once, when the key is made. A publish looks its room up in a
    /// dozen dictionaries on its way (the session's, the hub's, the broker's, the store
    /// writer's, each loop's), and hashing two strings each time was the writer thread's
    /// largest single cost in the chat-like bench (2,000 busy rooms).
    private let hashCode: Int

    public init(channel: String, room: String) {
        self.channel = channel
        self.room = room
        var hasher = Hasher()
        hasher.combine(channel)
        hasher.combine(room)
        hashCode = hasher.finalize()
    }

    public static func == (lhs: RoomKey, rhs: RoomKey) -> Bool {
        lhs.hashCode == rhs.hashCode && lhs.channel == rhs.channel && lhs.room == rhs.room
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(hashCode) }

    /// Parses `CHANNEL/ROOM`.
    public init?(parsing text: String) {
        guard let slash = text.firstIndex(of: "/") else { return nil }
        let channel = String(text[..<slash]), room = String(text[text.index(after: slash)...])
        guard RoomKey.isValidName(channel), RoomKey.isValidName(room) else { return nil }
        self.init(channel: channel, room: room)
    }

    /// Rooms named `observable-*` publish their membership to their members, and so do
    /// direct rooms (``DirectRoom``: its users see each other there).
    public var isObservable: Bool { room.hasPrefix("observable-") || room.hasPrefix(DirectRoom.prefix) }

    public var description: String { "\(channel)/\(room)" }

    /// Longest channel or room name accepted.
    public static let maxNameLength = 128

    /// A channel or room name: 1–128 bytes of printable characters other than `/`.
    public static func isValidName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= maxNameLength else { return false }
        return name.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F && $0 != "/" }
    }
}

/// Identifies one connection's session within this process.
public typealias SessionID = UInt64
