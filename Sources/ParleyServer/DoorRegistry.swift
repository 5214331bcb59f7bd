/// Every door of the server, one line each. The node binds, stops and measures the doors
/// through ``Door``; the room events each door's sessions receive are encoded per
/// ``DoorFormat`` (Node/LoopContext.swift). Adding a door: a codec, a session that speaks
/// through a ``ChatSession`` with a ``DoorContext``, its ``DoorFormat`` case, and one line here
/// (docs/architecture.md, "Where to add things").
enum DoorRegistry {
    static let all: [any Door] = [
        HTTPDoor(),      // REST, the web client, and the WebSocket upgrades: native (Scaledrone v3), echo
        LineDoor(),      // the line protocol on its own TCP port
        SocketIODoor(),  // Engine.IO 3/4 and Socket.IO on the HTTP port's /socket.io/
    ]
}
