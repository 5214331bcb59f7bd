/// A frame header as read from the wire (RFC 6455 §5.2), already validated.
public struct WebSocketFrameHeader: Sendable, Equatable {
    /// The first header byte as on the wire: FIN, RSV1–3 and the opcode.
    public var firstByte: UInt8
    /// Bytes before the payload: 2 to 14.
    public var headerLength: Int
    /// Bytes of payload.
    public var payloadLength: Int
    /// The masking key (big-endian bytes in wire order), nil for an unmasked frame.
    public var maskingKey: UInt32?

    /// Final fragment of a message.
    public var fin: Bool { firstByte & 0x80 != 0 }
    /// RSV1: with permessage-deflate, "this message is compressed" (first frame only).
    public var rsv1: Bool { firstByte & 0x40 != 0 }
    /// What the frame carries (the decoder only produces headers with a known opcode).
    public var opcode: WebSocketOpcode { WebSocketOpcode(rawValue: firstByte & 0x0F) ?? .continuation }
}

/// Splits a byte stream into frames, validating everything that can be checked per frame
/// (RFC 6455 §5.2–5.5): masking direction, reserved bits and opcodes, control-frame rules,
/// the 64-bit length MSB, and the frame size limit.
///
/// ``decode(_:_:)`` hands each complete frame's payload straight from the bytes it was given
/// (no copy; still masked when the frame is); only a frame that straddles two calls is
/// copied, into one buffer, so a client reading a server's fan-out costs no allocation per
/// frame. Message-level rules (fragment sequencing, UTF-8, message size) belong to
/// ``WebSocketProtocolMachine``. After a thrown error the decoder keeps throwing it.
public struct WebSocketFrameDecoder {
    /// The side that *receives* with this decoder.
    public let role: WebSocketRole
    /// Frames whose declared payload length exceeds this fail with 1009 as soon as the
    /// header is read, so the payload is never buffered.
    public let maxFramePayload: Int
    /// Whether RSV1 may be set on the first frame of a data message (permessage-deflate
    /// negotiated). RSV2/RSV3 are always rejected: Parley negotiates no extension using them.
    public var allowsRSV1: Bool

    /// The start of a frame that did not fit in the bytes received so far.
    private var carry: [UInt8] = []
    /// The carried frame's header, once all of it has arrived.
    private var carriedHeader: WebSocketFrameHeader?
    private var failure: WebSocketProtocolError?
    /// Bytes given to ``feed(_:)-(UnsafeRawBufferPointer)`` and not yet taken by ``nextFrame()``.
    private var queued: [UInt8] = []

    /// A carried buffer larger than this is released once its frame is done, so one big
    /// message does not pin its memory for the connection's life.
    private static let retainedCarryCapacity = 64 * 1024

    /// Creates a decoder for the receiving `role`.
    public init(role: WebSocketRole, maxFramePayload: Int = 1 << 20, allowsRSV1: Bool = false) {
        self.role = role
        self.maxFramePayload = maxFramePayload
        self.allowsRSV1 = allowsRSV1
    }

    /// Bytes buffered but not yet returned as frames.
    public var bufferedByteCount: Int { carry.count + queued.count }

    // MARK: Borrowing interface

    /// Decodes every complete frame in `bytes` (after any frame carried over from the last
    /// call) and hands each to `body` with its payload, which is valid only during that call
    /// and still masked when `header.maskingKey` is set. `body` returns false to stop: the
    /// frames after it are left unread. Returns how many bytes of `bytes` were used, which
    /// is all of them unless `body` stopped early (a trailing incomplete frame is carried).
    @discardableResult @inline(__always)
    public mutating func decode(
        _ bytes: UnsafeRawBufferPointer,
        _ body: (WebSocketFrameHeader, UnsafeRawBufferPointer) throws(WebSocketProtocolError) -> Bool
    ) throws(WebSocketProtocolError) -> Int {
        if let failure { throw failure }
        do {
            return try decodeFrames(bytes, body)
        } catch {
            failure = error
            throw error
        }
    }

    @inline(__always)
    private mutating func decodeFrames(
        _ bytes: UnsafeRawBufferPointer,
        _ body: (WebSocketFrameHeader, UnsafeRawBufferPointer) throws(WebSocketProtocolError) -> Bool
    ) throws(WebSocketProtocolError) -> Int {
        var offset = 0
        if !carry.isEmpty {
            offset = try completeCarriedFrame(from: bytes)
            guard let header = carriedHeader, carry.count == header.headerLength + header.payloadLength else {
                return offset
            }
            let goOn = try deliverCarriedFrame(header, body)
            guard goOn else { return offset }
        }
        let count = bytes.count
        guard offset < count, let base = bytes.baseAddress else { return count }
        let rules = rules
        while count - offset >= 2 {
            guard let header = try Self.parseHeader(base + offset, count - offset, rules) else { break }
            // Unchecked arithmetic that cannot overflow: the header fits in the `count - offset`
            // bytes it was read from, and the payload is compared with what remains.
            let payloadStart = offset &+ header.headerLength
            guard header.payloadLength <= count &- payloadStart else { break }
            let end = payloadStart &+ header.payloadLength
            offset = end
            guard try body(header, UnsafeRawBufferPointer(start: base + payloadStart, count: header.payloadLength)) else {
                return offset
            }
        }
        if offset < count { try startCarrying(UnsafeRawBufferPointer(rebasing: bytes[offset...])) }
        return count
    }

    /// Starts carrying an incomplete frame, reserving room for all of it once its header is known.
    private mutating func startCarrying(_ tail: UnsafeRawBufferPointer) throws(WebSocketProtocolError) {
        if let header = try Self.parseHeader(tail.baseAddress!, tail.count, rules) {
            carriedHeader = header
            carry.reserveCapacity(header.headerLength + header.payloadLength)
        }
        carry.append(contentsOf: tail)
    }

    /// Moves bytes from the front of `bytes` into the carried frame, no further than its end;
    /// returns how many it took.
    private mutating func completeCarriedFrame(from bytes: UnsafeRawBufferPointer) throws(WebSocketProtocolError) -> Int {
        var taken = 0
        if carriedHeader == nil {
            // Enough for the longest header, then give back what belongs to the next frame.
            taken = min(WebSocketFrameEncoder.maxHeaderSize - carry.count, bytes.count)
            carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[..<taken]))
            let parsed = carry.withUnsafeBytes { raw in
                Result { () throws(WebSocketProtocolError) in try Self.parseHeader(raw.baseAddress!, raw.count, rules) }
            }
            guard let header = try parsed.get() else { return taken }
            let frameLength = header.headerLength + header.payloadLength
            if carry.count > frameLength {
                let extra = carry.count - frameLength
                carry.removeLast(extra)
                taken -= extra
            }
            carriedHeader = header
            carry.reserveCapacity(frameLength)
        }
        let frameLength = carriedHeader!.headerLength + carriedHeader!.payloadLength
        let more = min(frameLength - carry.count, bytes.count - taken)
        if more > 0 {
            carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[taken..<(taken + more)]))
            taken += more
        }
        return taken
    }

    private mutating func deliverCarriedFrame(
        _ header: WebSocketFrameHeader,
        _ body: (WebSocketFrameHeader, UnsafeRawBufferPointer) throws(WebSocketProtocolError) -> Bool
    ) throws(WebSocketProtocolError) -> Bool {
        var frame: [UInt8] = []
        swap(&frame, &carry)
        carriedHeader = nil
        let result = frame.withUnsafeBytes { raw in
            Result { () throws(WebSocketProtocolError) in try body(header, UnsafeRawBufferPointer(rebasing: raw[header.headerLength...])) }
        }
        if frame.capacity <= Self.retainedCarryCapacity {
            frame.removeAll(keepingCapacity: true)
            carry = frame
        }
        return try result.get()
    }

    /// The received part of the payload of a frame whose header has arrived but whose payload
    /// has not all arrived yet, from payload offset `offset` on (still masked as received);
    /// nil when no such frame is pending. Lets the protocol machine reject invalid UTF-8
    /// before a long frame has fully arrived.
    public func withPendingPayload<R>(
        from offset: Int, _ body: (WebSocketFrameHeader, UnsafeRawBufferPointer) -> R
    ) -> R? {
        guard failure == nil, let header = carriedHeader else { return nil }
        return carry.withUnsafeBytes { raw in
            let start = min(header.headerLength + offset, raw.count)
            return body(header, UnsafeRawBufferPointer(rebasing: raw[start...]))
        }
    }

    /// What a header is checked against, in registers for the decoding loop.
    private struct HeaderRules {
        var expectedMaskBit: UInt8
        var allowsRSV1: Bool
        var maxFramePayload: Int
        var role: WebSocketRole
    }

    private var rules: HeaderRules {
        HeaderRules(expectedMaskBit: role == .server ? 0x80 : 0, allowsRSV1: allowsRSV1,
                    maxFramePayload: maxFramePayload, role: role)
    }

    /// Reads and validates the header at `base` from `available` bytes; nil while incomplete.
    /// Each check runs as soon as the bytes it needs are there, so the verdict never depends
    /// on how the stream was split.
    @inline(__always)
    private static func parseHeader(_ base: UnsafeRawPointer, _ available: Int,
                                    _ rules: HeaderRules) throws(WebSocketProtocolError) -> WebSocketFrameHeader? {
        guard available >= 2 else { return nil }
        let b0 = base.load(as: UInt8.self)
        let b1 = base.load(fromByteOffset: 1, as: UInt8.self)
        let opcodeBits = b0 & 0x0F
        let length7 = Int(b1 & 0x7F)
        // One test for what nearly every frame is: known opcode (0, 1, 2, 8, 9, 10), no
        // reserved bit (or RSV1 on a data or control frame when deflate allows it: see
        // ``WebSocketProtocolMachine`` on compressed control frames), the masking this role
        // expects, and for a control frame FIN and at most 125 bytes.
        let reserved = b0 & 0x70
        let acceptable = (0x0707 as UInt16) >> UInt16(opcodeBits) & 1 == 1
            && (reserved == 0 || (reserved == 0x40 && rules.allowsRSV1 && opcodeBits != 0))
            && b1 & 0x80 == rules.expectedMaskBit
            && (opcodeBits & 0x08 == 0 || (b0 & 0x80 != 0 && length7 <= 125))
        if !acceptable { throw rejection(b0, b1, rules) }
        var headerLength = 2
        var payloadLength = length7
        if length7 == 126 {
            guard available >= 4 else { return nil }
            payloadLength = Int(UInt16(bigEndian: base.loadUnaligned(fromByteOffset: 2, as: UInt16.self)))
            headerLength = 4
        } else if length7 == 127 {
            guard available >= 10 else { return nil }
            let length = UInt64(bigEndian: base.loadUnaligned(fromByteOffset: 2, as: UInt64.self))
            if length & (1 << 63) != 0 {
                throw WebSocketProtocolError(.protocolError, "64-bit length with MSB set")
            }
            guard length <= UInt64(rules.maxFramePayload) else {
                throw WebSocketProtocolError(.messageTooBig, "frame too big")
            }
            payloadLength = Int(length)
            headerLength = 10
        }
        if payloadLength > rules.maxFramePayload {
            throw WebSocketProtocolError(.messageTooBig, "frame too big")
        }
        var maskingKey: UInt32?
        if b1 & 0x80 != 0 {
            guard available >= headerLength + 4 else { return nil }
            maskingKey = UInt32(bigEndian: base.loadUnaligned(fromByteOffset: headerLength, as: UInt32.self))
            headerLength += 4
        }
        return WebSocketFrameHeader(firstByte: b0, headerLength: headerLength, payloadLength: payloadLength,
                                    maskingKey: maskingKey)
    }

    /// The first rule the two header bytes `b0`, `b1` break, checked in a fixed order so
    /// the error does not depend on anything else.
    @inline(never)
    private static func rejection(_ b0: UInt8, _ b1: UInt8, _ rules: HeaderRules) -> WebSocketProtocolError {
        guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0F) else {
            return WebSocketProtocolError(.protocolError, "reserved opcode \(b0 & 0x0F)")
        }
        if b0 & 0x30 != 0 {
            return WebSocketProtocolError(.protocolError, "RSV2/RSV3 set without extension")
        }
        if b0 & 0x40 != 0 {
            if !rules.allowsRSV1 {
                return WebSocketProtocolError(.protocolError, "RSV1 set without extension")
            }
            if opcode == .continuation {
                return WebSocketProtocolError(.protocolError, "RSV1 set on a continuation frame")
            }
        }
        let masked = b1 & 0x80 != 0
        switch rules.role {
        case .server where !masked:
            return WebSocketProtocolError(.protocolError, "client frame not masked")
        case .client where masked:
            return WebSocketProtocolError(.protocolError, "server frame masked")
        default: break
        }
        if b0 & 0x80 == 0 { return WebSocketProtocolError(.protocolError, "fragmented control frame") }
        return WebSocketProtocolError(.protocolError, "control frame payload > 125")
    }

    // MARK: Owning interface

    /// Queues received bytes for ``nextFrame()``.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        queued.append(contentsOf: bytes)
    }

    /// Queues received bytes for ``nextFrame()``.
    public mutating func feed(_ bytes: [UInt8]) {
        queued.append(contentsOf: bytes)
    }

    /// Returns the next complete frame from the queued bytes as a copy (payload unmasked),
    /// `nil` if more bytes are needed, or throws the protocol violation (1002) or size error
    /// (1009) found. Convenient for tests and tools; connections use ``decode(_:_:)``.
    public mutating func nextFrame() throws(WebSocketProtocolError) -> WebSocketFrame? {
        if let failure { throw failure }
        var input: [UInt8] = []
        swap(&input, &queued)
        var frame: WebSocketFrame?
        let used = input.withUnsafeBytes { raw in
            Result { () throws(WebSocketProtocolError) in
                try decode(raw) { header, payload in
                    var bytes = Array(payload)
                    if let key = header.maskingKey {
                        bytes.withUnsafeMutableBytes { WebSocketFrameEncoder.mask($0, maskingKey: key) }
                    }
                    frame = WebSocketFrame(fin: header.fin, rsv1: header.rsv1, opcode: header.opcode, payload: bytes)
                    return false
                }
            }
        }
        let consumed = try used.get()
        if consumed < input.count { queued = Array(input[consumed...]) }
        return frame
    }
}
