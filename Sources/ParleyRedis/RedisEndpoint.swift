import Foundation

/// Where a Redis server is and how to log in: `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`,
/// or `rediss://…` for TLS (the TLS settings are ``RedisConfiguration/tls``).
public struct RedisEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// A numeric IPv4/IPv6 address, `localhost`, or a DNS name (resolved on each connect).
    public var host: String
    public var port: Int
    /// The database `SELECT`ed after connecting (always 0 in a Redis Cluster).
    public var database: Int
    /// ACL user; nil logs in as `default` when a password is given.
    public var username: String?
    public var password: String?
    /// `rediss://`: the connection is encrypted (TLS) before anything else is sent.
    public var usesTLS: Bool

    public init(host: String = "127.0.0.1", port: Int = 6379, database: Int = 0,
                username: String? = nil, password: String? = nil, usesTLS: Bool = false) {
        self.usesTLS = usesTLS
        self.host = host
        self.port = port
        self.database = database
        self.username = username
        self.password = password
    }

    /// Parses `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (also a bare `HOST[:PORT]`);
    /// IPv6 hosts go in brackets, user and password may be percent-encoded. `rediss://` is
    /// the same over TLS.
    public init(url: String) throws(RedisError) {
        var rest = Substring(url.trimmingASCIIWhitespace())
        var tls = false
        if rest.hasPrefix("rediss://") {
            rest = rest.dropFirst("rediss://".count)
            tls = true
        } else if rest.hasPrefix("redis://") {
            rest = rest.dropFirst("redis://".count)
        } else if rest.contains("://") {
            throw RedisError(.invalidEndpoint, "not a redis:// or rediss:// URL: \(url)")
        }
        self.init(usesTLS: tls)
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                let user = try Self.percentDecoded(credentials[..<colon], url)
                username = user.isEmpty ? nil : user
                password = try Self.percentDecoded(credentials[credentials.index(after: colon)...], url)
            } else if !credentials.isEmpty {
                // `redis://secret@host` is how many tools write a password without a user.
                password = try Self.percentDecoded(credentials, url)
            }
        }
        if let query = rest.firstIndex(of: "?") {
            throw RedisError(.invalidEndpoint, "query parameters are not supported: \(rest[query...]) in \(url)")
        }
        var hostPort = rest
        if let slash = rest.firstIndex(of: "/") {
            hostPort = rest[..<slash]
            let db = rest[rest.index(after: slash)...]
            if !db.isEmpty {
                guard let number = Int(db), number >= 0, number < 1 << 16 else {
                    throw RedisError(.invalidEndpoint, "not a database number: \(db) in \(url)")
                }
                database = number
            }
        }
        let (host, port) = try Self.hostAndPort(hostPort, url)
        self.host = host
        self.port = port ?? 6379
    }

    /// Parses a comma-separated list of `HOST:PORT` (or URLs) for Redis Cluster seed nodes.
    public static func seeds(_ list: String) throws(RedisError) -> [RedisEndpoint] {
        let items = list.split(separator: ",").map { String($0).trimmingASCIIWhitespace() }.filter { !$0.isEmpty }
        guard !items.isEmpty else { throw RedisError(.invalidEndpoint, "no seed nodes in \"\(list)\"") }
        var result: [RedisEndpoint] = []
        for item in items { result.append(try RedisEndpoint(url: item)) }
        return result
    }

    /// `HOST:PORT`, with IPv6 hosts in brackets: how Redis Cluster names nodes.
    public var address: String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// The URL without the password, for logs and `/metrics`.
    public var description: String {
        let user = username.map { "\($0)@" } ?? (password != nil ? "***@" : "")
        return (usesTLS ? "rediss://" : "redis://") + "\(user)\(address)" + (database != 0 ? "/\(database)" : "")
    }

    /// The same credentials and database on another node (cluster redirections).
    func moved(to host: String, port: Int) -> RedisEndpoint {
        var copy = self
        copy.host = host
        copy.port = port
        return copy
    }

    static func hostAndPort(_ text: Substring, _ url: String) throws(RedisError) -> (String, Int?) {
        var host = text
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw RedisError(.invalidEndpoint, "unclosed [ in \(url)") }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw RedisError(.invalidEndpoint, "junk after ] in \(url)") }
                portText = after.dropFirst()
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { throw RedisError(.invalidEndpoint, "no host in \(url)") }
        guard host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":" || $0 == "_" }) else {
            throw RedisError(.invalidEndpoint, "invalid host \"\(host)\" in \(url)")
        }
        var port: Int?
        if let portText {
            guard let number = Int(portText), number > 0, number < 65536 else {
                throw RedisError(.invalidEndpoint, "invalid port \"\(portText)\" in \(url)")
            }
            port = number
        }
        return (String(host), port)
    }

    private static func percentDecoded(_ text: Substring, _ url: String) throws(RedisError) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard utf8.count >= 2, let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16) else {
                throw RedisError(.invalidEndpoint, "invalid percent-encoding in the credentials of a Redis URL")
            }
            bytes.append(value)
            utf8 = utf8.dropFirst(2)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension String {
    func trimmingASCIIWhitespace() -> String {
        let scalars = unicodeScalars
        guard let start = scalars.firstIndex(where: { $0 != " " && $0 != "\t" && $0 != "\n" && $0 != "\r" }) else { return "" }
        let end = scalars.lastIndex(where: { $0 != " " && $0 != "\t" && $0 != "\n" && $0 != "\r" })!
        return String(scalars[start...end])
    }
}
