/// Frames payloads for the wire (RFC 6455 §5.2). Stateless.
///
/// A masking key is given as a `UInt32` whose big-endian bytes are the four key bytes in
/// wire order. Servers pass `nil` (server frames are never masked); clients pass a fresh
/// random key for every frame.
public enum WebSocketFrameEncoder {
    /// Largest header: 2 + 8 (64-bit length) + 4 (masking key).
    public static let maxHeaderSize = 14

    /// Bytes of the header for a payload of `payloadLength` bytes.
    public static func headerSize(payloadLength: Int, masked: Bool) -> Int {
        (payloadLength <= 125 ? 2 : payloadLength <= 0xFFFF ? 4 : 10) + (masked ? 4 : 0)
    }

    /// Writes the frame header for a payload of `payloadLength` bytes at the start of
    /// `buffer` (at least ``headerSize(payloadLength:masked:)`` bytes); returns its size.
    @discardableResult
    public static func writeHeader(opcode: WebSocketOpcode, payloadLength: Int, fin: Bool = true,
                                   rsv1: Bool = false, maskingKey: UInt32? = nil,
                                   into buffer: UnsafeMutableRawBufferPointer) -> Int {
        precondition(payloadLength >= 0)
        let size = headerSize(payloadLength: payloadLength, masked: maskingKey != nil)
        precondition(buffer.count >= size)
        var first = opcode.rawValue
        if fin { first |= 0x80 }
        if rsv1 { first |= 0x40 }
        buffer[0] = first
        let maskBit: UInt8 = maskingKey == nil ? 0 : 0x80
        var at = 2
        if payloadLength <= 125 {
            buffer[1] = maskBit | UInt8(payloadLength)
        } else if payloadLength <= 0xFFFF {
            buffer[1] = maskBit | 126
            buffer[2] = UInt8(payloadLength >> 8)
            buffer[3] = UInt8(payloadLength & 0xFF)
            at = 4
        } else {
            buffer[1] = maskBit | 127
            let length = UInt64(payloadLength)
            for index in 0..<8 { buffer[2 + index] = UInt8(truncatingIfNeeded: length >> UInt64(56 - 8 * index)) }
            at = 10
        }
        if let key = maskingKey {
            buffer[at] = UInt8(truncatingIfNeeded: key >> 24)
            buffer[at + 1] = UInt8(truncatingIfNeeded: key >> 16)
            buffer[at + 2] = UInt8(truncatingIfNeeded: key >> 8)
            buffer[at + 3] = UInt8(truncatingIfNeeded: key)
        }
        return size
    }

    /// Appends just the frame header for a payload of `payloadLength` bytes. With a
    /// `maskingKey` the caller must append the payload masked with ``mask(_:maskingKey:)``.
    /// Lets a server frame one payload once and share `header + payload` between connections.
    public static func appendHeader(opcode: WebSocketOpcode, payloadLength: Int, fin: Bool = true,
                                    rsv1: Bool = false, maskingKey: UInt32? = nil,
                                    into buffer: inout [UInt8]) {
        let start = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: headerSize(payloadLength: payloadLength, masked: maskingKey != nil)))
        buffer.withUnsafeMutableBytes { bytes in
            writeHeader(opcode: opcode, payloadLength: payloadLength, fin: fin, rsv1: rsv1, maskingKey: maskingKey,
                        into: UnsafeMutableRawBufferPointer(rebasing: bytes[start...]))
        }
    }

    /// The frame header alone (see ``appendHeader(opcode:payloadLength:fin:rsv1:maskingKey:into:)``).
    public static func encodeHeader(opcode: WebSocketOpcode, payloadLength: Int, fin: Bool = true,
                                    rsv1: Bool = false, maskingKey: UInt32? = nil) -> [UInt8] {
        var header: [UInt8] = []
        header.reserveCapacity(maxHeaderSize)
        appendHeader(opcode: opcode, payloadLength: payloadLength, fin: fin, rsv1: rsv1,
                     maskingKey: maskingKey, into: &header)
        return header
    }

    /// Appends a whole frame (header and, if `maskingKey` is given, masked payload).
    public static func append(opcode: WebSocketOpcode, payload: some Collection<UInt8>, fin: Bool = true,
                              rsv1: Bool = false, maskingKey: UInt32? = nil, into buffer: inout [UInt8]) {
        let count = payload.count
        buffer.reserveCapacity(buffer.count + maxHeaderSize + count)
        appendHeader(opcode: opcode, payloadLength: count, fin: fin, rsv1: rsv1,
                     maskingKey: maskingKey, into: &buffer)
        let start = buffer.count
        buffer.append(contentsOf: payload)
        if let key = maskingKey {
            buffer.withUnsafeMutableBytes { raw in
                mask(UnsafeMutableRawBufferPointer(rebasing: raw[start...]), maskingKey: key)
            }
        }
    }

    /// A whole frame as a new array.
    public static func encode(opcode: WebSocketOpcode, payload: some Collection<UInt8>, fin: Bool = true,
                              rsv1: Bool = false, maskingKey: UInt32? = nil) -> [UInt8] {
        var buffer: [UInt8] = []
        append(opcode: opcode, payload: payload, fin: fin, rsv1: rsv1, maskingKey: maskingKey, into: &buffer)
        return buffer
    }

    /// XORs `bytes` in place with the masking key (RFC 6455 §5.3), starting at key offset
    /// `keyOffset` (0...3) — masking is its own inverse, so this also unmasks.
    public static func mask(_ bytes: UnsafeMutableRawBufferPointer, maskingKey: UInt32, keyOffset: Int = 0) {
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress else { return }
        let keyBytes: (UInt8, UInt8, UInt8, UInt8) = (UInt8(truncatingIfNeeded: maskingKey >> 24),
                                                     UInt8(truncatingIfNeeded: maskingKey >> 16),
                                                     UInt8(truncatingIfNeeded: maskingKey >> 8),
                                                     UInt8(truncatingIfNeeded: maskingKey))
        func keyByte(_ i: Int) -> UInt8 {
            switch i & 3 {
            case 0: return keyBytes.0
            case 1: return keyBytes.1
            case 2: return keyBytes.2
            default: return keyBytes.3
            }
        }
        // Build the 8-byte pattern in memory order, starting at keyOffset.
        var pattern: UInt64 = 0
        withUnsafeMutableBytes(of: &pattern) { p in
            for i in 0..<8 { p[i] = keyByte(keyOffset + i) }
        }
        var i = 0
        while i + 8 <= count {
            let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            base.storeBytes(of: word ^ pattern, toByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < count {
            base.storeBytes(of: base.load(fromByteOffset: i, as: UInt8.self) ^ keyByte(keyOffset + i),
                            toByteOffset: i, as: UInt8.self)
            i += 1
        }
    }
}
