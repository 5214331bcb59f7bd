import ParleyIO

extension WebSocketProtocolMachine {
    /// ``serverTextFrame(_:)``'s bytes in a new ``IOBuffer``, header and payload written
    /// straight into it (no frame array in between).
    public static func serverTextFrameBuffer(_ utf8: [UInt8]) -> IOBuffer {
        let headerSize = WebSocketFrameEncoder.headerSize(payloadLength: utf8.count, masked: false)
        return IOBuffer(count: headerSize + utf8.count) { frame in
            WebSocketFrameEncoder.writeHeader(opcode: .text, payloadLength: utf8.count, into: frame)
            utf8.withUnsafeBytes { payload in
                UnsafeMutableRawBufferPointer(rebasing: frame[headerSize...]).copyMemory(from: payload)
            }
        }
    }
}
