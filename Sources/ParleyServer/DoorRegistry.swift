import ParleyCore
import ParleyIO

/// Every door of the server, one line each, made once per server (a door keeps its own
/// state, per loop too). The node binds, stops and measures the doors through ``Door``; the
/// room events each door's sessions receive are encoded per ``DoorFormat``
/// (Node/LoopContext.swift). Adding a door: a codec, a session that speaks through a
/// ``ChatSession`` with a ``DoorContext``, its ``DoorFormat`` case, and one line here
/// (docs/architecture.md, "Where to add things").
enum DoorRegistry {
    static func make(configuration: ServerConfiguration, hub: Hub, group: EventLoopGroup, cluster: ClusterNode?,
                     onError: @escaping @Sendable (ParleyError) -> Void) -> DoorSet {
        let http = HTTPDoor()          // REST, the web client, and the WebSocket upgrades: native (Scaledrone v3), echo
        let line = LineDoor(group: group) // the line protocol on its own TCP port
        let socketIO = SocketIODoor(   // Engine.IO 3/4 and Socket.IO on the HTTP port's /socket.io/
            configuration: configuration, hub: hub, group: group, rosterStore: cluster?.socketChatRoster, onError: onError)
        return DoorSet(all: [http, line, socketIO], mounted: [socketIO],
                       encoders: { loop in LoopEncoders(socketChat: socketIO.fanOuts[loop], line: line.transcripts[loop]) })
    }
}
