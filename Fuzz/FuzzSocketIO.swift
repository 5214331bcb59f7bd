// libFuzzer target: the Engine.IO packet and payload decoders (EIO3 and EIO4, text and
// binary), the polling outbox, and the Socket.IO packet decoder with binary attachment
// reassembly (both ways of handing attachments on).
// Invariant: never crashes; whatever decodes re-encodes, and every refusal names a reason.
import ParleyCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSocketIO(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let selector = bytes.first else { return 0 }
    let rest = Array(bytes.dropFirst())
    let version: EngineIOVersion = selector & 1 == 0 ? .v4 : .v3
    switch selector % 4 {
    case 0, 1:
        // A polling body: decode, re-encode, decode again to the same packets.
        do {
            let packets = try EngineIOPayload.decode(rest, version: version)
            let again = try EngineIOPayload.decode(EngineIOPayload.encode(packets, version: version), version: version)
            precondition(again.count == packets.count, "payload round trip changed the packet count")
            // The outbox drains to the same payload, and counts no bytes once drained.
            var outbox = EngineIOOutbox()
            outbox.append(packets)
            precondition(outbox.takePayload(version: version) == EngineIOPayload.encode(packets, version: version))
            precondition(outbox.isEmpty && outbox.bytes == 0, "a drained outbox still counts bytes")
        } catch {
            precondition(!error.message.isEmpty, "a refusal without a reason")
        }
    case 2:
        let text = String(decoding: rest, as: UTF8.self)
        do {
            let packet = try EngineIOPacket.decode(text: text)
            if case .text(let inner) = packet.payload {
                for keepsAttachments in [false, true] {
                    var assembler = SocketIOBinaryAssembler(keepsAttachments: keepsAttachments)
                    do {
                        if case .needMore = try assembler.feed(text: inner) {
                            let output = try assembler.feed(binary: Array(rest.prefix(8)))
                            if case .binary(let header, let attachments) = output {
                                precondition(keepsAttachments && header.attachments == attachments.count,
                                             "kept attachments do not match their header")
                            }
                        }
                    } catch {
                        precondition(!error.message.isEmpty, "a refusal without a reason")
                    }
                }
            }
        } catch {
            precondition(!error.message.isEmpty, "a refusal without a reason")
        }
    default:
        do {
            _ = try EngineIOPacket.decode(webSocketBinary: rest, version: version)
        } catch {
            precondition(!error.message.isEmpty, "a refusal without a reason")
        }
        do {
            _ = try SocketIOPacket.decode(String(decoding: rest, as: UTF8.self))
        } catch {
            precondition(!error.message.isEmpty, "a refusal without a reason")
        }
    }
    return 0
}
