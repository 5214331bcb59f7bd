/// Splits a byte stream into frames, one at a time, validating everything that can be
/// checked per frame (RFC 6455 §5.2–5.5): masking direction, reserved bits and opcodes,
/// control-frame rules, the 64-bit length MSB, and the frame size limit.
///
/// Feed bytes as they arrive, then call ``nextFrame()`` until it returns `nil`. Message-level
/// rules (fragment sequencing, UTF-8, message size) belong to ``WebSocketProtocolMachine``.
/// After a thrown error the decoder keeps throwing it: the connection is done.
public struct WebSocketFrameDecoder {
    /// The side that *receives* with this decoder.
    public let role: WebSocketRole
    /// Frames whose declared payload length exceeds this fail with 1009 as soon as the
    /// header is read, so the payload is never buffered.
    public let maxFramePayload: Int
    /// Whether RSV1 may be set on the first frame of a data message (permessage-deflate
    /// negotiated). RSV2/RSV3 are always rejected: Parley negotiates no extension using them.
    public var allowsRSV1: Bool

    private var buffer: [UInt8] = []
    private var readIndex = 0
    private var failure: WebSocketProtocolError?
    /// Header of the frame whose payload is still arriving (offsets relative to `readIndex`).
    private var pending: PendingFrame?

    private struct PendingFrame {
        var opcode: WebSocketOpcode
        var rsv1: Bool
        var headerLength: Int
        var payloadLength: Int
        var maskingKey: UInt32?
    }

    /// Creates a decoder for the receiving `role`.
    public init(role: WebSocketRole, maxFramePayload: Int = 1 << 20, allowsRSV1: Bool = false) {
        self.role = role
        self.maxFramePayload = maxFramePayload
        self.allowsRSV1 = allowsRSV1
    }

    /// Bytes buffered but not yet returned as frames.
    public var bufferedByteCount: Int { buffer.count - readIndex }

    /// Appends received bytes.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        compactIfWorthIt()
        buffer.append(contentsOf: bytes)
    }

    /// Appends received bytes.
    public mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    private mutating func compactIfWorthIt() {
        if readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            readIndex = 0
        } else if readIndex >= 4096 && readIndex * 2 >= buffer.count {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
    }

    /// Returns the next complete frame, `nil` if more bytes are needed, or throws the
    /// protocol violation (1002) or size error (1009) found.
    public mutating func nextFrame() throws(WebSocketProtocolError) -> WebSocketFrame? {
        if let failure { throw failure }
        do {
            return try parseFrame()
        } catch {
            failure = error
            throw error
        }
    }

    /// The already-received part of a frame whose header has been read but whose payload is
    /// incomplete, unmasked, starting at payload offset `offset`; nil if no frame is pending.
    /// Lets the protocol machine reject invalid UTF-8 before a long frame has fully arrived.
    public func partialPayload(from offset: Int) -> (opcode: WebSocketOpcode, rsv1: Bool, bytes: [UInt8])? {
        guard failure == nil, let pending else { return nil }
        let start = readIndex + pending.headerLength + offset
        guard start < buffer.count else { return (pending.opcode, pending.rsv1, []) }
        var bytes = Array(buffer[start...])
        if let key = pending.maskingKey {
            bytes.withUnsafeMutableBytes { WebSocketFrameEncoder.mask($0, maskingKey: key, keyOffset: offset & 3) }
        }
        return (pending.opcode, pending.rsv1, bytes)
    }

    private mutating func parseFrame() throws(WebSocketProtocolError) -> WebSocketFrame? {
        let available = buffer.count - readIndex
        guard available >= 2 else { return nil }
        let b0 = buffer[readIndex]
        let b1 = buffer[readIndex + 1]
        let fin = b0 & 0x80 != 0
        let rsv1 = b0 & 0x40 != 0
        let rsv2 = b0 & 0x20 != 0
        let rsv3 = b0 & 0x10 != 0
        guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0F) else {
            throw WebSocketProtocolError(.protocolError, "reserved opcode \(b0 & 0x0F)")
        }
        if rsv2 || rsv3 {
            throw WebSocketProtocolError(.protocolError, "RSV2/RSV3 set without extension")
        }
        if rsv1 {
            if !allowsRSV1 {
                throw WebSocketProtocolError(.protocolError, "RSV1 set without extension")
            }
            if opcode == .continuation || opcode.isControl {
                throw WebSocketProtocolError(.protocolError, "RSV1 set on a control or continuation frame")
            }
        }
        let masked = b1 & 0x80 != 0
        switch role {
        case .server where !masked:
            throw WebSocketProtocolError(.protocolError, "client frame not masked")
        case .client where masked:
            throw WebSocketProtocolError(.protocolError, "server frame masked")
        default: break
        }
        let length7 = Int(b1 & 0x7F)
        if opcode.isControl {
            if !fin { throw WebSocketProtocolError(.protocolError, "fragmented control frame") }
            if length7 > 125 { throw WebSocketProtocolError(.protocolError, "control frame payload > 125") }
        }
        var headerLength = 2
        let payloadLength: Int
        switch length7 {
        case 126:
            guard available >= 4 else { return nil }
            payloadLength = Int(buffer[readIndex + 2]) << 8 | Int(buffer[readIndex + 3])
            headerLength = 4
        case 127:
            guard available >= 10 else { return nil }
            var length: UInt64 = 0
            for i in 2..<10 { length = length << 8 | UInt64(buffer[readIndex + i]) }
            if length & (1 << 63) != 0 {
                throw WebSocketProtocolError(.protocolError, "64-bit length with MSB set")
            }
            guard length <= UInt64(maxFramePayload) else {
                throw WebSocketProtocolError(.messageTooBig, "frame too big")
            }
            payloadLength = Int(length)
            headerLength = 10
        default:
            payloadLength = length7
        }
        if payloadLength > maxFramePayload {
            throw WebSocketProtocolError(.messageTooBig, "frame too big")
        }
        var maskingKey: UInt32 = 0
        if masked {
            guard available >= headerLength + 4 else { return nil }
            for i in 0..<4 { maskingKey = maskingKey << 8 | UInt32(buffer[readIndex + headerLength + i]) }
            headerLength += 4
        }
        guard available >= headerLength + payloadLength else {
            if pending == nil {
                buffer.reserveCapacity(readIndex + headerLength + payloadLength)
                pending = PendingFrame(opcode: opcode, rsv1: rsv1, headerLength: headerLength,
                                       payloadLength: payloadLength, maskingKey: masked ? maskingKey : nil)
            }
            return nil
        }
        pending = nil
        let start = readIndex + headerLength
        var payload = Array(buffer[start..<(start + payloadLength)])
        readIndex = start + payloadLength
        if masked {
            payload.withUnsafeMutableBytes { WebSocketFrameEncoder.mask($0, maskingKey: maskingKey) }
        }
        return WebSocketFrame(fin: fin, rsv1: rsv1, rsv2: rsv2, rsv3: rsv3, opcode: opcode, payload: payload)
    }
}
