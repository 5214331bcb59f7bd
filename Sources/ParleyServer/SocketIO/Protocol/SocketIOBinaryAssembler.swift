import Foundation
import ParleyCore

/// Reassembles BINARY_EVENT / BINARY_ACK packets: the header packet announces N attachments,
/// the next N binary Engine.IO messages are they. A pure state machine fed one Engine.IO
/// message at a time.
///
/// Two ways to hand the result on:
/// - by default each `{"_placeholder":true,"num":i}` is replaced by attachment i as a base64
///   string, and the packet becomes a plain EVENT / ACK (for code that reads JSON only);
/// - with `keepsAttachments`, the packet keeps its kind and placeholders and comes out as
///   ``Output/binary(_:attachments:)`` with the bytes, so they can travel on as binary (the
///   Socket.IO layer uses this; an application may still ask for the base64 form).
/// Either way a placeholder that names no attachment is refused here.
struct SocketIOBinaryAssembler {
    enum Output: Equatable {
        case packet(SocketIOPacket)
        /// A BINARY_EVENT / BINARY_ACK with its placeholders, and its attachments in order.
        case binary(SocketIOPacket, attachments: [[UInt8]])
        case needMore
    }

    /// Most attachments one packet may announce.
    let maxAttachments: Int
    /// Whether complete binary packets come out as ``Output/binary(_:attachments:)``.
    let keepsAttachments: Bool
    private var waiting: SocketIOPacket?
    private var received: [[UInt8]] = []

    init(maxAttachments: Int = 10, keepsAttachments: Bool = false) {
        self.maxAttachments = maxAttachments
        self.keepsAttachments = keepsAttachments
    }

    var isWaiting: Bool { waiting != nil }

    mutating func feed(text: String) throws(SocketIOError) -> Output {
        guard waiting == nil else {
            waiting = nil
            received = []
            throw SocketIOError("text packet while waiting for binary attachments")
        }
        let packet = try SocketIOPacket.decode(text)
        guard packet.kind == .binaryEvent || packet.kind == .binaryAck, packet.attachments > 0 else {
            return .packet(packet)
        }
        guard packet.attachments <= maxAttachments else {
            throw SocketIOError("too many attachments (\(packet.attachments), limit \(maxAttachments))")
        }
        waiting = packet
        received = []
        return .needMore
    }

    mutating func feed(binary bytes: [UInt8]) throws(SocketIOError) -> Output {
        guard let packet = waiting else { throw SocketIOError("unexpected binary attachment") }
        received.append(bytes)
        guard received.count == packet.attachments else { return .needMore }
        waiting = nil
        let attachments = received
        received = []
        var error: SocketIOError?
        let replaced = packet.data.map { Self.replacePlaceholders($0, attachments, &error) }
        if let error { throw error }
        if keepsAttachments { return .binary(packet, attachments: attachments) }
        var result = packet
        result.kind = packet.kind == .binaryEvent ? .event : .ack
        result.attachments = 0
        result.data = replaced
        return .packet(result)
    }

    /// `value` with every placeholder replaced by its attachment as a base64 string; `error`
    /// names the first placeholder without an attachment.
    static func replacePlaceholders(_ value: JSONValue, _ attachments: [[UInt8]], _ error: inout SocketIOError?) -> JSONValue {
        switch value {
        case .object(let object):
            if object["_placeholder"]?.boolValue == true, let num = object["num"]?.intValue {
                guard num >= 0, num < attachments.count else {
                    error = SocketIOError("placeholder \(num) has no attachment")
                    return .null
                }
                return .string(Data(attachments[num]).base64EncodedString())
            }
            return .object(JSONObject(object.map { ($0.key, replacePlaceholders($0.value, attachments, &error)) }))
        case .array(let array):
            return .array(array.map { replacePlaceholders($0, attachments, &error) })
        default:
            return value
        }
    }

    /// The JSON that stands for attachment `num` in a binary packet's payload.
    static func placeholder(_ num: Int) -> JSONValue {
        ["_placeholder": true, "num": .number(JSONNumber(num))]
    }
}
