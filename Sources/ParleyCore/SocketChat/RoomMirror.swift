/// A room's members and typists as seen through its event stream, in order.
///
/// A door that encodes events on a loop, after the hub has moved on, must not read the hub's
/// current state for them (a `startType` followed at once by a message would show nobody
/// typing). It seeds a mirror from a consistent snapshot and applies each event as it is
/// delivered, so every event is shown with the state right after it.
public struct RoomMirror: Sendable, Equatable {
    private var presence: RoomPresence

    public init(members: [Member], typing: [Member] = []) {
        presence = RoomPresence(members: members, typing: typing)
    }

    /// Members in join order.
    public var members: [Member] { presence.members.listed() }
    /// Members typing, in the order they started.
    public var typing: [Member] { presence.typing.members }

    /// Applies the hub's own rules (``RoomPresence``) to `event`.
    public mutating func apply(_ event: RoomEvent) {
        _ = presence.apply(event)
    }

    public static func == (lhs: RoomMirror, rhs: RoomMirror) -> Bool {
        lhs.members == rhs.members && lhs.typing == rhs.typing
    }
}
