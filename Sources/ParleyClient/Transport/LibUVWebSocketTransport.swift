import Foundation
import ParleyIO
import ParleyWebSocket
#if canImport(Glibc)
import Glibc
#endif

/// Parley's own WebSocket client over libuv (``WebSocketClientConnection``): the default
/// transport on Linux, where `URLSessionWebSocketTask` is not available (Debian's libcurl
/// lacks WebSocket support).
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
        var options = WebSocketClientConnection.Options(host: address, port: endpoint.port, target: endpoint.target,
                                                        hostHeader: endpoint.hostHeader)
        options.tls = tls
        options.serverName = endpoint.host
        options.configuration = WebSocketConfiguration(maxMessageSize: maxMessageSize, maxFrameSize: maxMessageSize,
                                                       offersDeflate: true)
        options.openTimeoutMilliseconds = Self.milliseconds(connectTimeout)
        options.keepAliveMilliseconds = Self.milliseconds(keepAliveInterval)
        // A server that never answers our close must not keep the socket open.
        options.closeTimeoutMilliseconds = 2000
        let result = await withCheckedContinuation { [options] (continuation: CheckedContinuation<Result<LibUVConnection, ParleyClientError>, Never>) in
            loop.execute {
                let session = TransportSession(onEvent: onEvent) { continuation.resume(returning: $0) }
                WebSocketClientConnection(loop: loop, options: options, delegate: session).connect()
            }
        }
        return try result.get()
    }

    private static func milliseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(1, duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000))
    }

    /// A numeric address for `host` (the loop connects to numeric addresses only).
    static func resolve(_ host: String) async throws(ParleyClientError) -> String {
        switch await HostResolver.resolve(host) {
        case .success(let address): return address
        case .failure(let error): throw ParleyClientError(.connectionFailed, error.message)
        }
    }
}

/// The Sendable face of a ``WebSocketClientConnection``: every call hops onto its loop.
final class LibUVConnection: ParleyTransportConnection, @unchecked Sendable {
    // Why `@unchecked Sendable` is safe: `socket` is not Sendable, but this class never
    // touches it except inside `loop.execute { ... }`, i.e. on the loop thread that owns it;
    // `loop` is Sendable and both stored properties are `let`.
    private let loop: EventLoop
    private let socket: WebSocketClientConnection

    init(socket: WebSocketClientConnection) {
        self.loop = socket.loop
        self.socket = socket
    }

    func send(_ text: String) {
        loop.execute { [self] in socket.sendText(text) }
    }

    func close(code: UInt16, reason: String) {
        loop.execute { [self] in socket.close(code: WebSocketCloseCode(rawValue: code), reason: reason) }
    }
}

/// Turns one ``WebSocketClientConnection``'s delegate calls into the transport's results and
/// events. Loop thread only.
final class TransportSession: WebSocketClientDelegate {
    private let onEvent: @Sendable (TransportEvent) -> Void
    private var opened: ((Result<LibUVConnection, ParleyClientError>) -> Void)?

    init(onEvent: @escaping @Sendable (TransportEvent) -> Void,
         opened: @escaping (Result<LibUVConnection, ParleyClientError>) -> Void) {
        self.onEvent = onEvent
        self.opened = opened
    }

    func webSocketDidOpen(_ socket: WebSocketClientConnection) {
        let opened = self.opened
        self.opened = nil
        opened?(.success(LibUVConnection(socket: socket)))
    }

    func webSocket(_ socket: WebSocketClientConnection, didReceive kind: WebSocketMessageKind, payload: UnsafeRawBufferPointer) {
        // Binary messages are decoded as UTF-8 too: the Parley protocol is JSON either way.
        onEvent(.text(String(decoding: payload, as: UTF8.self)))
    }

    func webSocket(_ socket: WebSocketClientConnection, didFailToOpen error: WebSocketClientError) {
        let opened = self.opened
        self.opened = nil
        let code: ParleyClientError.Code
        switch error.code {
        case .timedOut: code = .timeout
        case .handshakeFailed where error.status == 401 || error.status == 403: code = .rejected
        default: code = .connectionFailed
        }
        opened?(.failure(ParleyClientError(code, error.message)))
    }

    func webSocketDidClose(_ socket: WebSocketClientConnection, code: UInt16, reason: String) {
        onEvent(.closed(code: code, reason: reason))
    }
}
