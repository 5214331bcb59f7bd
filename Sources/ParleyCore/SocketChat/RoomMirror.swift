/// A room's members and typists as seen through its event stream, in order.
///
/// A door that encodes events on a loop, after the hub has moved on, must not read the hub's
/// current state for them (a `startType` followed at once by a message would show nobody
/// typing). It seeds a mirror from a consistent snapshot and applies each event as it is
/// delivered, so every event is shown with the state right after it.
public struct RoomMirror: Sendable, Equatable {
    public private(set) var members: [Member]
    public private(set) var typing: [Member]

    public init(members: [Member], typing: [Member] = []) {
        self.members = members
        self.typing = typing
    }

    /// Applies the hub's rules for its room view (`Hub.apply(_:to:)`): a join adds, a leave removes (and stops typing), a
    /// `{"typing": bool}` message sets the flag, any other message from a typist clears it.
    public mutating func apply(_ event: RoomEvent) {
        switch event {
        case .memberJoined(let member):
            if !members.contains(where: { $0.id == member.id }) { members.append(member) }
        case .memberLeft(let member):
            if let index = members.firstIndex(where: { $0.id == member.id }) { members.remove(at: index) }
            typing.removeAll { $0.id == member.id }
        case .messageDeleted, .roomClosed:
            return
        case .message(let message):
            guard let sender = message.sender else { return }
            if Message.typingState(of: message.body) == true {
                if !typing.contains(where: { $0.id == sender.id }) { typing.append(sender) }
            } else {
                typing.removeAll { $0.id == sender.id }
            }
        }
    }
}
