/// An IPv4 or IPv6 address, parsed from text without the C library (ParleyCore knows no
/// sockets). Per-IP limits, trusted proxies and forwarded addresses all go through it, so one
/// address has one spelling everywhere.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 (IPv6), network order. An IPv4-mapped IPv6 address
    /// (`::ffff:1.2.3.4`) is kept as its IPv4 address: it is the same host.
    public let bytes: [UInt8]

    public var isIPv4: Bool { bytes.count == 4 }

    public init?(bytes: [UInt8]) {
        if bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            self.bytes = Array(bytes[12..<16])
        } else if bytes.count == 4 || bytes.count == 16 {
            self.bytes = bytes
        } else {
            return nil
        }
    }

    /// `1.2.3.4`, `2001:db8::1`, `::ffff:1.2.3.4`; at most 45 characters, no zone, no port.
    public init?(parsing text: some StringProtocol) {
        let utf8 = Array(text.utf8)
        guard !utf8.isEmpty, utf8.count <= 45 else { return nil }
        if utf8.contains(UInt8(ascii: ":")) {
            guard let bytes = Self.parseIPv6(utf8) else { return nil }
            self.init(bytes: bytes)
        } else {
            guard let bytes = Self.parseIPv4(utf8[...]) else { return nil }
            self.init(bytes: bytes)
        }
    }

    private static func parseIPv4(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        let parts = text.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  part.count == 1 || part.first != UInt8(ascii: "0") else { return nil }
            let value = part.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard value <= 255 else { return nil }
            bytes.append(UInt8(value))
        }
        return bytes
    }

    private static func parseIPv6(_ text: [UInt8]) -> [UInt8]? {
        var head: [UInt16] = [], tail: [UInt16] = []
        var sawGap = false
        // Split on "::" once.
        let body = text[...]
        var groups: [ArraySlice<UInt8>] = []
        var gapIndex: Int?
        if let range = findDoubleColon(body) {
            sawGap = true
            let left = body[body.startIndex..<range], right = body[(range + 2)...]
            guard findDoubleColon(right) == nil else { return nil }
            let leftGroups = left.isEmpty ? [] : left.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            let rightGroups = right.isEmpty ? [] : right.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            gapIndex = leftGroups.count
            groups = leftGroups + rightGroups
        } else {
            groups = body.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        }
        var embeddedV4: [UInt8]?
        if let last = groups.last, last.contains(UInt8(ascii: ".")) {
            guard let v4 = parseIPv4(last) else { return nil }
            embeddedV4 = v4
            groups.removeLast()
        }
        for (index, group) in groups.enumerated() {
            guard !group.isEmpty, group.count <= 4 else { return nil }
            var value: UInt16 = 0
            for byte in group {
                let digit: UInt16
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt16(byte - 0x30)
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt16(byte - 0x61 + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt16(byte - 0x41 + 10)
                default: return nil
                }
                value = value << 4 | digit
            }
            if let gapIndex, index >= gapIndex { tail.append(value) } else { head.append(value) }
        }
        var words = head
        let written = head.count + tail.count + (embeddedV4 == nil ? 0 : 2)
        if sawGap {
            guard written <= 7 else { return nil }
            words += Array(repeating: 0, count: 8 - written)
        } else {
            guard written == 8 else { return nil }
        }
        words += tail
        var bytes = words.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        if let embeddedV4 { bytes += embeddedV4 }
        return bytes.count == 16 ? bytes : nil
    }

    private static func findDoubleColon(_ text: ArraySlice<UInt8>) -> Int? {
        var index = text.startIndex
        while index + 1 < text.endIndex {
            if text[index] == UInt8(ascii: ":") && text[index + 1] == UInt8(ascii: ":") { return index }
            index += 1
        }
        return nil
    }

    /// RFC 5952 text: lowercase, the longest run of two or more zero groups as `::`.
    public var description: String {
        if isIPv4 { return bytes.map(String.init).joined(separator: ".") }
        let words = (0..<8).map { UInt16(bytes[2 * $0]) << 8 | UInt16(bytes[2 * $0 + 1]) }
        var best = (start: -1, length: 0), run = (start: -1, length: 0)
        for (index, word) in words.enumerated() {
            if word == 0 {
                run = run.start < 0 ? (index, 1) : (run.start, run.length + 1)
                if run.length > best.length { best = run }
            } else {
                run = (-1, 0)
            }
        }
        if best.length < 2 { return words.map { String($0, radix: 16) }.joined(separator: ":") }
        let left = words[..<best.start].map { String($0, radix: 16) }.joined(separator: ":")
        let right = words[(best.start + best.length)...].map { String($0, radix: 16) }.joined(separator: ":")
        return left + "::" + right
    }

    /// The key every per-IP limit counts under (connections, REST, polling and upload
    /// rates, upload budgets): an IPv4 address itself; an IPv6 address's /64, since one host
    /// usually holds a whole /64 and could otherwise take a fresh address per request.
    public var limitKey: String {
        guard !isIPv4 else { return description }
        let prefix = Array(bytes[0..<8]) + Array(repeating: 0, count: 8)
        return (IPAddress(bytes: prefix)?.description ?? description) + "/64"
    }

    /// ``limitKey`` of `text` when it is an address; `text` itself otherwise (a peer name
    /// libuv could not give as an address is still counted, under that name).
    public static func limitKey(_ text: String) -> String {
        IPAddress(parsing: text)?.limitKey ?? text
    }
}

/// An address range: `10.0.0.0/8`, `2001:db8::/32`, or one address (`192.0.2.7`, `::1`).
public struct IPNetwork: Hashable, Sendable, CustomStringConvertible {
    public let address: IPAddress
    public let prefixLength: Int

    public init?(parsing text: some StringProtocol) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parsing: parts[0]) else { return nil }
        // `::ffff:10.0.0.0/104` names an IPv4 range: its prefix counts the 96 mapping bits.
        let mapped = address.isIPv4 && parts[0].contains(":") ? 96 : 0
        let bits = address.bytes.count * 8
        var length = bits
        if parts.count == 2 {
            guard parts[1].count <= 3, let given = Int(parts[1]), (mapped...(bits + mapped)).contains(given) else { return nil }
            length = given - mapped
        }
        self.address = address
        prefixLength = length
    }

    public func contains(_ candidate: IPAddress) -> Bool {
        guard candidate.bytes.count == address.bytes.count else { return false }
        var remaining = prefixLength
        for index in 0..<address.bytes.count where remaining > 0 {
            let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
            if candidate.bytes[index] & mask != address.bytes[index] & mask { return false }
            remaining -= 8
        }
        return true
    }

    public var description: String { "\(address)/\(prefixLength)" }
}
