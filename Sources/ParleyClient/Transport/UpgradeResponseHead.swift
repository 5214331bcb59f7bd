/// The head of the server's answer to a WebSocket upgrade request (`HTTP/1.1 101 ...` plus
/// headers), parsed strictly: the HTTP parser in ParleyHTTP is server-side only, and a client
/// needs nothing but the status and a few headers.
struct UpgradeResponseHead: Equatable {
    /// Largest head accepted; a real 101 is a few hundred bytes.
    static let maxSize = 8 * 1024

    let status: Int
    /// Header fields in order, names as sent.
    let headers: [(name: String, value: String)]

    static func == (a: Self, b: Self) -> Bool {
        a.status == b.status && a.headers.elementsEqual(b.headers) { $0 == $1 }
    }

    /// Case-insensitive lookup; repeated fields are joined with ", " (RFC 7230 §3.2.2).
    func header(_ name: String) -> String? {
        let lower = name.lowercased()
        let values = headers.filter { $0.name.lowercased() == lower }.map(\.value)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    enum ParseResult: Equatable {
        /// The head is complete: it and the number of bytes it used (what follows is WebSocket data).
        case complete(UpgradeResponseHead, consumed: Int)
        case needMoreData
        case invalid(String)
    }

    /// Looks for a complete head at the start of `bytes`.
    static func parse(_ bytes: [UInt8]) -> ParseResult {
        var end: Int?
        if bytes.count >= 4 {
            for i in 0...(bytes.count - 4)
            where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
                end = i
                break
            }
        }
        guard let end else {
            return bytes.count > maxSize ? .invalid("response head larger than \(maxSize) bytes") : .needMoreData
        }
        guard end + 4 <= maxSize else { return .invalid("response head larger than \(maxSize) bytes") }
        let text = bytes[..<end]
        guard !text.contains(0), let head = String(validating: text, as: UTF8.self) else {
            return .invalid("response head is not valid UTF-8 text")
        }
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines.removeFirst()
        // "HTTP/1.1 101 Switching Protocols": version, one space, three digits, then a reason.
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == "HTTP/1.1" || parts[0] == "HTTP/1.0",
              parts[1].count == 3, parts[1].allSatisfy(\.isASCII), let status = Int(parts[1]) else {
            return .invalid("bad status line: \(statusLine.prefix(80))")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { return .invalid("header line without a colon") }
            let name = line[..<colon]
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
                // Also rejects obsolete line folding (a line starting with whitespace).
                return .invalid("bad header name")
            }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t")
            headers.append((String(name), value))
        }
        return .complete(UpgradeResponseHead(status: status, headers: headers), consumed: end + 4)
    }

    /// RFC 7230 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var s = self[...]
        while let first = s.first, set.contains(first) { s = s.dropFirst() }
        while let last = s.last, set.contains(last) { s = s.dropLast() }
        return String(s)
    }
}
