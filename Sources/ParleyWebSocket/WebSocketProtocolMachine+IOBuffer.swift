import ParleyIO

extension WebSocketProtocolMachine {
    /// ``serverTextFrame(_:)``'s bytes in a new ``IOBuffer``, header and payload written
    /// straight into it (no frame array in between).
    public static func serverTextFrameBuffer(_ utf8: [UInt8]) -> IOBuffer {
        let count = utf8.count
        let headerSize = count <= 125 ? 2 : count <= 0xFFFF ? 4 : 10
        return IOBuffer(count: headerSize + count) { frame in
            frame[0] = 0x80 | WebSocketOpcode.text.rawValue
            switch headerSize {
            case 2:
                frame[1] = UInt8(count)
            case 4:
                frame[1] = 126
                frame[2] = UInt8(count >> 8)
                frame[3] = UInt8(count & 0xFF)
            default:
                frame[1] = 127
                for index in 0..<8 { frame[2 + index] = UInt8(truncatingIfNeeded: UInt64(count) >> UInt64(56 - 8 * index)) }
            }
            utf8.withUnsafeBytes { payload in
                UnsafeMutableRawBufferPointer(rebasing: frame[headerSize...]).copyMemory(from: payload)
            }
        }
    }
}
