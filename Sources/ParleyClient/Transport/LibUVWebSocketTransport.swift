import Foundation
import ParleyIO
import ParleyWebSocket
#if canImport(Glibc)
import Glibc
#endif

/// Parley's own WebSocket client over libuv: the default transport on Linux, where
/// `URLSessionWebSocketTask` is not available (Debian's libcurl lacks WebSocket support).
///
/// Connections run on one event loop: by default a single loop shared by every client in the
/// process (started on first use, living as long as the process), or a loop of a group you pass.
/// `wss://` goes through OpenSSL (TLS 1.2+), verifying the server's certificate for the URL's
/// host (also sent as SNI) against the system's trust store, or ``trustedCertificatesFile``.
public struct LibUVWebSocketTransport: ParleyTransport {
    private let group: EventLoopGroup?
    /// Largest message accepted from the server.
    public var maxMessageSize: Int = 16 << 20
    /// How long the TCP connect plus the upgrade may take.
    public var connectTimeout: Duration = .seconds(10)
    /// After this long without a byte from the server, ping it; after twice this long, give
    /// the connection up (reported as close 1006), so a half-open connection is noticed.
    public var keepAliveInterval: Duration = .seconds(30)
    /// For `wss://`: a PEM file of certificates to trust instead of the system's store, e.g.
    /// the certificate of a self-signed server.
    public var trustedCertificatesFile: String?

    /// Uses the process-wide client loop.
    public init() { group = nil }

    /// Uses a loop of `group` (round robin) for each connection.
    public init(group: EventLoopGroup) { self.group = group }

    /// One loop for every client in the process that did not bring its own group. Its thread
    /// idles in `uv_run` when there is nothing to do and ends with the process.
    private static let sharedGroup = EventLoopGroup(loopCount: 1)

    /// Opens a connection; see ``ParleyTransport/open(_:onEvent:)``.
    public func open(_ endpoint: ParleyEndpoint,
                     onEvent: @escaping @Sendable (TransportEvent) -> Void) async throws(ParleyClientError) -> any ParleyTransportConnection {
        let tls: TLSContext?
        do {
            tls = endpoint.isSecure ? try TLSContext(clientTrusting: trustedCertificatesFile) : nil
        } catch {
            throw ParleyClientError(.connectionFailed, error.message)
        }
        let address = try await Self.resolve(endpoint.host)
        let loop = (group ?? Self.sharedGroup).next()
        let key = WebSocketHandshake.makeClientKey()
        let request = WebSocketHandshake.clientRequest(host: endpoint.hostHeader, path: endpoint.target, key: key,
                                                       offerDeflate: true)
        let configuration = WebSocketConfiguration(maxMessageSize: maxMessageSize, maxFrameSize: maxMessageSize)
        let timeoutMillis = Self.milliseconds(connectTimeout)
        let keepAliveMillis = Self.milliseconds(keepAliveInterval)
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<LibUVConnection, ParleyClientError>, Never>) in
            loop.execute {
                let handler = WebSocketClientHandler(loop: loop, key: key, configuration: configuration,
                                                     keepAliveMillis: keepAliveMillis, onEvent: onEvent) {
                    continuation.resume(returning: $0)
                }
                handler.start(host: address, port: endpoint.port, request: request, timeoutMillis: timeoutMillis,
                              tls: tls, serverName: endpoint.host)
            }
        }
        return try result.get()
    }

    private static func milliseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(1, duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000))
    }

    /// A numeric address for `host`: as is when already numeric, else the first getaddrinfo
    /// answer (the loop's connect takes numeric addresses only).
    static func resolve(_ host: String) async throws(ParleyClientError) -> String {
        if host == "localhost" { return "127.0.0.1" }
        var probe4 = in_addr(), probe6 = in6_addr()
        if inet_pton(AF_INET, host, &probe4) == 1 || inet_pton(AF_INET6, host, &probe6) == 1 { return host }
        // getaddrinfo blocks: keep it off the cooperative pool and off the event loop.
        let resolved: String? = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var hints = addrinfo()
                hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
                var list: UnsafeMutablePointer<addrinfo>?
                guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else {
                    continuation.resume(returning: nil)
                    return
                }
                defer { freeaddrinfo(list) }
                var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
                var answer: String?
                if first.pointee.ai_family == AF_INET {
                    var address = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                    if inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)) != nil { answer = text(buffer) }
                } else if first.pointee.ai_family == AF_INET6 {
                    var address = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                    if inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil { answer = text(buffer) }
                }
                continuation.resume(returning: answer)
            }
            @Sendable func text(_ buffer: [CChar]) -> String {
                String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
        }
        guard let resolved else { throw ParleyClientError(.connectionFailed, "cannot resolve host \(host)") }
        return resolved
    }
}

/// The Sendable face of a ``WebSocketClientHandler``: every call hops onto the handler's loop.
final class LibUVConnection: ParleyTransportConnection, @unchecked Sendable {
    // Why `@unchecked Sendable` is safe: `handler` is not Sendable, but this class never
    // touches it except inside `loop.execute { ... }`, i.e. on the loop thread that owns it;
    // `loop` is Sendable and both stored properties are `let`.
    private let loop: EventLoop
    private let handler: WebSocketClientHandler

    init(loop: EventLoop, handler: WebSocketClientHandler) {
        self.loop = loop
        self.handler = handler
    }

    func send(_ text: String) {
        loop.execute { [self] in handler.send(text) }
    }

    func close(code: UInt16, reason: String) {
        loop.execute { [self] in handler.close(code: code, reason: reason) }
    }
}

/// One client WebSocket on one loop: writes the upgrade request, checks the 101, then runs a
/// client-role ``WebSocketProtocolMachine``. Loop thread only.
final class WebSocketClientHandler: ConnectionHandler {
    private enum Phase { case connecting, upgrading, open, closed }

    private let loop: EventLoop
    private let key: String
    private let configuration: WebSocketConfiguration
    private let keepAliveMillis: UInt64
    private var keepAlive: LoopTimer?
    private var heardSinceTick = true
    private var pingOutstanding = false
    private let onEvent: @Sendable (TransportEvent) -> Void
    private var opened: ((Result<LibUVConnection, ParleyClientError>) -> Void)?
    private var phase = Phase.connecting
    private var connection: TCPConnection?
    private var machine: WebSocketProtocolMachine?
    private var head: [UInt8] = []
    private var timer: LoopTimer?
    private var peerClose: (code: UInt16, reason: String)?
    private var failure: String?

    init(loop: EventLoop, key: String, configuration: WebSocketConfiguration, keepAliveMillis: UInt64,
         onEvent: @escaping @Sendable (TransportEvent) -> Void,
         opened: @escaping (Result<LibUVConnection, ParleyClientError>) -> Void) {
        self.loop = loop
        self.key = key
        self.configuration = configuration
        self.keepAliveMillis = keepAliveMillis
        self.onEvent = onEvent
        self.opened = opened
    }

    func start(host: String, port: Int, request: [UInt8], timeoutMillis: UInt64,
               tls: TLSContext? = nil, serverName: String? = nil) {
        let timer = LoopTimer(loop: loop)
        self.timer = timer
        timer.start(after: timeoutMillis) { [self] in
            failOpen(ParleyClientError(.timeout, "no WebSocket upgrade from \(host):\(port) in time"))
        }
        loop.connect(host: host, port: port) { [self] result in
            switch result {
            case .failure(let error):
                failOpen(ParleyClientError(.connectionFailed, "cannot connect to \(host):\(port): \(error.message)"))
            case .success(let connection):
                guard phase == .connecting else {
                    connection.close(flush: false)
                    return
                }
                self.connection = connection
                connection.handler = self
                phase = .upgrading
                if let tls {
                    do throws(IOError) {
                        // The request waits inside the TLS session until the handshake is done.
                        try connection.startTLS(tls, serverName: serverName)
                    } catch {
                        failOpen(ParleyClientError(.connectionFailed, "TLS to \(host):\(port): \(error.message)"))
                        return
                    }
                }
                connection.write(request)
            }
        }
    }

    private func failOpen(_ error: ParleyClientError) {
        guard let opened else { return }
        self.opened = nil
        timer?.stop()
        timer = nil
        phase = .closed
        connection?.close(flush: false)
        opened(.failure(error))
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        switch phase {
        case .upgrading:
            head.append(contentsOf: bytes)
            switch UpgradeResponseHead.parse(head) {
            case .needMoreData:
                return
            case .invalid(let why):
                failOpen(ParleyClientError(.connectionFailed, "bad upgrade response: \(why)"))
            case .complete(let response, let consumed):
                let deflate: PerMessageDeflateParameters?
                do {
                    deflate = try WebSocketHandshake.validateServerResponse(
                        status: response.status, header: response.header, key: key, offeredDeflate: true)
                } catch {
                    let code: ParleyClientError.Code = (response.status == 401 || response.status == 403) ? .rejected : .connectionFailed
                    failOpen(ParleyClientError(code, error.message))
                    return
                }
                let leftover = Array(head[consumed...])
                head = []
                machine = WebSocketProtocolMachine(role: .client, configuration: configuration, deflate: deflate)
                phase = .open
                timer?.stop()
                timer = nil
                let keepAlive = LoopTimer(loop: loop)
                self.keepAlive = keepAlive
                keepAlive.start(after: keepAliveMillis, repeating: keepAliveMillis) { [weak self] in self?.keepAliveTick() }
                let opened = self.opened
                self.opened = nil
                opened?(.success(LibUVConnection(loop: loop, handler: self)))
                if !leftover.isEmpty { leftover.withUnsafeBytes { feed($0) } }
            }
        case .open:
            feed(bytes)
        case .connecting, .closed:
            return
        }
    }

    private func keepAliveTick() {
        guard phase == .open, let machine, let connection else { return }
        if heardSinceTick {
            heardSinceTick = false
            pingOutstanding = false
        } else if pingOutstanding {
            connection.close(flush: false)          // silent for two intervals: half-open
        } else {
            connection.write(machine.ping())
            pingOutstanding = true
        }
    }

    private func feed(_ bytes: UnsafeRawBufferPointer) {
        guard let machine, let connection else { return }
        heardSinceTick = true
        for action in machine.receive(bytes) {
            switch action {
            case .text(let text):
                onEvent(.text(text))
            case .binary(let bytes):
                onEvent(.text(String(decoding: bytes, as: UTF8.self)))
            case .send(let bytes):
                connection.write(bytes)
            case .closeConnection:
                connection.close()
            case .peerClosed(let code, let reason):
                peerClose = (code ?? WebSocketCloseCode.noStatus.rawValue, reason)
            }
        }
    }

    func send(_ text: String) {
        guard phase == .open, let machine, let connection else { return }
        let frame = machine.sendText(text)
        if !frame.isEmpty { connection.write(frame) }
    }

    func close(code: UInt16, reason: String) {
        guard phase == .open, let machine, let connection else {
            failOpen(ParleyClientError(.connectionFailed, "closed before the upgrade finished"))
            return
        }
        for case .send(let bytes) in machine.close(code: WebSocketCloseCode(rawValue: code), reason: reason) {
            connection.write(bytes)
        }
        // A server that never answers our close must not keep the socket open.
        loop.schedule(after: 2000) { [weak connection] in connection?.close(flush: false) }
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        if opened != nil {
            var why = "connection closed during the WebSocket upgrade"
            if case .error(let error) = reason { why += ": \(error.message)" }  // e.g. a failed TLS handshake
            failOpen(ParleyClientError(.connectionFailed, why))
            return
        }
        guard phase == .open else { return }
        phase = .closed
        keepAlive?.stop()
        keepAlive = nil
        let close = peerClose ?? (WebSocketCloseCode.abnormal.rawValue, "")
        onEvent(.closed(code: close.code, reason: close.reason))
    }
}
