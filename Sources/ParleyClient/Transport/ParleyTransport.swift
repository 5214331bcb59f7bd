import Foundation

/// Where a client connects: parsed once from the `ws://` URL.
public struct ParleyEndpoint: Sendable, Hashable {
    /// Host name or address as written in the URL (brackets stripped for IPv6).
    public let host: String
    /// TCP port (80 / 443 by default).
    public let port: Int
    /// Request target: path plus query, never empty.
    public let target: String
    /// `wss://` (TLS).
    public let isSecure: Bool
    /// The original URL.
    public let url: URL

    /// Parses `ws://HOST[:PORT]/PATH[?QUERY]` (or `wss://`; `http(s)://` are accepted as aliases).
    public init(url: URL) throws(ParleyClientError) {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
              let scheme = components.scheme?.lowercased() else {
            throw ParleyClientError(.invalidURL, "not a URL: \(url.absoluteString)")
        }
        switch scheme {
        case "ws", "http": isSecure = false
        case "wss", "https": isSecure = true
        default: throw ParleyClientError(.invalidURL, "expected a ws:// URL, got \(url.absoluteString)")
        }
        guard var host = components.host, !host.isEmpty else {
            throw ParleyClientError(.invalidURL, "no host in \(url.absoluteString)")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.host = host
        port = components.port ?? (isSecure ? 443 : 80)
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        self.target = target
        self.url = url
    }

    /// The `Host` header value.
    public var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (isSecure ? 443 : 80) ? name : "\(name):\(port)"
    }
}

/// What a transport reports about an open connection, in order, from one thread at a time.
public enum TransportEvent: Sendable, Equatable {
    /// One complete message (text, or binary decoded as UTF-8).
    case text(String)
    /// The connection is gone. `code` is the peer's close code, or 1006 when the connection
    /// dropped without a close frame. Always the last event.
    case closed(code: UInt16, reason: String)
}

/// A WebSocket client implementation. The whole Parley protocol lives in ``ParleyClient``;
/// a transport only moves text messages, so Linux (libuv) and Apple platforms
/// (`URLSessionWebSocketTask`) share every line of protocol logic.
public protocol ParleyTransport: Sendable {
    /// Opens a WebSocket to `endpoint`. `onEvent` receives messages and the final close,
    /// serially and in order, possibly before `open` returns.
    func open(_ endpoint: ParleyEndpoint,
              onEvent: @escaping @Sendable (TransportEvent) -> Void) async throws(ParleyClientError) -> any ParleyTransportConnection
}

/// One open WebSocket connection made by a ``ParleyTransport``.
public protocol ParleyTransportConnection: Sendable {
    /// Sends one text message. Dropped silently once the connection is closing.
    func send(_ text: String)
    /// Starts the closing handshake; `onEvent` then gets `.closed`.
    func close(code: UInt16, reason: String)
}

extension ParleyTransport where Self == DefaultTransport {
    /// The platform's transport: `URLSessionWebSocketTask` on Apple platforms, Parley's own
    /// WebSocket client over libuv elsewhere.
    public static var platformDefault: DefaultTransport { DefaultTransport() }
}

#if canImport(Darwin)
/// The platform's default transport.
public typealias DefaultTransport = URLSessionTransport
#else
/// The platform's default transport.
public typealias DefaultTransport = LibUVWebSocketTransport
#endif
