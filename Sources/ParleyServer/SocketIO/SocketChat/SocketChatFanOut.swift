import ParleyCore
import ParleyIO

/// SocketChat's room-event encoder on one loop (see ``RoomEventEncoding``): the events need
/// the lobby's members and typists, mirrored from the event stream (see ``RoomMirror``) while
/// this loop has SocketChat sockets in the lobby. Loop-confined like its ``LoopContext``.
final class SocketChatFanOut {
    /// Set by the first SocketChat application on this loop.
    var core: ServerCore?
    private var mirror: RoomMirror?
    private var sessionsInLobby = 0
    /// The last event and its packets: both framings of one event share one encoding and
    /// apply it to the mirror once.
    private var last: (event: RoomEvent, packets: [String])?

    func sessionJoined(_ snapshot: SubscribeSnapshot, core: ServerCore) {
        if sessionsInLobby == 0 || mirror == nil {
            mirror = RoomMirror(members: snapshot.members, typing: core.hub.typingMembers(of: snapshot.room))
            last = nil
        }
        sessionsInLobby += 1
    }

    func sessionLeft() {
        sessionsInLobby = max(0, sessionsInLobby - 1)
        if sessionsInLobby == 0 { mirror = nil }
    }

    func encode(_ format: WireFormat, _ room: RoomKey, _ event: RoomEvent) -> IOBuffer? {
        guard let core, room == core.configuration.lobby else { return nil }
        let packets: [String]
        if let last, last.event == event {
            packets = last.packets
        } else {
            var mirror = self.mirror ?? RoomMirror(members: core.hub.members(of: room), typing: core.hub.typingMembers(of: room))
            if self.mirror != nil { mirror.apply(event) }
            self.mirror = mirror
            packets = SocketChatEncoding.packets(for: event, users: core.socketIO.roster.users(connected: mirror.members),
                                                 typing: mirror.typing)
            last = (event, packets)
        }
        return SocketChatEncoding.frame(packets, as: format)
    }
}
