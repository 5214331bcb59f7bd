/// One part's headers, as the client sent them.
public struct MultipartPart: Sendable, Hashable {
    /// The form field name (`Content-Disposition: form-data; name="…"`).
    public var name: String?
    /// The client's file name (`filename*=` wins over `filename=`), exactly as sent: it may
    /// contain path separators or be empty; sanitize before using it.
    public var filename: String?
    /// The part's `Content-Type`, if any (a claim: the bytes decide).
    public var contentType: String?
    /// Every header in order (names as sent).
    public var headers: [MultipartHeader]

    public init(name: String? = nil, filename: String? = nil, contentType: String? = nil, headers: [MultipartHeader] = []) {
        self.name = name
        self.filename = filename
        self.contentType = contentType
        self.headers = headers
    }

    /// Whether the part is a file (it has a file name) rather than a plain form field.
    public var isFile: Bool { filename != nil }
}

/// A header line of a part.
public struct MultipartHeader: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A header value with `;`-separated parameters, e.g. `form-data; name="a"`.
struct ParameterizedValue: Sendable {
    var value: String
    var parameters: [(name: String, value: String)]

    /// The parameter named `name` (case-insensitively); the first one wins.
    func parameter(_ name: String) -> String? {
        let lower = name.lowercased()
        return parameters.first { $0.name.lowercased() == lower }?.value
    }
}

enum MultipartHeaders {
    /// Parses a part's header block (CRLF-separated lines, without the blank line).
    static func parsePart(_ block: ArraySlice<UInt8>) -> Result<MultipartPart, MultipartError> {
        var part = MultipartPart()
        guard !block.isEmpty else { return .success(part) }
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = block.startIndex
        var i = block.startIndex
        while i < block.endIndex {
            if block[i] == 13 {
                guard i + 1 < block.endIndex, block[i + 1] == 10 else {
                    return .failure(MultipartError(.malformed, "a bare CR in a part header"))
                }
                lines.append(block[lineStart..<i])
                i += 2
                lineStart = i
                continue
            }
            if block[i] == 10 || block[i] == 0 {
                return .failure(MultipartError(.malformed, "a bare LF or NUL in a part header"))
            }
            i += 1
        }
        lines.append(block[lineStart..<block.endIndex])
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else {
                return .failure(MultipartError(.malformed, "a part header line without a name"))
            }
            let nameBytes = line[line.startIndex..<colon]
            guard nameBytes.allSatisfy(isTokenByte) else {
                // Also refuses obsolete line folding (a line starting with a space).
                return .failure(MultipartError(.malformed, "an invalid part header name"))
            }
            let name = String(decoding: nameBytes, as: UTF8.self)
            let value = String(decoding: trimmed(line[(colon + 1)...]), as: UTF8.self)
            part.headers.append(MultipartHeader(name: name, value: value))
            switch name.lowercased() {
            case "content-disposition":
                guard part.name == nil && part.filename == nil, let disposition = parseParameterized(value) else {
                    return .failure(MultipartError(.malformed, "an invalid or repeated Content-Disposition"))
                }
                part.name = disposition.parameter("name")
                if let extended = disposition.parameter("filename*"), let decoded = decodeExtendedValue(extended) {
                    part.filename = decoded
                } else {
                    part.filename = disposition.parameter("filename")
                }
            case "content-type":
                guard part.contentType == nil else {
                    return .failure(MultipartError(.malformed, "a repeated Content-Type"))
                }
                part.contentType = value
            default:
                break
            }
        }
        return .success(part)
    }

    /// Parses `value; name=token; name="quoted \" string"`; nil when malformed.
    static func parseParameterized(_ text: String) -> ParameterizedValue? {
        let bytes = Array(text.utf8)
        var i = 0
        func skipSpace() { while i < bytes.count && (bytes[i] == 32 || bytes[i] == 9) { i += 1 } }
        skipSpace()
        let valueStart = i
        while i < bytes.count && bytes[i] != UInt8(ascii: ";") { i += 1 }
        let value = String(decoding: trimmed(bytes[valueStart..<i]), as: UTF8.self)
        guard !value.isEmpty else { return nil }
        var parameters: [(name: String, value: String)] = []
        while i < bytes.count {
            i += 1  // the ';'
            skipSpace()
            if i == bytes.count { break }  // a trailing ';'
            let nameStart = i
            while i < bytes.count && isTokenByte(bytes[i]) { i += 1 }
            guard i > nameStart else { return nil }
            let name = String(decoding: bytes[nameStart..<i], as: UTF8.self)
            skipSpace()
            guard i < bytes.count && bytes[i] == UInt8(ascii: "=") else { return nil }
            i += 1
            skipSpace()
            var parameterValue: [UInt8] = []
            if i < bytes.count && bytes[i] == UInt8(ascii: "\"") {
                i += 1
                var closed = false
                while i < bytes.count {
                    let byte = bytes[i]
                    if byte == UInt8(ascii: "\\") && i + 1 < bytes.count {
                        parameterValue.append(bytes[i + 1])
                        i += 2
                    } else if byte == UInt8(ascii: "\"") {
                        closed = true
                        i += 1
                        break
                    } else {
                        parameterValue.append(byte)
                        i += 1
                    }
                }
                guard closed else { return nil }
            } else {
                // Tokens, leniently: anything up to the next ';' (browsers send raw UTF-8).
                let start = i
                while i < bytes.count && bytes[i] != UInt8(ascii: ";") { i += 1 }
                parameterValue = Array(trimmed(bytes[start..<i]))
                guard !parameterValue.isEmpty else { return nil }
            }
            skipSpace()
            guard i == bytes.count || bytes[i] == UInt8(ascii: ";") else { return nil }
            parameters.append((name, String(decoding: parameterValue, as: UTF8.self)))
        }
        return ParameterizedValue(value: value, parameters: parameters)
    }

    /// RFC 8187 `charset'language'percent-encoded`; only UTF-8 (and its ASCII subset).
    static func decodeExtendedValue(_ text: String) -> String? {
        let pieces = text.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard pieces.count == 3 else { return nil }
        let charset = pieces[0].lowercased()
        guard charset == "utf-8" || charset == "us-ascii" else { return nil }
        var out: [UInt8] = []
        let bytes = Array(pieces[2].utf8)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) else {
                    return nil
                }
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        let decoded = String(decoding: out, as: UTF8.self)
        return decoded.utf8.elementsEqual(out) ? decoded : nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 32 || first == 9 { slice.removeFirst() }
        while let last = slice.last, last == 32 || last == 9 { slice.removeLast() }
        return slice
    }
}
