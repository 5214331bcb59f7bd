/// What the I/O layer must do after feeding bytes to a ``WebSocketProtocolMachine``.
/// Actions are in order: write every `.send` before acting on a later `.closeConnection`.
public enum WebSocketAction: Sendable, Equatable {
    /// A complete text message: reassembled, inflated and UTF-8 validated.
    case text(String)
    /// A complete binary message: reassembled and inflated.
    case binary([UInt8])
    /// Bytes to write to the peer (pong replies, close frames).
    case send([UInt8])
    /// Close the TCP connection once everything before this action is written.
    case closeConnection
    /// The peer sent a close frame (emitted once, before the `.send` of our reply).
    /// `code` is nil when the frame carried no status code.
    case peerClosed(code: UInt16?, reason: String)
}

/// A complete data message's type, handed with its payload by
/// ``WebSocketProtocolMachine/receive(_:onMessage:perform:)``.
public enum WebSocketMessageKind: Sendable, Equatable {
    /// UTF-8 text (validated unless ``WebSocketConfiguration/validatesUTF8`` is off).
    case text
    /// Binary data.
    case binary
}

/// The whole RFC 6455 protocol (plus RFC 7692 permessage-deflate) for one connection after
/// the opening handshake: feed received bytes to ``receive(_:perform:)-(UnsafeRawBufferPointer,_)``
/// and perform the returned actions; call `send*`/``ping(_:)``/``close(code:reason:)`` to
/// produce bytes to write.
///
/// ``receive(_:onMessage:perform:)`` is the same path without copies: a message that arrived
/// in one unmasked, uncompressed frame is handed straight from the bytes received (a client
/// reading a fan-out allocates nothing per message); the other forms of receiving are built
/// on it.
///
/// Not Sendable and not thread-safe by design: a connection lives on one event loop.
public final class WebSocketProtocolMachine {
    /// The closing-handshake state.
    public enum State: Sendable, Equatable {
        /// Messages flow both ways.
        case open
        /// We sent a close frame and wait for the peer's; incoming data is ignored.
        case closing
        /// The closing handshake finished or the connection failed; nothing more to do.
        case closed
    }

    /// Which side this machine plays.
    public let role: WebSocketRole
    /// The limits in force.
    public let configuration: WebSocketConfiguration
    // Copies of two configuration values the receive path reads for every frame.
    private let maxMessageSize: Int
    private let validatesUTF8: Bool
    // Why the mutable state below is `@exclusivity(unchecked)`: dynamic exclusivity checks
    // on these class properties cost about 200 instructions per received frame (5 runtime
    // checks, measured with callgrind), more than decoding the frame. They are safe to drop
    // because no two accesses to one of these properties can overlap: the machine is not
    // Sendable, so one thread uses it; `receive` refuses to be re-entered from its own
    // callbacks (`receiving`); and the only accesses that stay open across a callback are the
    // modification of `decoder` while it decodes (callbacks reach the machine only through
    // the `send*`/`ping`/`close` methods, which never touch `decoder`) and the read of
    // `messageBuffer` while a reassembled message is handed out (those methods never touch
    // it either); `pendingActions` is swapped out before its actions are performed.

    /// The negotiated permessage-deflate parameters, nil if not negotiated.
    @exclusivity(unchecked) public private(set) var deflateParameters: PerMessageDeflateParameters?
    /// The closing-handshake state.
    @exclusivity(unchecked) public private(set) var state: State = .open
    /// The close code this side failed the connection with (e.g. 1009 for a message over the
    /// limit), nil while it has not.
    @exclusivity(unchecked) public private(set) var failureCode: WebSocketCloseCode?

    @exclusivity(unchecked) private var decoder: WebSocketFrameDecoder
    @exclusivity(unchecked) private var compressor: PerMessageDeflateCompressor?
    @exclusivity(unchecked) private var decompressor: PerMessageDeflateDecompressor?
    /// xorshift state for ``WebSocketMaskingKeySource/fastPseudoRandom(seed:)``; 0 means
    /// the system generator.
    @exclusivity(unchecked) private var fastMaskState: UInt64
    /// Set while `receive` runs, to refuse re-entry.
    @exclusivity(unchecked) private var receiving = false
    /// Actions of the frame being handled, performed once it is (then emptied).
    @exclusivity(unchecked) private var pendingActions: [WebSocketAction] = []

    // The data message being reassembled (fragmented or compressed messages only).
    @exclusivity(unchecked) private var messageOpcode: WebSocketOpcode?
    @exclusivity(unchecked) private var messageCompressed = false
    @exclusivity(unchecked) private var messageBuffer: [UInt8] = []
    @exclusivity(unchecked) private var utf8 = UTF8Validator()
    /// Bytes of `messageBuffer` already run through the UTF-8 validator.
    @exclusivity(unchecked) private var validatedCount = 0
    /// Bytes of the incomplete frame in the decoder already run through the UTF-8 validator.
    @exclusivity(unchecked) private var partialFrameValidated = 0

    /// Reused memory for unmasking a client's frames (server role).
    @exclusivity(unchecked) private var scratch: UnsafeMutableRawPointer?
    @exclusivity(unchecked) private var scratchCapacity = 0
    /// Larger payloads are unmasked into memory freed right after, so one big message does
    /// not pin its size for the connection's life.
    private static let scratchLimit = 64 * 1024

    /// Creates the machine for one connection; `deflate` is the outcome of the handshake
    /// negotiation (nil: no compression, RSV1 from the peer is a protocol error).
    public init(role: WebSocketRole, configuration: WebSocketConfiguration = WebSocketConfiguration(),
                deflate: PerMessageDeflateParameters?) {
        self.role = role
        self.configuration = configuration
        maxMessageSize = configuration.maxMessageSize
        validatesUTF8 = configuration.validatesUTF8
        decoder = WebSocketFrameDecoder(role: role, maxFramePayload: configuration.maxFrameSize)
        switch configuration.maskingKeys {
        case .systemRandom: fastMaskState = 0
        case .fastPseudoRandom(let seed): fastMaskState = seed | 1
        }
        if let deflate { use(deflate: deflate) }
    }

    /// Turns permessage-deflate on with the parameters a handshake negotiated: for a machine
    /// made before its handshake finished (``WebSocketClientConnection`` makes its machine
    /// with the connection). Only before the first byte is received or sent.
    func use(deflate: PerMessageDeflateParameters) {
        deflateParameters = deflate
        decoder.allowsRSV1 = true
        compressor = PerMessageDeflateCompressor(windowBits: deflate.maxWindowBits(sender: role),
                                                 noContextTakeover: deflate.noContextTakeover(sender: role))
        let peer: WebSocketRole = role == .server ? .client : .server
        decompressor = PerMessageDeflateDecompressor(noContextTakeover: deflate.noContextTakeover(sender: peer))
    }

    deinit {
        scratch?.deallocate()
    }

    /// Whether permessage-deflate was negotiated on this connection. When false (server
    /// role), ``serverTextFrame(_:)`` bytes can be written to it as they are.
    public var usesDeflate: Bool { deflateParameters != nil }

    /// An unmasked, uncompressed, final text frame: frame a fan-out message once and write the
    /// same bytes to every server-side connection where ``usesDeflate`` is false.
    public static func serverTextFrame(_ utf8: some Collection<UInt8>) -> [UInt8] {
        WebSocketFrameEncoder.encode(opcode: .text, payload: utf8)
    }

    /// Bytes held for messages not complete yet: a frame that straddles reads, and a
    /// fragmented or compressed message being put together.
    public var bufferedByteCount: Int { decoder.bufferedByteCount + messageBuffer.count }

    private var messageLimit: Int {
        messageCompressed ? min(configuration.maxMessageSize, configuration.inflateLimit) : configuration.maxMessageSize
    }

    // MARK: Receiving

    /// Feeds received bytes: hands every complete message to `onMessage` and every other
    /// action (`.send`, `.peerClosed`, `.closeConnection`; never `.text`/`.binary`) to
    /// `perform`, in order, as each frame is decoded. The payload is only valid during the
    /// call: it points into `bytes` when the message came in one unmasked, uncompressed
    /// frame, else into the machine's buffers.
    ///
    /// A message's reply sent from inside the callbacks (``sendText(_:)``, ``sendBinary(_:)``)
    /// goes out before anything a later frame in the same bytes causes: a message followed by
    /// a protocol violation is still answered before our close frame (Autobahn 3.2, 4.1.3,
    /// 5.15).
    public func receive(_ bytes: UnsafeRawBufferPointer,
                        onMessage: (WebSocketMessageKind, UnsafeRawBufferPointer) -> Void,
                        perform: (WebSocketAction) -> Void) {
        guard state != .closed else { return }
        precondition(!receiving, "WebSocketProtocolMachine.receive called from its own callback")
        receiving = true
        defer { receiving = false }
        do {
            try decoder.decode(bytes) { header, payload throws(WebSocketProtocolError) in
                // What a client reading a fan-out gets nearly every time: a whole, unmasked,
                // uncompressed message in one frame (0x81: FIN + text, 0x82: FIN + binary, no
                // RSV bit), within the limit and needing no UTF-8 check (binary, or checks
                // off); handed on as it is. Nothing `onMessage` may do ends the machine
                // (`close()` only starts closing), so decoding goes on.
                if header.maskingKey == nil && (header.firstByte == 0x82 || (header.firstByte == 0x81 && !validatesUTF8))
                    && messageOpcode == nil && state == .open && payload.count <= maxMessageSize {
                    onMessage(header.firstByte == 0x81 ? .text : .binary, payload)
                    return true
                }
                return try receiveFrame(header, payload, onMessage, perform)
            }
            if state == .open && configuration.validatesUTF8 { try validatePartialTextFrame() }
        } catch {
            flush(perform)
            fail(error)
            flush(perform)
        }
    }

    /// Feeds received bytes and hands every resulting action to `perform`, in order, as
    /// each frame is decoded (messages as `.text`/`.binary` copies); see
    /// ``receive(_:onMessage:perform:)`` for the ordering guarantee, which the
    /// array-returning ``receive(_:)-(UnsafeRawBufferPointer)`` cannot give.
    public func receive(_ bytes: UnsafeRawBufferPointer, perform: (WebSocketAction) -> Void) {
        receive(bytes, onMessage: { kind, payload in
            switch kind {
            case .text: perform(.text(String(decoding: payload, as: UTF8.self)))
            case .binary: perform(.binary(Array(payload)))
            }
        }, perform: perform)
    }

    /// Performs the actions gathered so far, emptying the list first so that what
    /// `perform` causes is gathered afresh.
    private func flush(_ perform: (WebSocketAction) -> Void) {
        guard !pendingActions.isEmpty else { return }
        var batch: [WebSocketAction] = []
        swap(&batch, &pendingActions)
        for action in batch { perform(action) }
    }

    /// Feeds received bytes; returns what to do, in order. Replies to the returned messages
    /// are only possible if the machine is still open afterwards; use
    /// ``receive(_:perform:)-(UnsafeRawBufferPointer,_)`` to answer every message in order.
    public func receive(_ bytes: UnsafeRawBufferPointer) -> [WebSocketAction] {
        var actions: [WebSocketAction] = []
        receive(bytes) { actions.append($0) }
        return actions
    }

    /// Feeds received bytes; returns what to do, in order.
    public func receive(_ bytes: [UInt8]) -> [WebSocketAction] {
        bytes.withUnsafeBytes { receive($0) }
    }

    /// Feeds received bytes; see ``receive(_:perform:)-(UnsafeRawBufferPointer,_)``.
    public func receive(_ bytes: [UInt8], perform: (WebSocketAction) -> Void) {
        bytes.withUnsafeBytes { receive($0, perform: perform) }
    }

    /// Every frame but the plain single-frame message: unmasks, handles, performs.
    @inline(never)
    private func receiveFrame(_ header: WebSocketFrameHeader, _ payload: UnsafeRawBufferPointer,
                              _ onMessage: (WebSocketMessageKind, UnsafeRawBufferPointer) -> Void,
                              _ perform: (WebSocketAction) -> Void) throws(WebSocketProtocolError) -> Bool {
        if let key = header.maskingKey {
            try withUnmasked(payload, key: key) { payload throws(WebSocketProtocolError) in
                try handle(header, payload, onMessage)
            }
        } else {
            try handle(header, payload, onMessage)
        }
        flush(perform)
        return state != .closed
    }

    /// Runs `body` on an unmasked copy of `payload`, in reused memory when it is small.
    private func withUnmasked<R, E: Error>(_ payload: UnsafeRawBufferPointer, key: UInt32, keyOffset: Int = 0,
                                           _ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let count = payload.count
        guard count > 0, let source = payload.baseAddress else { return try body(payload) }
        let reused = count <= Self.scratchLimit
        let memory: UnsafeMutableRawPointer
        if reused {
            if count > scratchCapacity {
                scratch?.deallocate()
                scratchCapacity = min(Self.scratchLimit, max(count, 2 * scratchCapacity, 256))
                scratch = .allocate(byteCount: scratchCapacity, alignment: 8)
            }
            memory = scratch!
        } else {
            memory = .allocate(byteCount: count, alignment: 8)
        }
        defer { if !reused { memory.deallocate() } }
        memory.copyMemory(from: source, byteCount: count)
        let buffer = UnsafeMutableRawBufferPointer(start: memory, count: count)
        WebSocketFrameEncoder.mask(buffer, maskingKey: key, keyOffset: keyOffset)
        return try body(UnsafeRawBufferPointer(buffer))
    }

    /// One frame, payload unmasked.
    private func handle(_ header: WebSocketFrameHeader, _ payload: UnsafeRawBufferPointer,
                        _ onMessage: (WebSocketMessageKind, UnsafeRawBufferPointer) -> Void) throws(WebSocketProtocolError) {
        if header.rsv1, header.opcode.isControl { return try handleCompressedControl(header, payload, onMessage) }
        switch header.opcode {
        case .text, .binary:
            guard messageOpcode == nil else {
                throw WebSocketProtocolError(.protocolError, "new message while a fragmented one is in progress")
            }
            if header.fin && !header.rsv1 && state == .open {
                try deliverSingleFrameMessage(header.opcode, payload, onMessage)
                return
            }
            messageOpcode = header.opcode
            messageCompressed = header.rsv1
            try appendFragment(header, payload, onMessage)
        case .continuation:
            guard messageOpcode != nil else {
                throw WebSocketProtocolError(.protocolError, "continuation frame without a message")
            }
            try appendFragment(header, payload, onMessage)
        case .ping:
            if state == .open {
                pendingActions.append(.send(frameBytes(opcode: .pong, payload: payload)))
            }
        case .pong:
            break
        case .close:
            try handleClose(payload)
        }
    }

    /// A control frame with RSV1 set on a deflate connection. RFC 7692 forbids it, but
    /// Starscream 4 (under Socket.IO-Client-Swift with `.compress`, as the SocketChat
    /// tutorial configures it) compresses every frame it writes, its close and its pongs
    /// included, through the same deflate stream as its messages. Failing such a connection
    /// with 1002 would cut off an app for answering our ping, so the payload is inflated in
    /// stream order and the frame handled as if it had come plain. Not inside a compressed
    /// fragmented message (its inflater is in the middle of that message): that stays 1002.
    private func handleCompressedControl(_ header: WebSocketFrameHeader, _ payload: UnsafeRawBufferPointer,
                                         _ onMessage: (WebSocketMessageKind, UnsafeRawBufferPointer) -> Void) throws(WebSocketProtocolError) {
        guard let decompressor, !(messageOpcode != nil && messageCompressed) else {
            throw WebSocketProtocolError(.protocolError, "RSV1 set on a control frame inside a compressed message")
        }
        var inflated: [UInt8] = []
        try decompressor.inflateFragment(payload, into: &inflated, limit: 125)
        try decompressor.finishMessage(into: &inflated, limit: 125)
        let plain = WebSocketFrameHeader(firstByte: header.firstByte & ~0x40, headerLength: header.headerLength,
                                         payloadLength: inflated.count, maskingKey: header.maskingKey)
        let result = inflated.withUnsafeBytes { raw in
            Result { () throws(WebSocketProtocolError) in try handle(plain, raw, onMessage) }
        }
        try result.get()
    }

    /// The common case: a whole, uncompressed message in one frame, handed on uncopied.
    private func deliverSingleFrameMessage(_ opcode: WebSocketOpcode, _ payload: UnsafeRawBufferPointer,
                                           _ onMessage: (WebSocketMessageKind, UnsafeRawBufferPointer) -> Void) throws(WebSocketProtocolError) {
        // The first bytes of this frame may have been validated while it was arriving.
        let validated = partialFrameValidated
        partialFrameValidated = 0
        guard payload.count <= configuration.maxMessageSize else {
            throw WebSocketProtocolError(.messageTooBig, "message too big")
        }
        if opcode == .text {
            if configuration.validatesUTF8 {
                guard utf8.validate(UnsafeRawBufferPointer(rebasing: payload[validated...])) else {
                    throw WebSocketProtocolError(.invalidPayload, "invalid UTF-8 in text message")
                }
                guard utf8.isAtBoundary else {
                    throw WebSocketProtocolError(.invalidPayload, "truncated UTF-8 in text message")
                }
                utf8.reset()
            }
            onMessage(.text, payload)
        } else {
            onMessage(.binary, payload)
        }
    }

    /// Fails fast (1007) on invalid UTF-8 in an uncompressed text frame that is still
    /// arriving, instead of waiting for the rest of a possibly long frame.
    private func validatePartialTextFrame() throws(WebSocketProtocolError) {
        let valid = decoder.withPendingPayload(from: partialFrameValidated) { header, bytes -> Bool in
            guard !header.rsv1 else { return true }
            let isText = (header.opcode == .text && messageOpcode == nil)
                || (header.opcode == .continuation && messageOpcode == .text && !messageCompressed)
            guard isText, !bytes.isEmpty else { return true }
            let keyOffset = partialFrameValidated
            partialFrameValidated += bytes.count
            guard let key = header.maskingKey else { return utf8.validate(bytes) }
            return withUnmasked(bytes, key: key, keyOffset: keyOffset & 3) { utf8.validate($0) }
        }
        if valid == false {
            throw WebSocketProtocolError(.invalidPayload, "invalid UTF-8 in text message")
        }
    }

    private func appendFragment(_ header: WebSocketFrameHeader, _ payload: UnsafeRawBufferPointer,
                                _ onMessage: (WebSocketMessageKind, UnsafeRawBufferPointer) -> Void) throws(WebSocketProtocolError) {
        // After we sent close, the peer's data is discarded; only its close matters now.
        let discard = state != .open
        // The first bytes of this frame may have been validated while it was arriving.
        validatedCount = messageBuffer.count + partialFrameValidated
        partialFrameValidated = 0
        let validates = messageOpcode == .text && configuration.validatesUTF8
        if !discard {
            let limit = messageLimit
            if messageCompressed, let decompressor {
                try decompressor.inflateFragment(payload, into: &messageBuffer, limit: limit)
                if header.fin { try decompressor.finishMessage(into: &messageBuffer, limit: limit) }
            } else {
                guard messageBuffer.count + payload.count <= limit else {
                    throw WebSocketProtocolError(.messageTooBig, "message too big")
                }
                messageBuffer.append(contentsOf: payload)
            }
            if validates {
                let ok = messageBuffer.withUnsafeBytes { raw in
                    utf8.validate(UnsafeRawBufferPointer(rebasing: raw[validatedCount...]))
                }
                validatedCount = messageBuffer.count
                guard ok else { throw WebSocketProtocolError(.invalidPayload, "invalid UTF-8 in text message") }
            }
        }
        guard header.fin else { return }
        if !discard {
            if validates && !utf8.isAtBoundary {
                throw WebSocketProtocolError(.invalidPayload, "truncated UTF-8 in text message")
            }
            let kind: WebSocketMessageKind = messageOpcode == .text ? .text : .binary
            messageBuffer.withUnsafeBytes { onMessage(kind, $0) }
        }
        messageOpcode = nil
        messageCompressed = false
        messageBuffer = []
        utf8.reset()
        validatedCount = 0
    }

    private func handleClose(_ payload: UnsafeRawBufferPointer) throws(WebSocketProtocolError) {
        var code: UInt16?
        var reason = ""
        if payload.count == 1 {
            throw WebSocketProtocolError(.protocolError, "close frame with 1-byte payload")
        }
        if payload.count >= 2 {
            let received = UInt16(payload[0]) << 8 | UInt16(payload[1])
            guard WebSocketCloseCode.isValidOnWire(received) else {
                throw WebSocketProtocolError(.protocolError, "invalid close code \(received)")
            }
            let reasonBytes = UnsafeRawBufferPointer(rebasing: payload[2...])
            guard UTF8Validator.isValid(reasonBytes) else {
                throw WebSocketProtocolError(.invalidPayload, "invalid UTF-8 in close reason")
            }
            code = received
            reason = String(decoding: reasonBytes, as: UTF8.self)
        }
        pendingActions.append(.peerClosed(code: code, reason: reason))
        if state == .open {
            let echo = WebSocketCloseCode(rawValue: code ?? WebSocketCloseCode.normal.rawValue)
            pendingActions.append(.send(closeFrame(code: echo, reason: "")))
        }
        pendingActions.append(.closeConnection)
        state = .closed
    }

    /// Fails the connection: our close frame (unless we already sent one), then close TCP.
    private func fail(_ error: WebSocketProtocolError) {
        failureCode = error.closeCode
        if state == .open {
            pendingActions.append(.send(closeFrame(code: error.closeCode, reason: error.message)))
        }
        pendingActions.append(.closeConnection)
        state = .closed
        messageBuffer = []
        decompressor?.reset()
    }

    // MARK: Sending

    private func maskingKey() -> UInt32? {
        guard role == .client else { return nil }
        guard fastMaskState != 0 else {
            var system = SystemRandomNumberGenerator()
            return system.next()
        }
        fastMaskState ^= fastMaskState << 13
        fastMaskState ^= fastMaskState >> 7
        fastMaskState ^= fastMaskState << 17
        return UInt32(truncatingIfNeeded: fastMaskState >> 16)
    }

    private func frameBytes(opcode: WebSocketOpcode, payload: some Collection<UInt8>, rsv1: Bool = false) -> [UInt8] {
        WebSocketFrameEncoder.encode(opcode: opcode, payload: payload, rsv1: rsv1, maskingKey: maskingKey())
    }

    /// Whether a data message of `count` bytes goes compressed on this connection (deflate
    /// negotiated, and the size between the threshold and the limit).
    public func compresses(count: Int) -> Bool {
        compressor != nil && count >= configuration.compressionThreshold && count <= configuration.compressionLimit
    }

    private func dataFrame(opcode: WebSocketOpcode, payload: UnsafeRawBufferPointer) -> [UInt8] {
        guard state == .open else { return [] }
        if let compressor, compresses(count: payload.count) {
            return frameBytes(opcode: opcode, payload: compressor.compress(payload), rsv1: true)
        }
        return frameBytes(opcode: opcode, payload: payload)
    }

    /// One text message as a single frame (compressed if negotiated and worthwhile, masked
    /// for a client). Empty once closing or closed.
    public func sendText(_ text: String) -> [UInt8] {
        var text = text
        return text.withUTF8 { dataFrame(opcode: .text, payload: UnsafeRawBufferPointer($0)) }
    }

    /// One text message given as UTF-8 bytes (the caller vouches for the encoding), as
    /// ``sendText(_:)`` frames it.
    public func sendText(utf8 bytes: UnsafeRawBufferPointer) -> [UInt8] {
        dataFrame(opcode: .text, payload: bytes)
    }

    /// One binary message as a single frame. Empty once closing or closed.
    public func sendBinary(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { dataFrame(opcode: .binary, payload: $0) }
    }

    /// One binary message as a single frame. Empty once closing or closed.
    public func sendBinary(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        dataFrame(opcode: .binary, payload: bytes)
    }

    /// A ping frame (payload truncated to 125 bytes). Empty once closing or closed.
    public func ping(_ payload: [UInt8] = []) -> [UInt8] {
        guard state == .open else { return [] }
        return frameBytes(opcode: .ping, payload: payload.prefix(125))
    }

    /// Starts the closing handshake: returns `.send` of our close frame and moves to
    /// ``State/closing``; the peer's close frame then yields `.closeConnection`. Codes that
    /// may not be sent (1005, 1006, ...) produce a close frame without a status. The reason
    /// is cut to 123 bytes on a character boundary. Returns no actions unless open.
    public func close(code: WebSocketCloseCode = .normal, reason: String = "") -> [WebSocketAction] {
        guard state == .open else { return [] }
        state = .closing
        return [.send(closeFrame(code: code, reason: reason))]
    }

    private func closeFrame(code: WebSocketCloseCode, reason: String) -> [UInt8] {
        var payload: [UInt8] = []
        if code.isValidOnWire {
            payload.append(UInt8(code.rawValue >> 8))
            payload.append(UInt8(code.rawValue & 0xFF))
            var length = 0
            for scalar in reason.unicodeScalars {
                let size = UTF8.width(scalar)
                if length + size > 123 { break }
                length += size
            }
            payload.append(contentsOf: reason.utf8.prefix(length))
        }
        return frameBytes(opcode: .close, payload: payload)
    }
}
