/// Something that happened in a room, for the room's subscribers.
public enum RoomEvent: Sendable, Equatable {
    case message(Message)
    case memberJoined(Member)
    case memberLeft(Member)
    /// The stored message at this offset was replaced by a tombstone (``Message/tombstone``):
    /// clients remove it; history and resume show it as deleted from now on.
    case messageDeleted(offset: Int64)
    /// An operator closed the room: every session leaves it (and is told why).
    case roomClosed(reason: String)
    /// A user read the room up to an offset (docs/protocols.md, "Read receipts"): sessions
    /// that asked for receipts are told; the user's own sessions update their unread counts.
    /// Never stored (the mark is, in the ``ReadStateStore``), best effort like typing.
    case read(ReadReceipt)
    /// In a user's notice room (``ReservedRoom/noticeRoom(of:)``): `room` joined the user's
    /// conversations (someone started a direct room with them); their inbox reads it.
    case conversationAdded(room: String)
}

/// What a new subscriber gets: the room as it was at the instant it joined. Every message
/// after `lastOffset` reaches it live, so history plus live has no gap and no duplicate.
public struct SubscribeSnapshot: Sendable, Equatable {
    public let room: RoomKey
    /// Members in join order, the subscriber included; empty for rooms that are not
    /// `observable-*` (no door shows their membership).
    public let members: [Member]
    /// Recent history, oldest first (as many as asked for and kept).
    public let history: [Message]
    /// The offset of the newest stored message when it joined (0 when none).
    public let lastOffset: Int64
    /// Stored messages after the `since` offset the subscriber asked for (and any stored while
    /// its history was being read), oldest first, ending at `lastOffset`: deliver them as
    /// ordinary room messages before anything live.
    public internal(set) var replay: [Message] = []
    /// Set when the history could not be read: the subscription did not happen.
    public internal(set) var failure: ParleyError? = nil
    /// False when `replay` is only the first page of a long replay: the session asks for the
    /// next with ``Hub/continueReplay(_:in:)`` once it has written this one, and gets
    /// ``Delivery/replay(_:_:_:complete:)`` pages until the last, after which it is live.
    public internal(set) var replayComplete = true
}

/// A unit of work the hub sends to an ``Inbox``.
public enum Delivery: Sendable {
    /// For every subscriber of the room that the inbox serves.
    case event(RoomKey, RoomEvent)
    /// A session's subscription is in place; deliver the snapshot to it.
    case subscribed(SessionID, SubscribeSnapshot)
    /// A session has left a room.
    case unsubscribed(SessionID, RoomKey)
    /// The next page of a session's replay; after the page marked complete it is live.
    case replay(SessionID, RoomKey, [Message], complete: Bool)
    /// Work of the hub's that must not run where the hub is (inside a broker's delivery):
    /// run it in order with the inbox's other deliveries, off every lock. Today: the
    /// publishes a session made while its join was on its way.
    case perform(@Sendable () -> Void)
}

/// Where the hub sends deliveries: in Parley, one per event loop, serving all the sessions on
/// that loop. Deliveries to one inbox must be handled in the order they are posted.
public protocol Inbox: AnyObject, Sendable {
    /// Called with a room's lock held: enqueue and return; never call back into the hub.
    func post(_ delivery: Delivery)
    /// Like ``post(_:)``, for a room event counted in its room's backlog: call
    /// `backlog.done()` once it has been handled.
    func post(_ delivery: Delivery, completing backlog: RoomBacklog)
}

extension Inbox {
    /// Inboxes that handle deliveries as they are posted finish them at once.
    public func post(_ delivery: Delivery, completing backlog: RoomBacklog) {
        post(delivery)
        backlog.done()
    }
}
