import ParleyCore

/// What a PROXY protocol header says about the connection it starts.
struct ProxyHeader: Equatable, Sendable {
    /// The client's address; nil when the proxy speaks for itself (v1 `UNKNOWN`, v2 `LOCAL`,
    /// or an address family other than TCP/UDP over IPv4/IPv6): then the peer is the client.
    var source: IPAddress?
    var sourcePort: Int?
}

/// What ``ProxyHeaderDecoder/feed(_:)`` found.
enum ProxyHeaderEvent: Equatable {
    /// The header is not complete yet.
    case needMoreData
    /// The header, and the bytes after it (the first bytes of the line protocol).
    case header(ProxyHeader, leftover: [UInt8])
    /// Not a PROXY header, or a broken one; the connection should be closed.
    case invalid(String)
}

/// The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and 2) a trusted proxy
/// puts before a line connection's bytes. A pure state machine: bytes in, one event out, no
/// socket. Hard limits: a v1 header is at most 107 bytes with its CRLF; a v2 header is 16
/// bytes plus at most ``maxV2PayloadBytes``. Garbage is refused as soon as a byte shows it.
struct ProxyHeaderDecoder {
    static let maxV1Bytes = 107
    static let v2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    /// Addresses (216 bytes at most, for UNIX sockets) and TLVs; HAProxy's own TLVs fit.
    static let maxV2PayloadBytes = 1024
    private static let v1Prefix = Array("PROXY ".utf8)

    private var buffer: [UInt8] = []
    private var done = false

    /// Feeds more bytes. After `header` or `invalid`, the decoder is spent (later bytes are
    /// the caller's).
    mutating func feed(_ bytes: some Sequence<UInt8>) -> ProxyHeaderEvent {
        guard !done else { return .invalid("PROXY header already read") }
        let input = Array(bytes)
        for (index, byte) in input.enumerated() {
            buffer.append(byte)
            guard let event = step() else { continue }
            done = true
            buffer = []
            if case .header(let header, _) = event { return .header(header, leftover: Array(input[(index + 1)...])) }
            return event
        }
        return .needMoreData
    }

    /// Looks at the buffer after one more byte: nil to go on, else the outcome.
    private mutating func step() -> ProxyHeaderEvent? {
        let count = buffer.count
        let first = buffer[0]
        if first == UInt8(ascii: "P") {
            if count <= Self.v1Prefix.count {
                return buffer[count - 1] == Self.v1Prefix[count - 1] ? nil : .invalid("not a PROXY header")
            }
            if buffer[count - 1] == 0x0A {
                guard buffer[count - 2] == 0x0D else { return .invalid("PROXY v1 header must end with CRLF") }
                return v1(Array(buffer[Self.v1Prefix.count..<(count - 2)]))
            }
            if count >= Self.maxV1Bytes { return .invalid("PROXY v1 header longer than \(Self.maxV1Bytes) bytes") }
            let byte = buffer[count - 1]
            guard byte == 0x0D || (byte >= 0x20 && byte < 0x7F) else { return .invalid("PROXY v1 header has a byte that is not printable") }
            return nil
        }
        if first == Self.v2Signature[0] {
            if count <= Self.v2Signature.count {
                return buffer[count - 1] == Self.v2Signature[count - 1] ? nil : .invalid("not a PROXY header")
            }
            if count == 13, buffer[12] >> 4 != 2 { return .invalid("PROXY v2 header of an unknown version") }
            if count == 13, buffer[12] & 0x0F > 1 { return .invalid("PROXY v2 header with an unknown command") }
            guard count >= 16 else { return nil }
            let length = Int(buffer[14]) << 8 | Int(buffer[15])
            guard length <= Self.maxV2PayloadBytes else {
                return .invalid("PROXY v2 header longer than 16 + \(Self.maxV2PayloadBytes) bytes")
            }
            guard count == 16 + length else { return nil }
            return v2(command: buffer[12] & 0x0F, family: buffer[13], payload: buffer[16...])
        }
        return .invalid("not a PROXY header")
    }

    /// `TCP4 SRC DST SPORT DPORT`, `TCP6 …` or `UNKNOWN …`.
    private func v1(_ line: [UInt8]) -> ProxyHeaderEvent {
        let fields = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        if fields.first == "UNKNOWN" { return .header(ProxyHeader(), leftover: []) }
        guard fields.count == 5, fields[0] == "TCP4" || fields[0] == "TCP6" else { return .invalid("PROXY v1 header is malformed") }
        guard let source = IPAddress(parsing: fields[1]), IPAddress(parsing: fields[2]) != nil,
              source.isIPv4 == (fields[0] == "TCP4") || fields[1].contains(":") == (fields[0] == "TCP6"),
              let sourcePort = Self.port(fields[3]), Self.port(fields[4]) != nil else {
            return .invalid("PROXY v1 header has a bad address or port")
        }
        return .header(ProxyHeader(source: source, sourcePort: sourcePort), leftover: [])
    }

    private static func port(_ text: String) -> Int? {
        guard !text.isEmpty, text.count <= 5, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              text.count == 1 || !text.hasPrefix("0"), let value = Int(text), value <= 65535 else { return nil }
        return value
    }

    private func v2(command: UInt8, family: UInt8, payload: ArraySlice<UInt8>) -> ProxyHeaderEvent {
        // LOCAL: a health check from the proxy itself.
        guard command == 1 else { return .header(ProxyHeader(), leftover: []) }
        let bytes = Array(payload)
        switch family >> 4 {
        case 1:  // AF_INET: src 4, dst 4, sport 2, dport 2
            guard bytes.count >= 12 else { return .invalid("PROXY v2 IPv4 addresses are cut short") }
            return .header(ProxyHeader(source: IPAddress(bytes: Array(bytes[0..<4])),
                                       sourcePort: Int(bytes[8]) << 8 | Int(bytes[9])), leftover: [])
        case 2:  // AF_INET6: src 16, dst 16, sport 2, dport 2
            guard bytes.count >= 36 else { return .invalid("PROXY v2 IPv6 addresses are cut short") }
            return .header(ProxyHeader(source: IPAddress(bytes: Array(bytes[0..<16])),
                                       sourcePort: Int(bytes[32]) << 8 | Int(bytes[33])), leftover: [])
        default:  // AF_UNSPEC, AF_UNIX: no address to take
            return .header(ProxyHeader(), leftover: [])
        }
    }
}
