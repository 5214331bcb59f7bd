import ParleyCore

// Room events are encoded once per loop and per transport, as pre-encoded Engine.IO frames
// that every session on that loop gets as they are (EngineIOFrames.preEncoded).

extension SocketIOPacket {
    /// This packet as the text of an Engine.IO message packet (`42[...]`): what pre-encoded
    /// frames are made of.
    var engineIOText: String { EngineIOPacket(.message, encoded).encodedText }
}

extension WireFormat {
    /// The room-event format of Socket.IO sessions on `transport`.
    static func socketIOFormat(for transport: EngineIOTransport) -> WireFormat {
        transport == .webSocket ? .socketIO : .socketIOPolling
    }

    /// The transport whose pre-encoded form this Socket.IO format is.
    var engineIOTransport: EngineIOTransport { self == .socketIO ? .webSocket : .polling }
}
