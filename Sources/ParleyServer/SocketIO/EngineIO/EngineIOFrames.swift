import ParleyIO
import ParleyWebSocket

/// Engine.IO packets as the bytes each transport writes.
enum EngineIOFrames {
    /// WebSocket frames of `packets`, ready to write: text packets as text frames, binary
    /// messages as binary frames (raw bytes on EIO4, the type byte `4` first on EIO3).
    static func webSocket(_ packets: [EngineIOPacket], version: EngineIOVersion) -> IOBuffer {
        var bytes: [UInt8] = []
        for packet in packets {
            if packet.isBinary {
                bytes += WebSocketFrameEncoder.encode(opcode: .binary, payload: packet.webSocketBinary(version: version))
            } else {
                bytes += WebSocketProtocolMachine.serverTextFrame(Array(packet.encodedText.utf8))
            }
        }
        return IOBuffer(bytes)
    }

    /// Text packets (each a whole packet text, e.g. `42[...]`) encoded once for every session
    /// on `transport`: WebSocket text frames (the same bytes for EIO3 and EIO4), or for polling
    /// the texts joined by `\u{1e}`, which each session re-frames for its version when it
    /// answers a poll. Nil when there is nothing to send.
    static func preEncoded(_ packetTexts: [String], for transport: EngineIOTransport) -> IOBuffer? {
        guard !packetTexts.isEmpty else { return nil }
        if transport == .polling {
            return IOBuffer(Array(packetTexts.joined(separator: "\u{1e}").utf8))
        }
        var bytes: [UInt8] = []
        for packet in packetTexts { bytes += WebSocketProtocolMachine.serverTextFrame(Array(packet.utf8)) }
        return IOBuffer(bytes)
    }

    /// The packets of a polling form made by ``preEncoded(_:for:)``, and how many parts of it
    /// are not packets (none, unless an encoder has a bug: the caller counts and logs them).
    static func packets(inPolling frames: IOBuffer) -> (packets: [EngineIOPacket], failures: Int) {
        var packets: [EngineIOPacket] = []
        var failures = 0
        for part in frames.bytes.split(separator: EngineIOPayload.separator) {
            do {
                packets.append(try EngineIOPacket.decode(text: String(decoding: part, as: UTF8.self)))
            } catch {
                failures += 1
            }
        }
        return (packets, failures)
    }
}
