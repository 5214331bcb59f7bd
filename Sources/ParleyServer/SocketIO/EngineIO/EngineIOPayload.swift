import Foundation

/// HTTP long-polling payloads: several Engine.IO packets in one request or response body.
///
/// EIO4: packets joined by the record separator `\u{1e}`, binary packets as `b<base64>`.
/// EIO3: each packet as `<length>:<packet>` where length counts UTF-16 code units (JS string
/// length), binary packets as `b4<base64>`; clients that support binary may also POST the
/// XHR2 form: per packet `0x00` (text) or `0x01` (binary), the byte length as decimal digit
/// bytes (0...9), `0xFF`, then the packet bytes (binary packets carry their type byte).
enum EngineIOPayload {
    static let separator: UInt8 = 0x1E

    // MARK: encoding

    static func encode(_ packets: [EngineIOPacket], version: EngineIOVersion) -> [UInt8] {
        switch version {
        case .v4: encodeV4(packets)
        case .v3: encodeV3(packets)
        }
    }

    static func encodeV4(_ packets: [EngineIOPacket]) -> [UInt8] {
        var out: [UInt8] = []
        for (index, packet) in packets.enumerated() {
            if index > 0 { out.append(separator) }
            switch packet.payload {
            case .text(let text):
                out.append(packet.kind.rawValue + UInt8(ascii: "0"))
                out.append(contentsOf: text.utf8)
            case .binary(let bytes):
                out.append(UInt8(ascii: "b"))
                out.append(contentsOf: Data(bytes).base64EncodedString().utf8)
            }
        }
        return out
    }

    /// The text form (what `b64=1` clients and every JS client read); Parley never answers
    /// with the XHR2 binary form.
    static func encodeV3(_ packets: [EngineIOPacket]) -> [UInt8] {
        var out: [UInt8] = []
        for packet in packets {
            let text: String = switch packet.payload {
            case .text(let text): "\(packet.kind.rawValue)\(text)"
            case .binary(let bytes): "b\(packet.kind.rawValue)\(Data(bytes).base64EncodedString())"
            }
            out.append(contentsOf: "\(text.utf16.count):".utf8)
            out.append(contentsOf: text.utf8)
        }
        return out
    }

    // MARK: decoding

    static func decode(_ body: [UInt8], version: EngineIOVersion) throws(EngineIOError) -> [EngineIOPacket] {
        switch version {
        case .v4: try decodeV4(body)
        case .v3: try decodeV3(body)
        }
    }

    static func decodeV4(_ body: [UInt8]) throws(EngineIOError) -> [EngineIOPacket] {
        guard !body.isEmpty else { throw EngineIOError("empty payload") }
        var packets: [EngineIOPacket] = []
        for part in body.split(separator: separator, omittingEmptySubsequences: false) {
            guard let text = String(validating: part, as: UTF8.self) else { throw EngineIOError("payload is not valid UTF-8") }
            packets.append(try decodeTextOrBase64(text, base64Prefix: "b"))
        }
        return packets
    }

    private static func decodeTextOrBase64(_ text: String, base64Prefix: String) throws(EngineIOError) -> EngineIOPacket {
        if text.hasPrefix(base64Prefix) {
            guard let data = Data(base64Encoded: String(text.dropFirst(base64Prefix.count))) else {
                throw EngineIOError("invalid base64 in binary packet")
            }
            return EngineIOPacket(binary: Array(data))
        }
        return try EngineIOPacket.decode(text: text)
    }

    static func decodeV3(_ body: [UInt8]) throws(EngineIOError) -> [EngineIOPacket] {
        guard let first = body.first else { throw EngineIOError("empty payload") }
        if first <= 1 { return try decodeV3Binary(body) }
        guard let text = String(validating: body, as: UTF8.self) else { throw EngineIOError("payload is not valid UTF-8") }
        var packets: [EngineIOPacket] = []
        // Lengths count UTF-16 code units, so walk the UTF-16 view.
        let units = Array(text.utf16)
        var i = 0
        while i < units.count {
            var length = 0, digits = 0
            while i < units.count, units[i] != UInt16(UInt8(ascii: ":")) {
                let unit = units[i]
                guard unit >= 0x30, unit <= 0x39 else { throw EngineIOError("payload length is not a number") }
                length = length * 10 + Int(unit - 0x30)
                digits += 1
                guard digits <= 10 else { throw EngineIOError("payload length too long") }
                i += 1
            }
            guard i < units.count, digits > 0 else { throw EngineIOError("truncated payload (no length)") }
            i += 1
            guard length > 0, i + length <= units.count else { throw EngineIOError("truncated payload (packet shorter than its length)") }
            let packetText = String(decoding: units[i..<(i + length)], as: UTF16.self)
            i += length
            if packetText.hasPrefix("b") {
                guard packetText.hasPrefix("b4") else { throw EngineIOError("binary packet must be a message (b4)") }
                packets.append(try decodeTextOrBase64(packetText, base64Prefix: "b4"))
            } else {
                packets.append(try EngineIOPacket.decode(text: packetText))
            }
        }
        return packets
    }

    /// The XHR2 form; lengths count bytes.
    static func decodeV3Binary(_ body: [UInt8]) throws(EngineIOError) -> [EngineIOPacket] {
        var packets: [EngineIOPacket] = []
        var i = 0
        while i < body.count {
            let isBinary = body[i]
            guard isBinary <= 1 else { throw EngineIOError("binary payload: bad packet marker") }
            i += 1
            var length = 0, digits = 0
            while i < body.count, body[i] != 0xFF {
                guard body[i] <= 9 else { throw EngineIOError("binary payload: bad length digit") }
                length = length * 10 + Int(body[i])
                digits += 1
                guard digits <= 10 else { throw EngineIOError("binary payload: length too long") }
                i += 1
            }
            guard i < body.count, digits > 0 else { throw EngineIOError("truncated payload (no length)") }
            i += 1
            guard length > 0, i + length <= body.count else { throw EngineIOError("truncated payload (packet shorter than its length)") }
            let bytes = Array(body[i..<(i + length)])
            i += length
            if isBinary == 1 {
                packets.append(try EngineIOPacket.decode(webSocketBinary: bytes, version: .v3))
            } else {
                guard let text = String(validating: bytes, as: UTF8.self) else { throw EngineIOError("payload is not valid UTF-8") }
                packets.append(try EngineIOPacket.decode(text: text))
            }
        }
        return packets
    }
}
