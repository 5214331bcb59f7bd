import Foundation

/// The Engine.IO protocol revision a session speaks: 4 (Socket.IO v3/v4 clients) or 3
/// (Socket.IO v2 clients, e.g. older Socket.IO-Client-Swift releases).
enum EngineIOVersion: Int, Sendable, Equatable {
    case v3 = 3
    case v4 = 4

    /// The `EIO` query parameter: missing means 3 (the clients that omit it are old);
    /// anything else but 3 or 4 is refused.
    init?(query: String?) {
        guard let query else { self = .v3; return }
        switch query {
        case "3": self = .v3
        case "4": self = .v4
        default: return nil
        }
    }
}

/// One Engine.IO packet: a type digit and a text or binary payload.
struct EngineIOPacket: Sendable, Equatable {
    enum Kind: UInt8, Sendable, Equatable {
        case open = 0, close, ping, pong, message, upgrade, noop
    }

    enum Payload: Sendable, Equatable {
        case text(String)
        case binary([UInt8])
    }

    var kind: Kind
    var payload: Payload

    init(_ kind: Kind, _ text: String = "") {
        self.kind = kind
        payload = .text(text)
    }

    init(binary bytes: [UInt8]) {
        kind = .message
        payload = .binary(bytes)
    }

    var text: String? { if case .text(let text) = payload { text } else { nil } }
    var isBinary: Bool { if case .binary = payload { true } else { false } }

    /// The text form `<type digit><data>`; binary packets have none (see the payload codecs
    /// and ``webSocketBinary(version:)``).
    var encodedText: String {
        "\(kind.rawValue)\(text ?? "")"
    }

    /// A binary message as a WebSocket binary frame payload: raw bytes on EIO4, the type byte
    /// `4` first on EIO3.
    func webSocketBinary(version: EngineIOVersion) -> [UInt8] {
        guard case .binary(let bytes) = payload else { return [] }
        return version == .v3 ? [kind.rawValue] + bytes : bytes
    }

    /// Parses a text packet (a WebSocket text frame, or one packet of a polling payload).
    static func decode(text: String) throws(EngineIOError) -> EngineIOPacket {
        guard let first = text.utf8.first else { throw EngineIOError("empty packet") }
        guard first >= UInt8(ascii: "0"), first <= UInt8(ascii: "6"),
              let kind = Kind(rawValue: first - UInt8(ascii: "0")) else {
            throw EngineIOError("unknown packet type \(String(decoding: [first], as: UTF8.self).debugDescription)")
        }
        return EngineIOPacket(kind, String(text.dropFirst()))
    }

    /// Parses a WebSocket binary frame: the whole frame is a binary message on EIO4; on EIO3
    /// the first byte is the packet type.
    static func decode(webSocketBinary bytes: [UInt8], version: EngineIOVersion) throws(EngineIOError) -> EngineIOPacket {
        switch version {
        case .v4:
            return EngineIOPacket(binary: bytes)
        case .v3:
            guard let first = bytes.first else { throw EngineIOError("empty binary packet") }
            guard first == Kind.message.rawValue else { throw EngineIOError("binary packet of type \(first), only messages (4) may be binary") }
            return EngineIOPacket(binary: Array(bytes.dropFirst()))
        }
    }
}

/// Why an Engine.IO packet or payload was refused, in words for the client.
struct EngineIOError: Error, Equatable, Sendable, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}
