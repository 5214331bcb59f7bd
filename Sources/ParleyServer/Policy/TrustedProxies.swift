import ParleyCore

/// The reverse proxies (`--trusted-proxies`) whose word about a client's address is taken:
/// from one of them, an HTTP request's client is the right-most `Forwarded` (RFC 7239) or,
/// without that header, `X-Forwarded-For` entry that is not itself a trusted proxy, and a line connection's client is its PROXY protocol
/// header's source (with `--line-proxy-protocol`). From anyone else those are ignored.
struct TrustedProxies: Sendable, Equatable {
    let networks: [IPNetwork]

    /// Most `X-Forwarded-For` entries looked at (from the right) and most bytes of the
    /// header's values together: past them the header is not read, and the proxy itself is
    /// the client (so a huge header costs nothing and gains nothing).
    static let maxForwardedEntries = 20
    static let maxForwardedBytes = 4096

    init(_ networks: [IPNetwork]) { self.networks = networks }

    var isEmpty: Bool { networks.isEmpty }

    func trusts(_ ip: String) -> Bool {
        guard !networks.isEmpty, let address = IPAddress(parsing: ip) else { return false }
        return networks.contains { $0.contains(address) }
    }

    /// The client's address for a request from `peer` carrying the `X-Forwarded-For`
    /// `values` (each may list several entries, in order). The peer itself unless it is a
    /// trusted proxy; then walking from the right, the first entry that is not a trusted
    /// proxy. An entry that is not an address ends the walk at the hop before it (a proxy
    /// vouches only for what it saw); so does running out of entries or the bounds.
    func client(peer: String, forwardedFor values: [String]) -> String {
        guard !values.isEmpty, trusts(peer) else { return peer }
        guard values.reduce(0, { $0 + $1.utf8.count }) <= Self.maxForwardedBytes else { return peer }
        var entries: [Substring] = []
        for value in values { entries += value.split(separator: ",", omittingEmptySubsequences: false) }
        return walk(from: peer, entries.map { $0.trimmingWhitespace() })
    }

    /// The client for a request from `peer`: its RFC 7239 `Forwarded` header when it has one
    /// (the standard form: `for=` of each element, `for="[2001:db8::1]:4711"` quoted), else its
    /// `X-Forwarded-For`; the same walk and bounds for both.
    func client(peer: String, forwarded: [String], forwardedFor: [String]) -> String {
        guard !forwarded.isEmpty else { return client(peer: peer, forwardedFor: forwardedFor) }
        guard trusts(peer), forwarded.reduce(0, { $0 + $1.utf8.count }) <= Self.maxForwardedBytes else { return peer }
        var entries: [Substring] = []
        for value in forwarded {
            for element in Self.forwardedElements(value) {
                // An element without `for=` (only `by=`, `proto=`) names no client: like an
                // entry that is not an address, it ends the walk.
                entries.append(Self.forwardedFor(in: element) ?? "")
            }
        }
        return walk(from: peer, entries)
    }

    private func walk(from peer: String, _ entries: [Substring]) -> String {
        var client = peer
        for entry in entries.reversed().prefix(Self.maxForwardedEntries) {
            guard let address = Self.address(of: entry) else { return client }
            client = address.description
            if !networks.contains(where: { $0.contains(address) }) { return client }
        }
        return client
    }

    /// The elements of a `Forwarded` value: split at commas outside quoted strings.
    static func forwardedElements(_ value: String) -> [Substring] {
        var elements: [Substring] = []
        var start = value.startIndex, index = value.startIndex, quoted = false, escaped = false
        while index < value.endIndex {
            let character = value[index]
            if escaped { escaped = false }
            else if quoted && character == "\\" { escaped = true }
            else if character == "\"" { quoted.toggle() }
            else if character == "," && !quoted {
                elements.append(value[start..<index])
                start = value.index(after: index)
            }
            index = value.index(after: index)
        }
        elements.append(value[start...])
        return elements
    }

    /// The value of an element's `for` parameter (case-insensitive), unquoted; nil without one.
    static func forwardedFor(in element: Substring) -> Substring? {
        for pair in element.split(separator: ";") {
            let pair = pair.trimmingWhitespace()
            guard let equals = pair.firstIndex(of: "="), pair[..<equals].trimmingWhitespace().lowercased() == "for" else { continue }
            var value = pair[pair.index(after: equals)...].trimmingWhitespace()
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = value.dropFirst().dropLast() }
            return value
        }
        return nil
    }

    /// `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`, `[2001:db8::1]:5678`.
    static func address(of entry: Substring) -> IPAddress? {
        if entry.hasPrefix("[") {
            guard let close = entry.firstIndex(of: "]") else { return nil }
            let rest = entry[entry.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.count <= 6 && rest.dropFirst().allSatisfy(\.isNumber)) else { return nil }
            return IPAddress(parsing: entry[entry.index(after: entry.startIndex)..<close])
        }
        if let address = IPAddress(parsing: entry) { return address }
        // IPv4 with a port: exactly one colon.
        let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].count <= 5, !parts[1].isEmpty, parts[1].allSatisfy(\.isNumber) else { return nil }
        return IPAddress(parsing: parts[0]).flatMap { $0.isIPv4 ? $0 : nil }
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}
