import ParleyIO

/// Why a ``WebSocketClientConnection`` did not open.
public struct WebSocketClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed; stable across versions.
    public enum Code: String, Sendable, Equatable {
        /// The TCP connection could not be made (refused, unreachable, bad address).
        case connectFailed = "connect_failed"
        /// TLS could not be started on the connection.
        case tlsFailed = "tls_failed"
        /// Connect, TLS and upgrade together took longer than the open timeout.
        case timedOut = "timed_out"
        /// The server's answer to the upgrade request was malformed or refused the upgrade;
        /// ``WebSocketClientError/status`` tells the status it sent.
        case handshakeFailed = "handshake_failed"
        /// The connection closed before the upgrade finished (e.g. a failed TLS handshake).
        case closedDuringHandshake = "closed_during_handshake"
        /// ``WebSocketClientConnection/close(code:reason:)`` or
        /// ``WebSocketClientConnection/abort()`` before the upgrade finished.
        case cancelled
    }

    /// What failed.
    public let code: Code
    /// What went wrong, for a person.
    public let message: String
    /// The HTTP status of the server's answer, when one came (``Code/handshakeFailed``).
    public let status: Int?

    /// Creates an error.
    public init(_ code: Code, _ message: String, status: Int? = nil) {
        self.code = code
        self.message = message
        self.status = status
    }

    /// The message.
    public var description: String { message }
}

/// Receives what happens to a ``WebSocketClientConnection``, on its loop. Exactly one of
/// ``webSocket(_:didFailToOpen:)`` and ``webSocketDidClose(_:code:reason:)`` is the last call.
public protocol WebSocketClientDelegate: AnyObject {
    /// The upgrade succeeded; messages may follow at once.
    func webSocketDidOpen(_ socket: WebSocketClientConnection)
    /// One complete message. `payload` is only valid during the call (it usually points into
    /// the read buffer): copy what must outlive it. Text is UTF-8 (validated unless the
    /// configuration turned that off).
    func webSocket(_ socket: WebSocketClientConnection, didReceive kind: WebSocketMessageKind,
                   payload: UnsafeRawBufferPointer)
    /// The connection never opened. The last call.
    func webSocket(_ socket: WebSocketClientConnection, didFailToOpen error: WebSocketClientError)
    /// The open connection is gone: `code` is the server's close code (1005 when its close
    /// frame had none), or 1006 when the connection ended without a close frame. The last call.
    func webSocketDidClose(_ socket: WebSocketClientConnection, code: UInt16, reason: String)
}

/// One client WebSocket on one event loop: TCP connect (optionally from a source address),
/// optional TLS, the upgrade through ``WebSocketClientHandshake``, then a client-role
/// ``WebSocketProtocolMachine``, with a timeout on the opening, an optional keep-alive ping,
/// and a closing handshake that waits a bounded time for the server to close TCP (RFC 6455
/// §7.1.1: the server closes first).
///
/// Loop-confined: create it, call its methods and read its state on `loop` only. It keeps
/// itself alive while connected (the TCP connection holds it) and holds its delegate for
/// life: a delegate that keeps a strong reference to its connection lets go of it on its
/// last call (or holds it weakly), or the two keep each other alive.
public final class WebSocketClientConnection: ConnectionHandler {
    /// Where to connect and how.
    public struct Options: Sendable {
        /// Numeric address to connect to (the loop resolves no names).
        public var host: String
        /// TCP port.
        public var port: Int
        /// Numeric address to connect from (port chosen by the system); nil for any.
        public var sourceHost: String?
        /// The `Host` header value.
        public var hostHeader: String
        /// Request target: path plus query.
        public var target: String
        /// Extra request header fields (`Origin`, `Authorization`, ...).
        public var extraHeaders: [(name: String, value: String)] = []
        /// TLS for `wss://`; nil for plain TCP.
        public var tls: TLSContext?
        /// The name the server's certificate must carry (also sent as SNI).
        public var serverName: String?
        /// Limits, whether to offer permessage-deflate, UTF-8 checks, masking keys.
        public var configuration = WebSocketConfiguration()
        /// Limits on the server's response head.
        public var handshakeLimits = WebSocketClientHandshake.Limits()
        /// How long connect, TLS and upgrade may take together.
        public var openTimeoutMilliseconds: UInt64 = 10_000
        /// After this long without a byte from the server, ping it; after twice this long,
        /// give the connection up (close 1006), so a half-open connection is noticed. nil: off.
        public var keepAliveMilliseconds: UInt64?
        /// After the close handshake (or our unanswered close frame), how long to wait for the
        /// server to close TCP before closing it ourselves.
        public var closeTimeoutMilliseconds: UInt64 = 2000
        /// Bytes that may wait to be written before the connection is cut; nil keeps
        /// ParleyIO's default.
        public var maxQueuedBytes: Int?

        /// Options for `target` on `host:port`; `hostHeader` defaults to `host:port`.
        public init(host: String, port: Int, target: String, hostHeader: String? = nil) {
            self.host = host
            self.port = port
            self.target = target.isEmpty ? "/" : target
            self.hostHeader = hostHeader ?? (host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)")
        }
    }

    /// Where the connection is in its life.
    public enum State: Sendable, Equatable {
        /// TCP (and TLS) being set up.
        case connecting
        /// Upgrade request sent; waiting for the 101.
        case upgrading
        /// Messages flow.
        case open
        /// Close frames exchanged or under way; waiting for TCP to close.
        case closing
        /// Gone; the delegate had its last call.
        case closed
    }

    // Why these are `@exclusivity(unchecked)`: each received read touches several of them,
    // and a dynamic exclusivity check costs ~40 instructions on the path a load generator
    // measures itself with. No access to them can overlap another: the connection is
    // loop-confined (one thread), and every access is a plain load or store except
    // `handshake.feed`, which calls nothing outside the handshake.
    //
    // `machine` and `delegate` are `let`s for the same path: a `let` of an object that is
    // alive is read without retaining it (two retain/release pairs a read otherwise).

    /// The loop this connection lives on.
    public let loop: EventLoop
    /// What it was created with.
    public let options: Options
    /// Where the connection is in its life.
    @exclusivity(unchecked) public private(set) var state = State.connecting
    /// The TCP connection, once connected.
    @exclusivity(unchecked) public private(set) var connection: TCPConnection?
    private let delegate: any WebSocketClientDelegate
    /// Whether received messages go to the delegate: from the upgrade until ``abort()`` or the
    /// delegate's last call.
    @exclusivity(unchecked) private var delivering = false
    @exclusivity(unchecked) private var handshake: WebSocketClientHandshake
    /// Made with the connection, so that it can be a `let`; the deflate parameters the
    /// handshake negotiates are handed to it at the upgrade.
    private let machine: WebSocketProtocolMachine
    @exclusivity(unchecked) private var heartbeat = WebSocketHeartbeat()
    @exclusivity(unchecked) private var peerClose: (code: UInt16, reason: String)?
    private var openTimer: LoopTimer?
    private var keepAliveTimer: LoopTimer?
    private var closeTimer: LoopTimer?

    /// A connection that will report to `delegate`; ``connect()`` starts it. Loop thread only.
    public init(loop: EventLoop, options: Options, delegate: any WebSocketClientDelegate) {
        self.loop = loop
        self.options = options
        self.delegate = delegate
        handshake = WebSocketClientHandshake(host: options.hostHeader, target: options.target,
                                             offersDeflate: options.configuration.offersDeflate,
                                             extraHeaders: options.extraHeaders, limits: options.handshakeLimits)
        machine = WebSocketProtocolMachine(role: .client, configuration: options.configuration, deflate: nil)
    }

    /// The negotiated permessage-deflate parameters once open (nil: none).
    public var deflateParameters: PerMessageDeflateParameters? { machine.deflateParameters }

    /// The server's answer to the upgrade request, once it came.
    public var response: WebSocketResponseHead? { handshake.response }

    /// Whether a message sent now goes out.
    public var canSend: Bool { state == .open && connection?.state == .open }

    private var endpoint: String { options.host.contains(":") ? "[\(options.host)]:\(options.port)" : "\(options.host):\(options.port)" }

    // MARK: Opening

    /// Connects, starts TLS when configured, and sends the upgrade request. Loop thread only.
    public func connect() {
        loop.assertInEventLoop()
        guard state == .connecting, openTimer == nil else { return }
        let timer = LoopTimer(loop: loop)
        openTimer = timer
        timer.start(after: options.openTimeoutMilliseconds) { [unowned self] in
            failToOpen(WebSocketClientError(.timedOut, "no WebSocket upgrade from \(endpoint) in time"))
        }
        loop.connect(host: options.host, port: options.port, sourceHost: options.sourceHost) { [self] result in
            switch result {
            case .failure(let error):
                failToOpen(WebSocketClientError(.connectFailed, "cannot connect to \(endpoint): \(error.message)"))
            case .success(let connection):
                guard state == .connecting else {
                    connection.close(flush: false)     // timed out or cancelled meanwhile
                    return
                }
                self.connection = connection
                connection.handler = self
                if let maxQueuedBytes = options.maxQueuedBytes { connection.maxQueuedBytes = maxQueuedBytes }
                state = .upgrading
                if let tls = options.tls {
                    do throws(IOError) {
                        // The request waits inside the TLS session until its handshake is done.
                        try connection.startTLS(tls, serverName: options.serverName)
                    } catch {
                        failToOpen(WebSocketClientError(.tlsFailed, "TLS to \(endpoint): \(error.message)"))
                        return
                    }
                }
                connection.write(handshake.request)
            }
        }
    }

    @inline(never)
    private func upgrade(_ bytes: UnsafeRawBufferPointer) {
        switch handshake.feed(bytes) {
        case .needMoreData:
            return
        case .failed(let error):
            failToOpen(WebSocketClientError(.handshakeFailed, error.message, status: error.status == 0 ? nil : error.status))
        case .upgraded(let deflate, let leftover):
            if let deflate { machine.use(deflate: deflate) }
            state = .open
            delivering = true
            openTimer?.stop()
            openTimer = nil
            if let interval = options.keepAliveMilliseconds {
                let timer = LoopTimer(loop: loop)
                keepAliveTimer = timer
                timer.start(after: interval, repeating: interval) { [unowned self] in keepAliveTick() }
            }
            delegate.webSocketDidOpen(self)
            if !leftover.isEmpty && (state == .open || state == .closing) {
                leftover.withUnsafeBytes { receive($0) }
            }
        }
    }

    private func failToOpen(_ error: WebSocketClientError) {
        guard state == .connecting || state == .upgrading else { return }
        state = .closed
        stopTimers()
        connection?.close(flush: false)
        // The delegate may let go of this connection now.
        withExtendedLifetime(self) { delegate.webSocket(self, didFailToOpen: error) }
    }

    // MARK: Receiving

    /// Part of ``ConnectionHandler``; called by the TCP connection.
    public func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        if state == .open || state == .closing {
            receive(bytes)
        } else if state == .upgrading {
            upgrade(bytes)
        }
    }

    private func receive(_ bytes: UnsafeRawBufferPointer) {
        guard delivering else { return }
        heartbeat.heard()
        machine.receive(bytes, onMessage: { kind, payload in
            // Nothing reaches the delegate after `abort()` or its last call.
            if delivering { delegate.webSocket(self, didReceive: kind, payload: payload) }
        }, perform: { action in
            perform(action)
        })
    }

    private func perform(_ action: WebSocketAction) {
        switch action {
        case .send(let bytes):
            connection?.write(bytes)
        case .peerClosed(let code, let reason):
            peerClose = (code ?? WebSocketCloseCode.noStatus.rawValue, reason)
        case .closeConnection:
            if state == .open { state = .closing }
            awaitServerClose()
        case .text, .binary:
            break   // messages go to `onMessage`
        }
    }

    private func keepAliveTick() {
        guard state == .open, let connection else { return }
        switch heartbeat.tick() {
        case .none: break
        case .sendPing: connection.write(machine.ping())
        case .giveUp: connection.close(flush: false)   // silent for two intervals: half-open
        }
    }

    // MARK: Sending

    /// Sends one text message; dropped unless open.
    public func sendText(_ text: String) {
        guard state == .open, let connection else { return }
        connection.write(machine.sendText(text))
    }

    /// Sends one text message given as UTF-8 bytes (the caller vouches for the encoding);
    /// dropped unless open.
    public func sendText(utf8 bytes: UnsafeRawBufferPointer) {
        guard state == .open, let connection else { return }
        connection.write(machine.sendText(utf8: bytes))
    }

    /// Sends one binary message; dropped unless open.
    public func sendBinary(_ bytes: UnsafeRawBufferPointer) {
        guard state == .open, let connection else { return }
        connection.write(machine.sendBinary(bytes))
    }

    /// Sends one binary message; dropped unless open.
    public func sendBinary(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { sendBinary($0) }
    }

    // MARK: Closing

    /// Starts the closing handshake (before the upgrade finished: gives the opening up, the
    /// delegate hears ``WebSocketClientError/Code/cancelled``). The delegate then hears
    /// ``WebSocketClientDelegate/webSocketDidClose(_:code:reason:)`` once TCP is closed, by
    /// the server or after ``Options/closeTimeoutMilliseconds``.
    public func close(code: WebSocketCloseCode = .normal, reason: String = "") {
        switch state {
        case .connecting, .upgrading:
            failToOpen(WebSocketClientError(.cancelled, "closed before the upgrade finished"))
        case .open:
            guard let connection else { return }
            state = .closing
            for case .send(let bytes) in machine.close(code: code, reason: reason) { connection.write(bytes) }
            awaitServerClose()
        case .closing, .closed:
            return
        }
    }

    /// Closes TCP at once, without a close frame; no message reaches the delegate after this
    /// (it hears close 1006, or ``WebSocketClientError/Code/cancelled`` before the upgrade
    /// finished).
    public func abort() {
        switch state {
        case .connecting, .upgrading:
            failToOpen(WebSocketClientError(.cancelled, "aborted before the upgrade finished"))
        case .open, .closing:
            delivering = false
            connection?.close(flush: false)
        case .closed:
            return
        }
    }

    /// RFC 6455 §7.1.1: the server closes TCP first; a server that does not must not keep the
    /// socket open.
    private func awaitServerClose() {
        guard closeTimer == nil else { return }
        let timer = LoopTimer(loop: loop)
        closeTimer = timer
        timer.start(after: options.closeTimeoutMilliseconds) { [unowned self] in connection?.close() }
    }

    /// Part of ``ConnectionHandler``; called by the TCP connection.
    public func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        switch state {
        case .connecting, .upgrading:
            var why = "connection closed during the WebSocket upgrade"
            if case .error(let error) = reason { why += ": \(error.message)" }   // e.g. a failed TLS handshake
            failToOpen(WebSocketClientError(.closedDuringHandshake, why))
        case .open, .closing:
            state = .closed
            delivering = false
            stopTimers()
            let close = peerClose ?? (WebSocketCloseCode.abnormal.rawValue, "")
            // The delegate may let go of this connection now.
            withExtendedLifetime(self) { delegate.webSocketDidClose(self, code: close.code, reason: close.reason) }
        case .closed:
            return
        }
    }

    private func stopTimers() {
        openTimer?.stop()
        openTimer = nil
        keepAliveTimer?.stop()
        keepAliveTimer = nil
        closeTimer?.stop()
        closeTimer = nil
    }
}
