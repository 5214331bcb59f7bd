/// Reads server → client WebSocket frames (unmasked) straight from the read buffer, copying
/// only a frame that straddles two reads. The bench's receive path: it must cost less than the
/// server's send path or the bench measures itself.
struct ServerFrameReader {
    private var carry: [UInt8] = []
    private var fragments: [UInt8] = []
    private var fragmentOpcode: UInt8 = 0
    /// Largest frame or message accepted.
    var limit = 16 << 20

    /// Feeds bytes; calls `onMessage(opcode, payload)` per complete message or control frame.
    /// Returns false on a protocol violation (masked server frame, oversize).
    mutating func feed(_ bytes: UnsafeRawBufferPointer, _ onMessage: (UInt8, UnsafeRawBufferPointer) -> Void) -> Bool {
        if carry.isEmpty {
            let used = parse(bytes, onMessage)
            guard used >= 0 else { return false }
            if used < bytes.count { carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[used...])) }
            return true
        }
        var local = carry
        carry = []
        local.append(contentsOf: bytes)
        let used = local.withUnsafeBytes { parse($0, onMessage) }
        guard used >= 0 else { return false }
        if used < local.count { carry = Array(local[used...]) }
        return true
    }

    private mutating func parse(_ bytes: UnsafeRawBufferPointer, _ onMessage: (UInt8, UnsafeRawBufferPointer) -> Void) -> Int {
        var offset = 0
        let n = bytes.count
        while n - offset >= 2 {
            let b0 = bytes[offset], b1 = bytes[offset + 1]
            guard b1 & 0x80 == 0 else { return -1 }
            var header = 2
            var length = Int(b1 & 0x7F)
            if length == 126 {
                guard n - offset >= 4 else { break }
                length = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
                header = 4
            } else if length == 127 {
                guard n - offset >= 10 else { break }
                var value: UInt64 = 0
                for k in 0..<8 { value = value << 8 | UInt64(bytes[offset + 2 + k]) }
                guard value <= UInt64(limit) else { return -1 }
                length = Int(value)
                header = 10
            }
            guard length <= limit else { return -1 }
            guard n - offset >= header + length else { break }
            let payload = UnsafeRawBufferPointer(rebasing: bytes[(offset + header)..<(offset + header + length)])
            offset += header + length
            let opcode = b0 & 0x0F
            let fin = b0 & 0x80 != 0
            if opcode >= 8 {
                onMessage(opcode, payload)
            } else if opcode == 0 {
                fragments.append(contentsOf: payload)
                guard fragments.count <= limit else { return -1 }
                if fin {
                    let whole = fragments
                    fragments = []
                    whole.withUnsafeBytes { onMessage(fragmentOpcode, $0) }
                }
            } else if fin {
                onMessage(opcode, payload)
            } else {
                fragmentOpcode = opcode
                fragments = Array(payload)
            }
        }
        return offset
    }
}

/// A cheap generator for client masking keys. Masking keys protect browsers' intermediaries,
/// not a load generator on loopback; a syscall-backed generator per frame would cost more
/// than the frame.
struct MaskKeyGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed | 1 }
    mutating func next() -> UInt32 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return UInt32(truncatingIfNeeded: state >> 16)
    }
}
