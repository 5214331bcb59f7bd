// libFuzzer target: the Engine.IO packet and payload decoders (EIO3 and EIO4, text and
// binary), the polling outbox, and the Socket.IO packet decoder with binary attachment
// reassembly (both ways of handing attachments on).
// Invariant: never crashes; whatever decodes re-encodes, and every refusal names a reason.
// Memory oracle (besides run.sh's -malloc_limit_mb/-rss_limit_mb): a reassembled binary
// packet never holds more than maxPayload bytes counted in base64, and its base64 form holds
// each attachment at most once (one attachment named by many placeholders was encoded once
// per placeholder, 1,300x the request, more than any small input can reach a memory limit
// with; this catches it at any size).
import Foundation
import ParleyCore

/// Small, so that an 8 KiB input can go over it.
private let fuzzMaxPayload = 1024

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
        // An Engine.IO text packet; after a NUL byte, the bytes its attachments are cut from
        // (without one: the first 8 bytes, fed as every attachment's share).
        let nul = rest.firstIndex(of: 0)
        let text = String(decoding: nul.map { rest[..<$0] } ?? rest[...], as: UTF8.self)
        let pool = nul.map { Array(rest[($0 + 1)...]) } ?? Array(rest.prefix(8))
        do {
            let packet = try EngineIOPacket.decode(text: text)
            if case .text(let inner) = packet.payload {
                for keepsAttachments in [false, true] {
                    var assembler = SocketIOBinaryAssembler(maxPayload: fuzzMaxPayload, keepsAttachments: keepsAttachments)
                    do {
                        guard case .needMore = try assembler.feed(text: inner) else { continue }
                        let header = try SocketIOPacket.decode(inner)
                        var output = SocketIOBinaryAssembler.Output.needMore
                        var fed: [[UInt8]] = []
                        for i in 0..<header.attachments {
                            let piece = Array(pool[(i * pool.count / header.attachments)..<((i + 1) * pool.count / header.attachments)])
                            fed.append(piece)
                            output = try assembler.feed(binary: piece)
                        }
                        let expanded: JSONValue?
                        switch output {
                        case .binary(let kept, let attachments):
                            precondition(keepsAttachments && kept.attachments == attachments.count && attachments == fed,
                                         "kept attachments do not match their header")
                            expanded = kept.data.map { SocketIOBinaryAssembler.replacingPlaceholders($0, attachments) }
                        case .packet(let converted):
                            precondition(!keepsAttachments && converted.attachments == 0, "a binary packet came out as neither form")
                            expanded = converted.data
                        case .needMore:
                            preconditionFailure("all attachments fed, still waiting")
                        }
                        let base64 = fed.reduce(0) { $0 + SocketIOBinaryAssembler.base64Length($1.count) }
                        precondition(inner.utf8.count + base64 <= fuzzMaxPayload, "a binary packet over maxPayload was handed on")
                        let expandedBytes = expanded?.jsonString.utf8.count ?? 0
                        let bound = (header.data?.jsonString.utf8.count ?? 0) + base64 + 2 * fed.count
                        precondition(expandedBytes <= bound, "an attachment came out more than once in the base64 form")
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
