/// The packets of a polling session that wait for the client's next GET, and their size
/// (the session's write-queue limit applies to it).
struct EngineIOOutbox {
    private(set) var packets: [EngineIOPacket] = []
    /// Payload bytes waiting (text as UTF-8, binary as raw bytes).
    private(set) var bytes = 0

    var isEmpty: Bool { packets.isEmpty }

    mutating func append(_ more: [EngineIOPacket]) {
        packets += more
        for packet in more {
            switch packet.payload {
            case .text(let text): bytes += text.utf8.count
            case .binary(let data): bytes += data.count
            }
        }
    }

    /// Everything waiting, in order; the outbox is empty afterwards.
    mutating func takeAll() -> [EngineIOPacket] {
        let taken = packets
        packets = []
        bytes = 0
        return taken
    }

    /// Everything waiting as one polling response body for `version`.
    mutating func takePayload(version: EngineIOVersion) -> [UInt8] {
        EngineIOPayload.encode(takeAll(), version: version)
    }
}
