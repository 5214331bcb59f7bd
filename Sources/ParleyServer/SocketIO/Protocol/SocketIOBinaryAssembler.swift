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
///   Socket.IO layer uses this; an application may still ask for the base64 form, once).
///
/// Either way the header is checked when it arrives: every placeholder names an announced
/// attachment, and no attachment is named twice, so the base64 form of a packet holds each
/// attachment once. And a packet with its attachments, counted as the base64 form takes
/// (the header's text plus each attachment as base64), may be at most `maxPayload` bytes:
/// what one Engine.IO message may carry, and what the packet would take on a polling
/// transport, where binary travels as base64 anyway. One request can therefore never grow
/// into more than one `maxPayload` of JSON, however many placeholders it repeats.
struct SocketIOBinaryAssembler {
    enum Output: Equatable {
        case packet(SocketIOPacket)
        /// A BINARY_EVENT / BINARY_ACK with its placeholders, and its attachments in order.
        case binary(SocketIOPacket, attachments: [[UInt8]])
        case needMore
    }

    /// Most attachments one packet may announce.
    let maxAttachments: Int
    /// Most bytes one packet with its attachments may take in its base64 form (the
    /// Engine.IO `maxPayload`).
    let maxPayload: Int
    /// Whether complete binary packets come out as ``Output/binary(_:attachments:)``.
    let keepsAttachments: Bool
    private var waiting: SocketIOPacket?
    private var received: [[UInt8]] = []
    /// The waiting packet's size so far, counted as ``maxPayload`` counts.
    private var receivedSize = 0

    init(maxAttachments: Int = 10, maxPayload: Int = 1_000_000, keepsAttachments: Bool = false) {
        self.maxAttachments = maxAttachments
        self.maxPayload = maxPayload
        self.keepsAttachments = keepsAttachments
    }

    var isWaiting: Bool { waiting != nil }

    mutating func feed(text: String) throws(SocketIOError) -> Output {
        guard waiting == nil else {
            reset()
            throw SocketIOError("text packet while waiting for binary attachments")
        }
        let packet = try SocketIOPacket.decode(text)
        guard packet.kind == .binaryEvent || packet.kind == .binaryAck, packet.attachments > 0 else {
            return .packet(packet)
        }
        guard packet.attachments <= maxAttachments else {
            throw SocketIOError("too many attachments (\(packet.attachments), limit \(maxAttachments))")
        }
        if let data = packet.data {
            var used = [Bool](repeating: false, count: packet.attachments)
            try Self.checkPlaceholders(data, &used)
        }
        let size = text.utf8.count
        guard size <= maxPayload else { throw tooLarge(size) }
        waiting = packet
        received = []
        receivedSize = size
        return .needMore
    }

    mutating func feed(binary bytes: [UInt8]) throws(SocketIOError) -> Output {
        guard let packet = waiting else { throw SocketIOError("unexpected binary attachment") }
        let size = receivedSize + Self.base64Length(bytes.count)
        guard size <= maxPayload else {
            reset()
            throw tooLarge(size)
        }
        received.append(bytes)
        receivedSize = size
        guard received.count == packet.attachments else { return .needMore }
        let attachments = received
        reset()
        if keepsAttachments { return .binary(packet, attachments: attachments) }
        var result = packet
        result.kind = packet.kind == .binaryEvent ? .event : .ack
        result.attachments = 0
        result.data = packet.data.map { Self.replacingPlaceholders($0, attachments) }
        return .packet(result)
    }

    private mutating func reset() {
        waiting = nil
        received = []
        receivedSize = 0
    }

    private func tooLarge(_ size: Int) -> SocketIOError {
        SocketIOError("binary packet too large (at least \(size) bytes with its attachments as base64, limit \(maxPayload))")
    }

    /// Characters of the base64 form of `count` bytes.
    static func base64Length(_ count: Int) -> Int { (count + 2) / 3 * 4 }

    /// Refuses a placeholder (an object whose `_placeholder` is true, as Socket.IO's own parser
    /// reads it) that names no attachment, or names one already named: `used[i]` records
    /// attachment i.
    static func checkPlaceholders(_ value: JSONValue, _ used: inout [Bool]) throws(SocketIOError) {
        switch value {
        case .object(let object):
            if object["_placeholder"]?.boolValue == true {
                guard let num = object["num"]?.intValue else { throw SocketIOError("placeholder without a valid num") }
                guard num >= 0, num < used.count else { throw SocketIOError("placeholder \(num) has no attachment") }
                guard !used[num] else { throw SocketIOError("placeholder \(num) is used more than once") }
                used[num] = true
                return
            }
            for member in object { try checkPlaceholders(member.value, &used) }
        case .array(let array):
            for item in array { try checkPlaceholders(item, &used) }
        default:
            return
        }
    }

    /// `value` with every placeholder replaced by its attachment as a base64 string. The
    /// placeholders must have passed ``checkPlaceholders(_:_:)`` (the assembler's packets
    /// have), so each attachment is converted at most once; one naming no attachment
    /// becomes null.
    static func replacingPlaceholders(_ value: JSONValue, _ attachments: [[UInt8]]) -> JSONValue {
        switch value {
        case .object(let object):
            if object["_placeholder"]?.boolValue == true {
                guard let num = object["num"]?.intValue, num >= 0, num < attachments.count else { return .null }
                return .string(Data(attachments[num]).base64EncodedString())
            }
            return .object(JSONObject(object.map { ($0.key, replacingPlaceholders($0.value, attachments)) }))
        case .array(let array):
            return .array(array.map { replacingPlaceholders($0, attachments) })
        default:
            return value
        }
    }

    /// The JSON that stands for attachment `num` in a binary packet's payload.
    static func placeholder(_ num: Int) -> JSONValue {
        ["_placeholder": true, "num": .number(JSONNumber(num))]
    }
}
