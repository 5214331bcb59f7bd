/// How far one user has read one room: an offset that only moves forward.
public struct ReadMark: Sendable, Equatable {
    public let user: String
    public let room: RoomKey
    /// The offset of the newest message the user has read (0: none yet; the room is only in
    /// their conversations).
    public var offset: Int64
    /// The name shown for the user in receipts.
    public var name: String
    /// False when the user keeps their receipts private: the mark drives their own unread
    /// count, and nobody else sees it.
    public var sharesReceipts: Bool
    /// When the user last read or opened the room (Unix ms).
    public var updatedMillis: Int64

    public init(user: String, room: RoomKey, offset: Int64, name: String, sharesReceipts: Bool = true, updatedMillis: Int64) {
        self.user = user
        self.room = room
        self.offset = offset
        self.name = name
        self.sharesReceipts = sharesReceipts
        self.updatedMillis = updatedMillis
    }

    /// Longest name kept with a mark, in bytes.
    public static let maxNameBytes = 128

    /// Most marks one store keeps in all, every user and channel together, by default: a
    /// new one past it drops the marks touched least recently (``ReadStateStore``).
    public static let maxStored = 1_000_000

    /// `name` cut to ``maxNameBytes`` on a character boundary.
    public static func clipped(_ name: String) -> String {
        guard name.utf8.count > maxNameBytes else { return name }
        var out = ""
        for character in name {
            if out.utf8.count + character.utf8.count > maxNameBytes { break }
            out.append(character)
        }
        return out
    }
}

/// What ``ReadStateStore/record(_:completion:)`` did.
public struct ReadUpdate: Sendable, Equatable {
    /// The mark as stored now: its offset is the greater of the old one and the new one.
    public let mark: ReadMark
    /// The offset moved forward.
    public let moved: Bool
    /// The room was not among the user's conversations before.
    public let added: Bool
    public init(mark: ReadMark, moved: Bool, added: Bool) {
        self.mark = mark
        self.moved = moved
        self.added = added
    }
}

/// A read receipt as rooms see it: `user` (shown as `name`) has read up to `offset`.
public struct ReadReceipt: Sendable, Hashable {
    public let user: String
    public let name: String
    public let offset: Int64
    /// False for a private mark: it reaches the rooms' nodes so the user's own sessions can
    /// update their unread counts, and no other client sees it.
    public let isShared: Bool
    /// An empty `name` (a mark made for a user by someone else, or over REST) shows the user id.
    public init(user: String, name: String, offset: Int64, isShared: Bool = true) {
        self.user = user
        self.name = name.isEmpty ? user : name
        self.offset = offset
        self.isShared = isShared
    }

    public init(_ mark: ReadMark) {
        self.init(user: mark.user, name: mark.name, offset: mark.offset, isShared: mark.sharesReceipts)
    }
}
