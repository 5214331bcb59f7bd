// RFC 6455 §5.2 base framing: the values shared by the decoder, the encoder and the machine.

/// Which end of the connection this side is. A server receives masked frames and sends
/// unmasked ones; a client does the opposite (RFC 6455 §5.1).
public enum WebSocketRole: Sendable {
    case server, client
}

/// A frame opcode (RFC 6455 §5.2). Reserved opcodes are rejected by the decoder.
public enum WebSocketOpcode: UInt8, Sendable {
    case continuation = 0
    case text = 1
    case binary = 2
    case close = 8
    case ping = 9
    case pong = 10

    /// Close, ping and pong: at most 125 bytes of payload and never fragmented.
    public var isControl: Bool { rawValue & 0x8 != 0 }
}

/// One decoded frame, payload already unmasked.
public struct WebSocketFrame: Sendable, Equatable {
    /// Final fragment of a message.
    public var fin: Bool
    /// RSV1: with permessage-deflate, "this message is compressed" (first frame only).
    public var rsv1: Bool
    /// RSV2; no negotiated extension uses it, so a received frame never has it set.
    public var rsv2: Bool
    /// RSV3; no negotiated extension uses it, so a received frame never has it set.
    public var rsv3: Bool
    /// What the frame carries.
    public var opcode: WebSocketOpcode
    /// The application (or extension) data, unmasked.
    public var payload: [UInt8]

    /// Creates a frame; reserved bits default to clear.
    public init(fin: Bool = true, rsv1: Bool = false, rsv2: Bool = false, rsv3: Bool = false,
                opcode: WebSocketOpcode, payload: [UInt8] = []) {
        self.fin = fin
        self.rsv1 = rsv1
        self.rsv2 = rsv2
        self.rsv3 = rsv3
        self.opcode = opcode
        self.payload = payload
    }
}

/// A violation of RFC 6455 / RFC 7692 by the peer, or a local limit being hit. Carries the
/// close code to send and a short human reason.
public struct WebSocketProtocolError: Error, Hashable, Sendable {
    /// The close code this error maps to (1002, 1007, 1009, ...).
    public let closeCode: WebSocketCloseCode
    /// A short reason, safe to put in a close frame (well under 123 bytes).
    public let message: String

    /// Creates an error with the close code to send and a short reason.
    public init(_ closeCode: WebSocketCloseCode, _ message: String) {
        self.closeCode = closeCode
        self.message = message
    }
}

/// Limits and extension switches for one WebSocket connection. Every limit is a byte count.
public struct WebSocketConfiguration: Sendable {
    /// Largest message accepted, summed over fragments and measured after inflating (1009 above).
    public var maxMessageSize: Int
    /// Largest single frame payload accepted, as it appears on the wire (1009 above, checked
    /// from the frame header, before the payload is buffered).
    public var maxFrameSize: Int
    /// Client: offer permessage-deflate in the opening handshake.
    public var offersDeflate: Bool
    /// Server: accept a permessage-deflate offer.
    public var acceptsDeflate: Bool
    /// Hard cap on the bytes one compressed message may inflate to; the effective cap is
    /// `min(inflateLimit, maxMessageSize)`. Protects against decompression bombs.
    public var inflateLimit: Int
    /// Messages shorter than this are sent uncompressed even when deflate is negotiated
    /// (RFC 7692 allows it; tiny messages grow when compressed).
    public var compressionThreshold: Int
    /// Messages longer than this are sent uncompressed too. Deflate costs a connection's loop
    /// about 10-20 ns a byte, and each connection compresses for itself (its own window): one
    /// large message fanned out to many deflate clients cost the server far more than its
    /// sender (RFC 7692 lets any message go uncompressed).
    public var compressionLimit: Int
    /// Whether text messages are checked to be UTF-8 (1007 otherwise). Only a load generator
    /// that reads its own stamps out of the payload turns this off; everything else must
    /// keep it on (RFC 6455 §8.1).
    public var validatesUTF8: Bool
    /// Where a client's masking keys come from.
    public var maskingKeys: WebSocketMaskingKeySource

    /// Creates a configuration; `inflateLimit` defaults to `maxMessageSize`.
    public init(maxMessageSize: Int = 1 << 20, maxFrameSize: Int = 1 << 20,
                offersDeflate: Bool = true, acceptsDeflate: Bool = true,
                inflateLimit: Int? = nil, compressionThreshold: Int = 64, compressionLimit: Int = .max,
                validatesUTF8: Bool = true, maskingKeys: WebSocketMaskingKeySource = .systemRandom) {
        self.maxMessageSize = maxMessageSize
        self.maxFrameSize = maxFrameSize
        self.offersDeflate = offersDeflate
        self.acceptsDeflate = acceptsDeflate
        self.inflateLimit = inflateLimit ?? maxMessageSize
        self.compressionThreshold = compressionThreshold
        self.compressionLimit = compressionLimit
        self.validatesUTF8 = validatesUTF8
        self.maskingKeys = maskingKeys
    }
}

/// Where a client-role machine takes the masking key of each frame from (RFC 6455 §5.3).
public enum WebSocketMaskingKeySource: Sendable, Equatable {
    /// The system's secure random generator: unpredictable keys, as the RFC asks, so a
    /// browser-facing intermediary cannot be fed chosen bytes. The default.
    case systemRandom
    /// A xorshift generator seeded once: a few instructions a frame instead of a system call,
    /// and predictable. Only for load generators, whose frames protect no one.
    case fastPseudoRandom(seed: UInt64)
}
