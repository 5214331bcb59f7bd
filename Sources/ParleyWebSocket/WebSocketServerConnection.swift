import ParleyHTTP
import ParleyIO

/// Receives what happens to a ``WebSocketServerConnection``, on its loop:
/// messages, then once ``webSocketDidClose(_:close:)``. Control frames (ping, pong,
/// close) never reach it: the connection answers them.
public protocol WebSocketServerDelegate: AnyObject {
    /// One complete message. `payload` is only valid during the call (it usually points into
    /// the read buffer): copy what must outlive it. Text is UTF-8 (validated unless the
    /// configuration turned that off). Nothing arrives after this side sent its close frame.
    func webSocket(_ socket: WebSocketServerConnection, didReceive kind: WebSocketMessageKind,
                   payload: UnsafeRawBufferPointer)
    /// The peer broke the protocol (or sent a message over the limit, 1009): our close frame
    /// with `code` is written and TCP closes next; ``webSocketDidClose(_:close:)`` follows.
    func webSocket(_ socket: WebSocketServerConnection, didFail code: WebSocketCloseCode)
    /// TCP is closed; the last call.
    func webSocketDidClose(_ socket: WebSocketServerConnection, close: WebSocketServerClose)
}

extension WebSocketServerDelegate {
    /// Most sessions only care how the connection ended (``webSocketDidClose(_:close:)``).
    public func webSocket(_ socket: WebSocketServerConnection, didFail code: WebSocketCloseCode) {}
}

/// How a ``WebSocketServerConnection`` ended.
public struct WebSocketServerClose: Sendable, Equatable {
    /// The close code and reason this side sent first through
    /// ``WebSocketServerConnection/close(_:reason:waitForPeer:)``; nil when it sent none.
    public var sent: (code: WebSocketCloseCode, reason: String)?
    /// The close code this side failed the connection with (a protocol violation), if it did.
    public var failure: WebSocketCloseCode?
    /// The peer's close frame: its code (nil when it carried none) and reason; nil when none came.
    public var peer: (code: UInt16?, reason: String)?
    /// Why TCP closed.
    public var connection: ConnectionCloseReason

    /// The code that ended the connection from this side, for a log: ours, or the failure's.
    public var code: WebSocketCloseCode? { sent?.code ?? failure }

    public static func == (a: Self, b: Self) -> Bool {
        a.sent?.code == b.sent?.code && a.sent?.reason == b.sent?.reason && a.failure == b.failure
            && a.peer?.code == b.peer?.code && a.peer?.reason == b.peer?.reason && a.connection == b.connection
    }
}

/// One server WebSocket on one event loop, the twin of ``WebSocketClientConnection``: the
/// answer to the upgrade request (``upgrade(_:connection:options:responseHeaders:)``), a
/// server-role ``WebSocketProtocolMachine`` whose control frames it answers itself, the
/// keep-alive ping (``WebSocketHeartbeat``), and the closing handshake: our close frame,
/// then a bounded wait for the client's (RFC 6455 §7.1.1), or TCP closed at once when the
/// server stops. The session above sees only messages and the end (``WebSocketServerDelegate``)
/// and writes text, binary or frames encoded once for many connections through it.
///
/// Replies keep their order: a message's answer, written from inside
/// ``WebSocketServerDelegate/webSocket(_:didReceive:payload:)``, goes out before anything a
/// later frame in the same read causes (our close frame after a protocol violation, say).
///
/// Loop-confined: call its methods on `connection.loop` only. Once ``open(delegate:leftover:)``
/// has run, the TCP connection holds it and it holds its delegate until the delegate's last
/// call, so a session may keep a strong reference to its connection.
public final class WebSocketServerConnection: ConnectionHandler {
    /// How the connection behaves.
    public struct Options: Sendable {
        /// Limits, whether permessage-deflate may be accepted, UTF-8 checks.
        public var configuration: WebSocketConfiguration
        /// After this long without a byte from the client, ping it; after twice this long,
        /// close TCP (a half-open connection). nil: no ping (the protocol above has its own).
        public var pingIntervalMilliseconds: UInt64?
        /// After our close frame, how long to wait for the client's before closing TCP.
        /// Closing at once would reset a connection the client is still writing to, and a
        /// browser whose write fails with a reset reports 1006 without reading our code.
        public var closeTimeoutMilliseconds: UInt64 = 2000

        /// Shared by the connections of a server: the bytes their unfinished incoming messages
        /// may hold together (nil: only each connection's message size limit).
        public var inboundBudget: InboundByteBudget?

        /// Options with `configuration`, and a ping every `pingIntervalMilliseconds` (nil: none).
        public init(configuration: WebSocketConfiguration, pingIntervalMilliseconds: UInt64? = nil,
                    inboundBudget: InboundByteBudget? = nil) {
            self.configuration = configuration
            self.pingIntervalMilliseconds = pingIntervalMilliseconds
            self.inboundBudget = inboundBudget
        }
    }

    // Why these are `@exclusivity(unchecked)`: they are touched on every read and every
    // delivery, and the connection is loop-confined (one thread); no access to one of them
    // stays open across a call out of this class except `heartbeat.heard()`, which calls
    // nothing. `machine` and `connection` are `let`s for the fan-out path: a `let` of an
    // object that is alive is read without retaining it.

    /// The TCP connection.
    public let connection: TCPConnection
    /// What it was created with.
    public let options: Options
    private let machine: WebSocketProtocolMachine
    @exclusivity(unchecked) private var delegate: (any WebSocketServerDelegate)?
    @exclusivity(unchecked) private var heartbeat = WebSocketHeartbeat()
    @exclusivity(unchecked) private var sent: (code: WebSocketCloseCode, reason: String)?
    @exclusivity(unchecked) private var peerClose: (code: UInt16?, reason: String)?
    private var pingTimer: LoopTimer?
    private var closeTimer: LoopTimer?
    /// This connection's part of ``Options/inboundBudget``.
    @exclusivity(unchecked) private var inbound: InboundByteBudget.Share?

    /// A connection for `connection`, whose upgrade was accepted with `deflate` negotiated
    /// (nil: none). ``open(delegate:leftover:)`` starts it. Most callers use
    /// ``upgrade(_:connection:options:responseHeaders:)``, which answers the request first.
    public init(connection: TCPConnection, options: Options, deflate: PerMessageDeflateParameters?) {
        self.connection = connection
        self.options = options
        machine = WebSocketProtocolMachine(role: .server, configuration: options.configuration, deflate: deflate)
        inbound = options.inboundBudget.map(InboundByteBudget.Share.init(of:))
    }

    // MARK: Opening

    /// Answers an upgrade request on `connection`: a valid one gets `101 Switching Protocols`
    /// (with `responseHeaders` too, CORS for one) and the returned connection, to be opened
    /// with ``open(delegate:leftover:)`` once its session exists. An invalid one gets its
    /// error status (400, 405, 426) with `responseHeaders` too, the TCP connection is closed
    /// and nil returned.
    public static func upgrade(_ head: HTTPRequestHead, connection: TCPConnection, options: Options,
                               responseHeaders: [(name: String, value: String)] = []) -> WebSocketServerConnection? {
        let headers = head.headers
        let result = WebSocketHandshake.serverResponse(method: head.method, versionMinor: head.versionMinor, header: { name in
            let values = headers.values(name)
            return values.isEmpty ? nil : values.joined(separator: ", ")
        }, configuration: options.configuration)
        switch result {
        case .failure(let error):
            var response = HTTPResponse.text(error.status, error.message + "\n")
            for (name, value) in error.headers { response.headers.add(name, value) }
            for (name, value) in responseHeaders { response.headers.set(name, value) }
            connection.write(response.encoded(keepAlive: false))
            connection.close()
            return nil
        case .success(let (fields, deflate)):
            var response = HTTPResponse(status: 101, headers: HTTPHeaders(fields))
            for (name, value) in responseHeaders { response.headers.set(name, value) }
            connection.write(response.encoded(keepAlive: true))
            return WebSocketServerConnection(connection: connection, options: options, deflate: deflate)
        }
    }

    /// Takes the TCP connection over: `delegate` hears its messages from now on, starting
    /// with those in `leftover` (bytes that came after the upgrade request in the same read),
    /// and the keep-alive ping starts. Call once.
    public func open(delegate: any WebSocketServerDelegate, leftover: [UInt8] = []) {
        connection.loop.assertInEventLoop()
        precondition(self.delegate == nil && connection.handler !== self, "WebSocketServerConnection opened twice")
        self.delegate = delegate
        connection.handler = self
        if let interval = options.pingIntervalMilliseconds {
            let timer = LoopTimer(loop: connection.loop)
            pingTimer = timer
            // `unowned`: the timer belongs to this connection and stops when it closes.
            timer.start(after: interval, repeating: interval) { [unowned self] in pingTick() }
        }
        if !leftover.isEmpty, connection.state == .open {
            leftover.withUnsafeBytes { connection(connection, didRead: $0) }
        }
    }

    /// The negotiated permessage-deflate parameters (nil: none).
    public var deflateParameters: PerMessageDeflateParameters? { machine.deflateParameters }

    /// Whether permessage-deflate is on; when off, frames encoded once for many connections
    /// (``WebSocketProtocolMachine/serverTextFrame(_:)``) are written as they are.
    public var usesDeflate: Bool { machine.usesDeflate }

    /// Whether a message sent now goes out: TCP open, and no close frame sent or received.
    @inline(__always) public var canSend: Bool { connection.state == .open && machine.state == .open }

    /// The closing-handshake state of the protocol.
    public var state: WebSocketProtocolMachine.State { machine.state }

    // MARK: Receiving

    /// Part of ``ConnectionHandler``; called by the TCP connection.
    public func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        heartbeat.heard()
        machine.receive(bytes, onMessage: { kind, payload in
            // After our close frame, or once the session closed TCP, what the client still
            // sends is dropped.
            guard connection.state == .open, machine.state == .open, let delegate else { return }
            delegate.webSocket(self, didReceive: kind, payload: payload)
        }, perform: { action in
            guard connection.state == .open else { return }
            switch action {
            case .send(let bytes):
                write(bytes)
            case .peerClosed(let code, let reason):
                peerClose = (code, reason)
            case .closeConnection:
                if let failure = machine.failureCode { delegate?.webSocket(self, didFail: failure) }
                connection.close()
            case .text, .binary:
                break   // messages go to `onMessage`
            }
        })
        // Past the server's budget, a connection that buffers more than its free share of
        // unfinished messages is closed (1013).
        if inbound?.hold(connection.state == .open ? machine.bufferedByteCount : 0) == false {
            close(.tryAgainLater, reason: "the server holds too many unfinished messages; try again later", waitForPeer: false)
        }
    }

    private func pingTick() {
        guard connection.state == .open else { return }
        switch heartbeat.tick() {
        case .none: break
        case .sendPing: write(machine.ping())
        case .giveUp: connection.close(flush: false)   // a whole interval since our ping, not a byte back
        }
    }

    // MARK: Sending

    @inline(__always) private func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        connection.write(bytes)
    }

    /// Sends one text message given as UTF-8 bytes (the caller vouches for the encoding),
    /// compressed when negotiated; dropped unless ``canSend``.
    public func sendText(utf8 bytes: UnsafeRawBufferPointer) {
        guard connection.state == .open else { return }
        write(machine.sendText(utf8: bytes))
    }

    /// Sends one text message given as UTF-8 bytes; dropped unless ``canSend``.
    public func sendText(utf8 bytes: [UInt8]) {
        bytes.withUnsafeBytes { sendText(utf8: $0) }
    }

    /// Sends one text message; dropped unless ``canSend``.
    public func sendText(_ text: String) {
        guard connection.state == .open else { return }
        write(machine.sendText(text))
    }

    /// Sends one binary message; dropped unless ``canSend``.
    public func sendBinary(_ bytes: UnsafeRawBufferPointer) {
        guard connection.state == .open else { return }
        write(machine.sendBinary(bytes))
    }

    /// Sends one binary message; dropped unless ``canSend``.
    public func sendBinary(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { sendBinary($0) }
    }

    /// Sends frames encoded once for many connections: one or more whole, unmasked,
    /// uncompressed data frames (``WebSocketProtocolMachine/serverTextFrame(_:)``, or several
    /// such frames back to back). Without deflate the shared bytes are written as they are
    /// (the fan-out path: no copy); with it each frame's message is compressed for this
    /// connection. Dropped unless ``canSend``.
    public func sendPreEncoded(_ frames: IOBuffer) {
        guard canSend else { return }
        // Frames this connection would send uncompressed anyway (too small or too large to
        // compress) are the shared bytes as they are: written, not framed again and copied.
        let compressesAny = machine.usesDeflate && frames.withUnsafeBytes { bytes in
            var any = false
            WebSocketServerConnection.forEachFrame(in: bytes) { _, payload in any = any || machine.compresses(count: payload.count) }
            return any
        }
        guard compressesAny else {
            connection.write(frames)
            return
        }
        frames.withUnsafeBytes { bytes in
            WebSocketServerConnection.forEachFrame(in: bytes) { opcode, payload in
                switch opcode {
                case .binary: write(machine.sendBinary(payload))
                default: write(machine.sendText(utf8: payload))
                }
            }
        }
    }

    /// Calls `body` with the opcode and payload of each whole, unmasked frame in `bytes`
    /// (frames this server encoded; anything malformed ends the walk).
    static func forEachFrame(in bytes: UnsafeRawBufferPointer,
                             _ body: (WebSocketOpcode, UnsafeRawBufferPointer) -> Void) {
        var offset = 0
        while bytes.count - offset >= 2 {
            let first = bytes[offset], second = bytes[offset + 1]
            guard second & 0x80 == 0, let opcode = WebSocketOpcode(rawValue: first & 0x0F) else { return }
            var header = 2
            var length = Int(second & 0x7F)
            if length == 126 {
                guard bytes.count - offset >= 4 else { return }
                length = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
                header = 4
            } else if length == 127 {
                guard bytes.count - offset >= 10 else { return }
                var value: UInt64 = 0
                for index in 2..<10 { value = value << 8 | UInt64(bytes[offset + index]) }
                guard value <= UInt64(Int.max) else { return }
                length = Int(value)
                header = 10
            }
            guard length <= bytes.count - offset - header else { return }
            body(opcode, UnsafeRawBufferPointer(rebasing: bytes[(offset + header)..<(offset + header + length)]))
            offset += header + length
        }
    }

    // MARK: Closing

    /// Starts the closing handshake with `code` and `reason` (the first close decides what
    /// ``WebSocketServerClose/sent`` reports). The client's close frame then closes TCP; if
    /// it does not come within ``Options/closeTimeoutMilliseconds`` TCP is closed anyway.
    /// With `waitForPeer` false (the server is stopping) TCP closes at once, after the
    /// frame is written.
    public func close(_ code: WebSocketCloseCode = .normal, reason: String = "", waitForPeer: Bool = true) {
        if sent == nil { sent = (code, reason) }
        if connection.state == .open {
            for case .send(let bytes) in machine.close(code: code, reason: reason) { write(bytes) }
        }
        guard waitForPeer else {
            connection.close()
            return
        }
        guard closeTimer == nil, connection.state == .open else { return }
        let timer = LoopTimer(loop: connection.loop)
        closeTimer = timer
        timer.start(after: options.closeTimeoutMilliseconds) { [unowned self] in connection.close() }
    }

    /// The server is stopping: close 1001 "server shutting down", and TCP at once (after
    /// the frame is written), without waiting for the client's close frame.
    public func serverIsStopping() {
        close(.goingAway, reason: "server shutting down", waitForPeer: false)
    }

    /// Part of ``ConnectionHandler``; called by the TCP connection.
    public func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        inbound?.release()
        pingTimer?.stop()
        pingTimer = nil
        closeTimer?.stop()
        closeTimer = nil
        guard let delegate else { return }
        self.delegate = nil
        let close = WebSocketServerClose(sent: sent, failure: machine.failureCode, peer: peerClose, connection: reason)
        // The delegate may let go of this connection now.
        withExtendedLifetime(self) { delegate.webSocketDidClose(self, close: close) }
    }
}
