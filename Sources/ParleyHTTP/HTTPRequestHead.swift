/// The request line and header fields of one HTTP/1.x request.
public struct HTTPRequestHead: Sendable, Equatable {
    /// The method token exactly as sent (methods are case-sensitive).
    public var method: String
    /// The raw request-target as sent, e.g. `/rooms/a%20b?limit=10`.
    public var target: String
    /// The percent-decoded path without the query, e.g. `/rooms/a b`.
    /// For an absolute-form target (`http://host/x`) this is the path part (`/x`);
    /// for `OPTIONS *` it is `*`.
    public var path: String
    /// The raw query after `?` (still percent-encoded), or `nil` when the target has none.
    public var rawQuery: String?
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    public var versionMinor: Int
    /// The header fields in the order received.
    public var headers: HTTPHeaders

    /// A head built by hand (tests, clients); the parser fills these from the wire.
    public init(method: String, target: String, path: String? = nil, rawQuery: String? = nil,
                versionMinor: Int = 1, headers: HTTPHeaders = .init()) {
        self.method = method
        self.target = target
        if let path {
            self.path = path
            self.rawQuery = rawQuery
        } else if let split = try? splitRequestTarget(Array(target.utf8), method: method) {
            self.path = split.path
            self.rawQuery = rawQuery ?? split.rawQuery
        } else {
            self.path = target
            self.rawQuery = rawQuery
        }
        self.versionMinor = versionMinor
        self.headers = headers
    }

    /// Whether the connection may carry another request after this one:
    /// HTTP/1.1 unless `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`.
    public var keepAlive: Bool {
        if versionMinor >= 1 { return !headers.contains("Connection", token: "close") }
        return headers.contains("Connection", token: "keep-alive")
            && !headers.contains("Connection", token: "close")
    }

    /// Whether the client asks to switch protocols (`Connection: upgrade` plus an `Upgrade`
    /// field). HTTP/1.0 requests never count: RFC 9110 §7.8 says to ignore Upgrade there.
    public var isUpgrade: Bool {
        versionMinor >= 1 && headers.contains("Connection", token: "upgrade") && headers["Upgrade"] != nil
    }

    /// The query as decoded `(name, value)` pairs in order: `+` is a space and `%XX` is
    /// decoded; a malformed escape is kept literally rather than failing the request.
    public var queryItems: [(name: String, value: String)] {
        guard let rawQuery, !rawQuery.isEmpty else { return [] }
        var items: [(name: String, value: String)] = []
        for part in rawQuery.utf8.split(separator: UInt8(ascii: "&")) {
            if let eq = part.firstIndex(of: UInt8(ascii: "=")) {
                items.append((decodeQueryComponent(part[..<eq]),
                              decodeQueryComponent(part[part.index(after: eq)...])))
            } else {
                items.append((decodeQueryComponent(part), ""))
            }
        }
        return items
    }

    /// The first decoded value of query parameter `name`, or `nil`.
    public func query(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }

    /// Every decoded value of query parameter `name`, in order.
    public func queryValues(_ name: String) -> [String] {
        queryItems.filter { $0.name == name }.map(\.value)
    }
}

/// Decodes one `application/x-www-form-urlencoded` component leniently.
func decodeQueryComponent(_ bytes: Substring.UTF8View) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var i = bytes.startIndex
    while i != bytes.endIndex {
        let c = bytes[i]
        if c == UInt8(ascii: "+") {
            out.append(0x20)
        } else if c == UInt8(ascii: "%"),
                  let h1 = bytes.index(i, offsetBy: 1, limitedBy: bytes.endIndex), h1 != bytes.endIndex,
                  let h2 = bytes.index(i, offsetBy: 2, limitedBy: bytes.endIndex), h2 != bytes.endIndex,
                  let hi = hexValue(bytes[h1]), let lo = hexValue(bytes[h2]) {
            out.append(hi << 4 | lo)
            i = h2
        } else {
            out.append(c)
        }
        i = bytes.index(after: i)
    }
    return String(decoding: out, as: UTF8.self)
}

@inline(__always)
func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}

/// Splits a validated request-target into its decoded path and raw query.
/// Throws a 400 for a form the method does not allow or a bad percent-escape in the path.
func splitRequestTarget<C: Collection<UInt8>>(_ target: C, method: String) throws(HTTPParseError)
    -> (path: String, rawQuery: String?) where C.Index == Int {
    let bytes = Array(target)
    var pathStart = 0
    if bytes.first == UInt8(ascii: "/") {
        pathStart = 0
    } else if bytes.count == 1 && bytes[0] == UInt8(ascii: "*") {
        guard method == "OPTIONS" else { throw HTTPParseError(400, "'*' target is only allowed with OPTIONS") }
        return ("*", nil)
    } else if let afterScheme = absoluteFormAuthorityStart(bytes) {
        var j = afterScheme
        while j < bytes.count && bytes[j] != UInt8(ascii: "/") && bytes[j] != UInt8(ascii: "?") { j += 1 }
        guard j > afterScheme else { throw HTTPParseError(400, "absolute-form target without host") }
        if j == bytes.count || bytes[j] == UInt8(ascii: "?") {
            let rawQuery = j == bytes.count ? nil : String(decoding: bytes[(j + 1)...], as: UTF8.self)
            return ("/", rawQuery)
        }
        pathStart = j
    } else {
        throw HTTPParseError(400, "invalid request-target")
    }
    var pathEnd = pathStart
    while pathEnd < bytes.count && bytes[pathEnd] != UInt8(ascii: "?") { pathEnd += 1 }
    let rawQuery = pathEnd < bytes.count ? String(decoding: bytes[(pathEnd + 1)...], as: UTF8.self) : nil
    return (try percentDecodePath(bytes[pathStart..<pathEnd]), rawQuery)
}

/// Index just after `http://` or `https://` (case-insensitive), or `nil`.
private func absoluteFormAuthorityStart(_ bytes: [UInt8]) -> Int? {
    for scheme in ["http://", "https://"] {
        let s = Array(scheme.utf8)
        if bytes.count > s.count && zip(bytes, s).allSatisfy({ asciiLower($0) == $1 }) { return s.count }
    }
    return nil
}

/// Strict percent-decoding of a path: every `%` needs two hex digits, the result must be
/// UTF-8 and must not contain NUL (which would truncate file paths in C APIs).
func percentDecodePath(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) -> String {
    guard bytes.contains(UInt8(ascii: "%")) else { return String(decoding: bytes, as: UTF8.self) }
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var i = bytes.startIndex
    while i < bytes.endIndex {
        let c = bytes[i]
        if c == UInt8(ascii: "%") {
            guard i + 2 < bytes.endIndex, let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) else {
                throw HTTPParseError(400, "invalid percent-encoding in path")
            }
            let decoded = hi << 4 | lo
            guard decoded != 0 else { throw HTTPParseError(400, "NUL in path") }
            out.append(decoded)
            i += 3
        } else {
            out.append(c)
            i += 1
        }
    }
    guard let s = String(validating: out, as: UTF8.self) else {
        throw HTTPParseError(400, "path is not valid UTF-8")
    }
    return s
}
