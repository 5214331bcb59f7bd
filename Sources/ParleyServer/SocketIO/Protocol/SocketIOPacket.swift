import Foundation
import ParleyCore

/// One Socket.IO packet, carried in an Engine.IO message:
/// `<type>[<attachments>-][<nsp>,][<ackId>][JSON]`.
struct SocketIOPacket: Sendable, Equatable {
    enum Kind: UInt8, Sendable, Equatable {
        case connect = 0, disconnect, event, ack, connectError, binaryEvent, binaryAck
    }

    var kind: Kind
    var namespace: String = "/"
    var id: Int?
    var data: JSONValue?
    /// Binary attachments that follow (BINARY_EVENT / BINARY_ACK only).
    var attachments: Int = 0

    /// Largest ack id accepted (upstream clients count up from 0).
    static let maxAckID = Int(Int32.max)

    // MARK: encoding

    var encoded: String {
        var out = String(kind.rawValue)
        if kind == .binaryEvent || kind == .binaryAck { out += "\(attachments)-" }
        if namespace != "/" { out += namespace + "," }
        if let id { out += String(id) }
        if let data { out += data.jsonString }
        return out
    }

    /// `2["name",args...]` (with an ack id when given).
    static func event(_ name: String, _ arguments: [JSONValue], namespace: String = "/", id: Int? = nil) -> SocketIOPacket {
        SocketIOPacket(kind: .event, namespace: namespace, id: id, data: .array([.string(name)] + arguments))
    }

    // MARK: decoding

    /// Parses the text of an Engine.IO message strictly: the shape of each type's payload is
    /// checked (CONNECT: object or none; DISCONNECT: none; EVENT: array starting with a name;
    /// ACK: array; CONNECT_ERROR: object or string).
    static func decode(_ text: String) throws(SocketIOError) -> SocketIOPacket {
        let bytes = Array(text.utf8)
        var i = 0
        guard let first = bytes.first else { throw SocketIOError("empty packet") }
        guard first >= UInt8(ascii: "0"), first <= UInt8(ascii: "6"), let kind = Kind(rawValue: first - UInt8(ascii: "0")) else {
            throw SocketIOError("unknown packet type \(String(decoding: [first], as: UTF8.self).debugDescription)")
        }
        i = 1
        var packet = SocketIOPacket(kind: kind)
        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        if kind == .binaryEvent || kind == .binaryAck {
            let start = i
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
            guard i > start, i < bytes.count, bytes[i] == UInt8(ascii: "-"), i - start <= 6,
                  let count = Int(String(decoding: bytes[start..<i], as: UTF8.self)) else {
                throw SocketIOError("binary packet without a valid attachment count")
            }
            packet.attachments = count
            i += 1
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "/") {
            let start = i
            while i < bytes.count, bytes[i] != UInt8(ascii: ",") { i += 1 }
            packet.namespace = String(decoding: bytes[start..<i], as: UTF8.self)
            if i < bytes.count { i += 1 }
            // Socket.IO v2 clients may append a query to the namespace (`/chat?token=1`).
            if let query = packet.namespace.firstIndex(of: "?") { packet.namespace = String(packet.namespace[..<query]) }
        }
        if i < bytes.count, isDigit(bytes[i]) {
            let start = i
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
            guard i - start <= 10, let id = Int(String(decoding: bytes[start..<i], as: UTF8.self)), id <= maxAckID else {
                throw SocketIOError("ack id out of range")
            }
            packet.id = id
        }
        if i < bytes.count {
            do {
                packet.data = try JSONParser.parse(Array(bytes[i...]))
            } catch {
                throw SocketIOError("invalid JSON payload: \(error)")
            }
        }
        try packet.validate()
        return packet
    }

    private func validate() throws(SocketIOError) {
        switch kind {
        case .connect:
            guard data == nil || data?.objectValue != nil else { throw SocketIOError("CONNECT payload must be an object") }
        case .disconnect:
            guard data == nil else { throw SocketIOError("DISCONNECT takes no payload") }
        case .event, .binaryEvent:
            guard let array = data?.arrayValue, let name = array.first,
                  name.stringValue != nil || name.numberValue != nil else {
                throw SocketIOError("EVENT payload must be an array starting with the event name")
            }
        case .ack, .binaryAck:
            guard id != nil else { throw SocketIOError("ACK needs an id") }
            guard data?.arrayValue != nil else { throw SocketIOError("ACK payload must be an array") }
        case .connectError:
            guard data?.objectValue != nil || data?.stringValue != nil else {
                throw SocketIOError("CONNECT_ERROR payload must be an object or a string")
            }
        }
    }
}

/// Why a Socket.IO packet was refused.
struct SocketIOError: Error, Equatable, Sendable, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}
