/// What the parser found in the bytes fed so far; the caller acts on these in order.
public enum HTTPParserEvent: Sendable, Equatable {
    /// A complete request head.
    case head(HTTPRequestHead)
    /// Some body bytes (from a Content-Length body or decoded chunks). One body may arrive
    /// as any number of these, depending on how the bytes were split on the wire.
    case body([UInt8])
    /// The request is complete; emitted right after `.head` when there is no body.
    case end
    /// After the `.head` of a GET upgrade request: the parser stops parsing HTTP and hands
    /// back the bytes that followed the head. Later feeds hand their bytes back the same way.
    case upgrade(leftover: [UInt8])
    /// The request is malformed or over a limit. The parser is dead afterwards: the caller
    /// writes `error.response` and closes the connection.
    case error(HTTPParseError)
}

/// A strict, incremental HTTP/1.1 request parser (RFC 9112) for the server side.
///
/// It owns no socket: feed it bytes as they arrive and act on the returned events. It is an
/// explicit state machine, so a request split at any byte boundary yields the same events,
/// and it never buffers more than one incomplete line, which the limits cap. Body bytes
/// stream through without being buffered. Pipelined requests come out in order.
///
/// Rejected (never "repaired"): obs-fold, whitespace before a colon, bare LF line endings,
/// Content-Length that is not all digits or that conflicts with another, Transfer-Encoding
/// together with Content-Length (request smuggling), any Transfer-Encoding other than
/// `chunked`, HTTP/1.1 without exactly one Host.
///
/// A Content-Length over `maxBodyBytes` is reported (413) as soon as the head is complete,
/// without a `.head` event; an over-limit chunked body fails at the chunk that crosses it.
/// Only a GET upgrade request stops the parser; other requests carrying `Upgrade` are
/// parsed as plain requests (`head.isUpgrade` still tells), and the caller answers normally.
public struct HTTPRequestParser: Sendable {
    private enum State: Sendable, Equatable {
        case requestLine
        case headers
        case body(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataCRLF
        case trailers
        case upgraded
        case dead
    }

    /// How the body of a parsed head is framed.
    private enum Framing {
        case none
        case length(Int)
        case chunked
        case upgrade
    }

    /// The limits this parser enforces.
    public let limits: HTTPParserLimits
    /// The body limit of one request when it is not `limits.maxBodyBytes` (file uploads
    /// have their own): asked once per request, when its head is complete; nil keeps the
    /// default.
    public var bodyLimit: (@Sendable (HTTPRequestHead) -> Int?)?
    /// The body limit of the request being parsed.
    private var currentBodyLimit: Int
    private var state: State = .requestLine
    /// Unconsumed bytes from earlier feeds: at most one incomplete line (bounded by limits).
    private var pending: [UInt8] = []
    /// How many leading bytes of `pending` are known to hold no LF, so a client trickling a
    /// long line one byte at a time costs O(n), not O(n²), to scan.
    private var pendingScanned = 0

    // The request being parsed.
    private var head = HTTPRequestHead(method: "", target: "", path: "", versionMinor: 1)
    /// The head of a request refused as too large before its `.head` event (a Content-Length
    /// over the limit), so the caller can tell what it was for (e.g. which session to end).
    public private(set) var rejectedHead: HTTPRequestHead?
    private var headerBytes = 0
    private var headerCount = 0
    private var bodyBytes = 0
    private var emptyLineBytes = 0

    /// A parser at the start of a connection.
    public init(limits: HTTPParserLimits = .init(), bodyLimit: (@Sendable (HTTPRequestHead) -> Int?)? = nil) {
        self.limits = limits
        self.bodyLimit = bodyLimit
        currentBodyLimit = limits.maxBodyBytes
    }

    /// Whether the parser is between requests with nothing partial buffered. The server
    /// uses it to tell a keep-alive idle connection from a client trickling a request.
    public var isIdle: Bool {
        state == .requestLine && pending.isEmpty
    }

    /// Whether the parser has stopped for good (after `.error`).
    public var isDead: Bool { state == .dead }

    /// How many bytes are buffered waiting for the rest of a line (for tests and metrics).
    var bufferedByteCount: Int { pending.count }

    /// Parses `bytes` and returns the events they complete, in order.
    public mutating func feed(_ bytes: [UInt8]) -> [HTTPParserEvent] {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// Parses `bytes` (only read during the call) and returns the events they complete.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [HTTPParserEvent] {
        switch state {
        case .dead:
            return []
        case .upgraded:
            return bytes.isEmpty ? [] : [.upgrade(leftover: Array(bytes))]
        default:
            break
        }
        var events: [HTTPParserEvent] = []
        if pending.isEmpty {
            bytes.withMemoryRebound(to: UInt8.self) { input in
                let consumed = run(input, &events)
                if consumed < input.count { pending.append(contentsOf: input[consumed...]) }
            }
        } else {
            // Move the buffer out so `run` can mutate `self` while we read it.
            var buffer: [UInt8] = []
            swap(&buffer, &pending)
            buffer.append(contentsOf: bytes)
            let consumed = buffer.withUnsafeBufferPointer { run($0, &events) }
            if consumed < buffer.count {
                buffer.removeFirst(consumed)
                pending = buffer
            }
        }
        return events
    }

    // MARK: - State machine

    /// Consumes as much of `buf` as forms complete units; returns how many bytes it used.
    private mutating func run(_ buf: UnsafeBufferPointer<UInt8>, _ events: inout [HTTPParserEvent]) -> Int {
        var i = 0
        var skip = pendingScanned
        pendingScanned = 0
        /// The next LF at or after `i`, skipping what an earlier feed already scanned.
        func nextLF() -> Int? {
            defer { skip = 0 }
            return findLF(buf, from: i + skip)
        }
        func fail(_ error: HTTPParseError) -> Int {
            events.append(.error(error))
            state = .dead
            return buf.count
        }
        while true {
            switch state {
            case .requestLine:
                guard let lf = nextLF() else {
                    if buf.count - i > limits.maxRequestLineBytes + 1 { return fail(Self.requestLineTooLong) }
                    pendingScanned = buf.count - i
                    return i
                }
                // Length first, so the verdict cannot depend on where the bytes were split.
                if lf - i > limits.maxRequestLineBytes + 1 { return fail(Self.requestLineTooLong) }
                guard lf > i, buf[lf - 1] == CR else { return fail(Self.bareLF) }
                if lf == i + 1 {
                    // RFC 9112 §2.2: ignore empty lines before a request line, a few of them.
                    emptyLineBytes += 2
                    if emptyLineBytes > limits.maxLeadingEmptyLineBytes { return fail(Self.tooManyEmptyLines) }
                    i = lf + 1
                    continue
                }
                do throws(HTTPParseError) {
                    head = try parseRequestLine(UnsafeBufferPointer(rebasing: buf[i..<(lf - 1)]))
                } catch {
                    return fail(error)
                }
                headerBytes = 0
                headerCount = 0
                bodyBytes = 0
                emptyLineBytes = 0
                state = .headers
                i = lf + 1

            case .headers, .trailers:
                guard let lf = nextLF() else {
                    if headerBytes + (buf.count - i) > limits.maxHeaderBytes { return fail(Self.headersTooLarge) }
                    pendingScanned = buf.count - i
                    return i
                }
                headerBytes += lf + 1 - i
                if headerBytes > limits.maxHeaderBytes { return fail(Self.headersTooLarge) }
                guard lf > i, buf[lf - 1] == CR else { return fail(Self.bareLF) }
                let line = UnsafeBufferPointer(rebasing: buf[i..<(lf - 1)])
                i = lf + 1
                if line.isEmpty {
                    if state == .trailers {
                        events.append(.end)
                        state = .requestLine
                        continue
                    }
                    currentBodyLimit = bodyLimit?(head) ?? limits.maxBodyBytes
                    let framing: Framing
                    do throws(HTTPParseError) { framing = try validateHead() } catch {
                        if error.status == 413 { rejectedHead = head }
                        return fail(error)
                    }
                    events.append(.head(head))
                    switch framing {
                    case .none, .length(0):
                        events.append(.end)
                        state = .requestLine
                    case .length(let n):
                        state = .body(remaining: n)
                    case .chunked:
                        state = .chunkSize
                    case .upgrade:
                        state = .upgraded
                        events.append(.upgrade(leftover: Array(buf[i...])))
                        return buf.count
                    }
                    continue
                }
                headerCount += 1
                if headerCount > limits.maxHeaderCount { return fail(Self.tooManyHeaders) }
                do throws(HTTPParseError) {
                    let (name, value) = try parseFieldLine(line)
                    if state == .headers { head.headers.add(name, value) }
                } catch {
                    return fail(error)
                }

            case .body(let remaining):
                guard i < buf.count else { return i }
                let n = min(remaining, buf.count - i)
                events.append(.body(Array(buf[i..<(i + n)])))
                i += n
                if n == remaining {
                    events.append(.end)
                    state = .requestLine
                } else {
                    state = .body(remaining: remaining - n)
                }

            case .chunkSize:
                guard let lf = nextLF() else {
                    if buf.count - i > limits.maxChunkLineBytes + 1 { return fail(Self.chunkLineTooLong) }
                    pendingScanned = buf.count - i
                    return i
                }
                if lf - i > limits.maxChunkLineBytes + 1 { return fail(Self.chunkLineTooLong) }
                guard lf > i, buf[lf - 1] == CR else { return fail(Self.bareLF) }
                let size: Int
                do throws(HTTPParseError) {
                    size = try parseChunkSizeLine(UnsafeBufferPointer(rebasing: buf[i..<(lf - 1)]))
                } catch {
                    return fail(error)
                }
                i = lf + 1
                if size == 0 {
                    state = .trailers
                } else {
                    bodyBytes += size
                    state = .chunkData(remaining: size)
                }

            case .chunkData(let remaining):
                guard i < buf.count else { return i }
                let n = min(remaining, buf.count - i)
                events.append(.body(Array(buf[i..<(i + n)])))
                i += n
                state = n == remaining ? .chunkDataCRLF : .chunkData(remaining: remaining - n)

            case .chunkDataCRLF:
                guard i < buf.count else { return i }
                guard buf[i] == CR else { return fail(Self.chunkMissingCRLF) }
                guard i + 1 < buf.count else { return i }
                guard buf[i + 1] == LF else { return fail(Self.chunkMissingCRLF) }
                i += 2
                state = .chunkSize

            case .upgraded, .dead:
                return buf.count
            }
        }
    }

    // MARK: - Lines

    private func parseRequestLine(_ line: UnsafeBufferPointer<UInt8>) throws(HTTPParseError) -> HTTPRequestHead {
        guard let sp1 = line.firstIndex(of: SP),
              let sp2 = line[(sp1 + 1)...].firstIndex(of: SP) else {
            throw HTTPParseError(400, "malformed request line")
        }
        let versionMinor = try parseVersion(line[(sp2 + 1)...])
        let methodBytes = line[..<sp1]
        guard !methodBytes.isEmpty, methodBytes.allSatisfy(isTokenChar) else {
            throw HTTPParseError(400, "invalid method")
        }
        let targetBytes = line[(sp1 + 1)..<sp2]
        // Visible ASCII only: spaces, controls and raw non-ASCII must be percent-encoded;
        // a fragment is never sent by a conforming client.
        guard !targetBytes.isEmpty,
              targetBytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "#") }) else {
            throw HTTPParseError(400, "invalid request-target")
        }
        let method = String(decoding: methodBytes, as: UTF8.self)
        if method == "CONNECT" { throw HTTPParseError(501, "CONNECT is not supported") }
        let (path, rawQuery) = try splitRequestTarget(targetBytes, method: method)
        return HTTPRequestHead(method: method, target: String(decoding: targetBytes, as: UTF8.self),
                               path: path, rawQuery: rawQuery, versionMinor: versionMinor)
    }

    private func parseVersion(_ v: Slice<UnsafeBufferPointer<UInt8>>) throws(HTTPParseError) -> Int {
        let b = Array(v)
        guard b.count == 8, b[0..<5].elementsEqual("HTTP/".utf8), b[6] == UInt8(ascii: "."),
              isDigit(b[5]), isDigit(b[7]) else {
            throw HTTPParseError(400, "malformed HTTP version")
        }
        guard b[5] == UInt8(ascii: "1"), b[7] == UInt8(ascii: "0") || b[7] == UInt8(ascii: "1") else {
            throw HTTPParseError(505, "only HTTP/1.0 and HTTP/1.1 are supported")
        }
        return Int(b[7] - UInt8(ascii: "0"))
    }

    private func parseFieldLine(_ line: UnsafeBufferPointer<UInt8>) throws(HTTPParseError) -> (String, String) {
        if line[0] == SP || line[0] == HT { throw HTTPParseError(400, "obsolete line folding is not allowed") }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
            throw HTTPParseError(400, "header line without a colon")
        }
        guard colon > 0 else { throw HTTPParseError(400, "empty header name") }
        if line[colon - 1] == SP || line[colon - 1] == HT {
            throw HTTPParseError(400, "whitespace before the colon in a header line")
        }
        let nameBytes = line[..<colon]
        guard nameBytes.allSatisfy(isTokenChar) else { throw HTTPParseError(400, "invalid header name") }
        var start = colon + 1, end = line.count
        while start < end && (line[start] == SP || line[start] == HT) { start += 1 }
        while end > start && (line[end - 1] == SP || line[end - 1] == HT) { end -= 1 }
        let valueBytes = line[start..<end]
        // Field values: VCHAR, SP, HTAB and obs-text; CR, LF, NUL and other controls are smuggling tools.
        guard valueBytes.allSatisfy({ $0 == HT || ($0 >= 0x20 && $0 != 0x7F) }) else {
            throw HTTPParseError(400, "invalid character in a header value")
        }
        return (String(decoding: nameBytes, as: UTF8.self), String(decoding: valueBytes, as: UTF8.self))
    }

    private func parseChunkSizeLine(_ line: UnsafeBufferPointer<UInt8>) throws(HTTPParseError) -> Int {
        var size = 0, i = 0, overLimit = false
        while i < line.count, let digit = hexValue(line[i]) {
            if !overLimit {
                size = size * 16 + Int(digit)
                if size > currentBodyLimit { overLimit = true }
            }
            i += 1
        }
        guard i > 0 else { throw HTTPParseError(400, "invalid chunk size") }
        if i < line.count {
            // chunk-ext: BWS ";" ... — validated loosely (visible chars), then ignored.
            var j = i
            while j < line.count && (line[j] == SP || line[j] == HT) { j += 1 }
            guard j < line.count, line[j] == UInt8(ascii: ";"),
                  line[j...].allSatisfy({ $0 == HT || ($0 >= 0x20 && $0 != 0x7F) }) else {
                throw HTTPParseError(400, "invalid chunk size")
            }
        }
        if overLimit || bodyBytes + size > currentBodyLimit { throw Self.bodyTooLarge }
        return size
    }

    /// Checks the framing rules once the whole head is in; decides how the body is framed.
    private func validateHead() throws(HTTPParseError) -> Framing {
        let headers = head.headers
        let hostCount = headers.count("Host")
        if head.versionMinor == 1 && hostCount == 0 { throw HTTPParseError(400, "missing Host header") }
        if hostCount > 1 { throw HTTPParseError(400, "more than one Host header") }

        let contentLengths = headers.values("Content-Length")
        let transferEncodings = headers.values("Transfer-Encoding")
        if !transferEncodings.isEmpty {
            if !contentLengths.isEmpty {
                throw HTTPParseError(400, "both Transfer-Encoding and Content-Length")
            }
            if head.versionMinor == 0 {
                throw HTTPParseError(400, "Transfer-Encoding in an HTTP/1.0 request")
            }
            let codings = transferEncodings.flatMap { $0.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) }
            guard codings.count == 1, httpTokenEquals(trimOWS(codings[0]), "chunked") else {
                throw HTTPParseError(501, "unsupported Transfer-Encoding (only chunked)")
            }
            if head.isUpgrade && head.method == "GET" { throw HTTPParseError(400, "upgrade request with a body") }
            return .chunked
        }
        var length: Int?
        for value in contentLengths {
            guard !value.isEmpty, value.utf8.allSatisfy(isDigit) else {
                throw HTTPParseError(400, "invalid Content-Length")
            }
            if let first = contentLengths.first, first != value {
                throw HTTPParseError(400, "conflicting Content-Length values")
            }
            length = Int(value) ?? Int.max
        }
        if let length, length > currentBodyLimit { throw Self.bodyTooLarge }
        if head.isUpgrade && head.method == "GET" {
            guard (length ?? 0) == 0 else { throw HTTPParseError(400, "upgrade request with a body") }
            return .upgrade
        }
        return length.map { .length($0) } ?? .none
    }

    // MARK: - Shared errors (one value per condition, whatever the byte split)

    private static let requestLineTooLong = HTTPParseError(414, "request line too long")
    private static let headersTooLarge = HTTPParseError(431, "header section too large")
    private static let tooManyHeaders = HTTPParseError(431, "too many header fields")
    private static let bodyTooLarge = HTTPParseError(413, "request body too large")
    private static let bareLF = HTTPParseError(400, "lines must end with CRLF")
    private static let chunkLineTooLong = HTTPParseError(400, "chunk size line too long")
    private static let chunkMissingCRLF = HTTPParseError(400, "chunk data not followed by CRLF")
    private static let tooManyEmptyLines = HTTPParseError(400, "too many empty lines before the request line")
}

// MARK: - Byte classes

let CR: UInt8 = 0x0D
let LF: UInt8 = 0x0A
let SP: UInt8 = 0x20
let HT: UInt8 = 0x09

@inline(__always)
func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

/// RFC 9110 tchar: the characters allowed in methods, header names and tokens.
@inline(__always)
func isTokenChar(_ c: UInt8) -> Bool {
    switch c {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
         UInt8(ascii: "0")...UInt8(ascii: "9"):
        return true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
         UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
         UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
        return true
    default:
        return false
    }
}

@inline(__always)
private func findLF(_ buf: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
    var i = start
    while i < buf.count {
        if buf[i] == LF { return i }
        i += 1
    }
    return nil
}
