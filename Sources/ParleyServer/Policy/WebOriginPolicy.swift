import ParleyHTTP

/// Which web pages may drive this server, checked once for every HTTP request and WebSocket
/// upgrade on every door behind the HTTP port (native, Socket.IO, REST, admin, files), before
/// routing.
///
/// - **Origin.** A browser names the page that makes a request in `Origin`. A request from
///   a page of this server (same host and port), or with no `Origin` at all (apps, scripts,
///   servers: only browsers send it), is served; so is one from an origin in
///   `--allowed-origins` (`*`: any). Every other page is refused with 403: without this any
///   web page a user opens could chat, publish or upload as that user's machine, and
///   Socket.IO echoed any origin with credentials allowed.
/// - **Host, on loopback (DNS rebinding).** A page can rebind its own name to 127.0.0.1 and
///   then reach a server on the user's machine as "same origin". While the HTTP port is
///   bound to a loopback address, a request must name a loopback host (`localhost`,
///   127.0.0.0/8, `[::1]`) or the host of `--public-url` or of an allowed origin; else 421.
struct WebOriginPolicy: Sendable {
    /// Allowed origins, normalized (`scheme://host:port`, lowercased, default ports added).
    let allowedOrigins: Set<String>
    let allowsAnyOrigin: Bool
    /// Host names (no port) a request may name while bound to loopback; nil: any.
    let loopbackHosts: Set<String>?

    init(allowedOrigins: [String], boundHost: String, publicURL: String?) {
        allowsAnyOrigin = allowedOrigins.contains("*")
        let normalized = allowedOrigins.filter { $0 != "*" }.compactMap(Self.normalize)
        self.allowedOrigins = Set(normalized)
        if ServerConfiguration.isLoopback(boundHost) {
            var hosts = Set(normalized.compactMap { Self.hostAndPort(ofOrigin: $0)?.host })
            if let publicURL, let host = Self.normalize(publicURL).flatMap({ Self.hostAndPort(ofOrigin: $0)?.host }) {
                hosts.insert(host)
            }
            loopbackHosts = hosts
        } else {
            loopbackHosts = nil
        }
    }

    init(_ configuration: ServerConfiguration) {
        self.init(allowedOrigins: configuration.allowedOrigins, boundHost: configuration.host, publicURL: configuration.publicURL)
    }

    /// Nil when `head` may be served; else the status and the text that says why.
    func refusal(_ head: HTTPRequestHead) -> (status: Int, text: String)? {
        let host = head.headers["Host"]
        if let loopbackHosts, let host, let name = Self.splitHost(host.lowercased())?.host,
           !ServerConfiguration.isLoopback(name), !loopbackHosts.contains(name) {
            return (421, "this server listens on a loopback address and answers only requests for localhost, 127.0.0.1 or [::1] (Host was \"\(String(host.prefix(80)))\"); to serve another name, set \(ServerSetting.flag(of: \ServerConfiguration.publicURL)) or \(ServerSetting.flag(of: \ServerConfiguration.allowedOrigins))\n")
        }
        guard let origin = head.headers["Origin"], !allowsAnyOrigin else { return nil }
        if let normalized = Self.normalize(origin) {
            if allowedOrigins.contains(normalized) { return nil }
            if let host, let own = Self.splitHost(host.lowercased()), let theirs = Self.hostAndPort(ofOrigin: normalized),
               own.host == theirs.host, (own.port ?? theirs.defaultPort) == theirs.port {
                return nil
            }
        }
        return (403, "origin \"\(String(origin.prefix(80)))\" may not use this server; an operator can allow it with \(ServerSetting.flag(of: \ServerConfiguration.allowedOrigins))\n")
    }

    // MARK: parsing

    /// `scheme://host[:port]` lowercased with its port made explicit; nil when it is not an
    /// http(s) origin (`null`, a path, garbage).
    static func normalize(_ origin: String) -> String? {
        let lower = origin.lowercased()
        let scheme: String, defaultPort: Int
        if lower.hasPrefix("http://") { (scheme, defaultPort) = ("http", 80) }
        else if lower.hasPrefix("https://") { (scheme, defaultPort) = ("https", 443) }
        else { return nil }
        var rest = lower.dropFirst(scheme.count + 3)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@"), let (host, port) = splitHost(String(rest)) else { return nil }
        return "\(scheme)://\(host):\(port ?? defaultPort)"
    }

    /// The host and port of a normalized origin, with the scheme's default port.
    static func hostAndPort(ofOrigin normalized: String) -> (host: String, port: Int, defaultPort: Int)? {
        let https = normalized.hasPrefix("https://")
        guard let (host, port) = splitHost(String(normalized.dropFirst(https ? 8 : 7))) else { return nil }
        let defaultPort = https ? 443 : 80
        return (host, port ?? defaultPort, defaultPort)
    }

    /// `host[:port]` (host may be `[v6]`) split; nil when malformed.
    static func splitHost(_ text: String) -> (host: String, port: Int?)? {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let host = String(text[...close])
            let after = text[text.index(after: close)...]
            if after.isEmpty { return (host, nil) }
            guard after.hasPrefix(":"), let port = Int(after.dropFirst()), (0...65535).contains(port) else { return nil }
            return (host, port)
        }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard let first = parts.first, !first.isEmpty, parts.count <= 2 else { return nil }
        if parts.count == 2 {
            guard let port = Int(parts[1]), (0...65535).contains(port) else { return nil }
            return (String(first), port)
        }
        return (String(first), nil)
    }
}
