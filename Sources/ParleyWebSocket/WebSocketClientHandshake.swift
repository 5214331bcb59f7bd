/// The head of a server's answer to a WebSocket upgrade request: the status line's code and
/// reason, and the header fields in order, names as sent.
public struct WebSocketResponseHead: Sendable, Equatable {
    /// The three-digit status code (101 for a successful upgrade).
    public let status: Int
    /// The reason phrase, possibly empty.
    public let reason: String
    /// Header fields in the order received; repeated names are kept.
    public let headers: [(name: String, value: String)]

    /// Creates a head from parts (the handshake builds it while parsing).
    public init(status: Int, reason: String, headers: [(name: String, value: String)]) {
        self.status = status
        self.reason = reason
        self.headers = headers
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.status == b.status && a.reason == b.reason && a.headers.elementsEqual(b.headers) { $0 == $1 }
    }

    /// Case-insensitive lookup; repeated fields are joined with ", " (RFC 9110 §5.3).
    public func header(_ name: String) -> String? {
        var joined: String?
        for field in headers where asciiCaseInsensitiveEquals(field.name, name) {
            joined = joined.map { $0 + ", " + field.value } ?? field.value
        }
        return joined
    }
}

/// The client side of the RFC 6455 §4.1 opening handshake as a state machine: it makes the
/// upgrade request, then is fed the server's response in any chunking and answers with
/// ``Event/needMoreData``, ``Event/upgraded(deflate:leftover:)`` or ``Event/failed(_:)``.
///
/// It owns no socket. The response head is parsed strictly and within ``Limits``: lines end
/// in CRLF, the status line is `HTTP/1.x NNN reason`, header names are tokens, no obsolete
/// line folding, no whitespace before a colon, values are UTF-8 text without control
/// characters. The head is then validated with
/// ``WebSocketHandshake/validateServerResponse(status:header:key:offeredDeflate:)`` (101,
/// `Upgrade`, `Connection`, `Sec-WebSocket-Accept`, extensions). Bytes after the head are
/// WebSocket frames and come back as `leftover`. The outcome is the same however the
/// response was split; after `.failed` or `.upgraded` the machine keeps answering the same.
public struct WebSocketClientHandshake: Sendable {
    /// Bounds on what the machine buffers and accepts.
    public struct Limits: Sendable, Equatable {
        /// Largest response head, status line and blank line included. A real 101 is a few
        /// hundred bytes.
        public var maxHeadBytes: Int
        /// Most header fields in the head.
        public var maxHeaderCount: Int

        /// Limits with Parley's defaults (8 KiB, 100 fields).
        public init(maxHeadBytes: Int = 8 * 1024, maxHeaderCount: Int = 100) {
            self.maxHeadBytes = maxHeadBytes
            self.maxHeaderCount = maxHeaderCount
        }
    }

    /// What the bytes fed so far amount to.
    public enum Event: Sendable, Equatable {
        /// The head is not complete yet.
        case needMoreData
        /// The server accepted the upgrade: the negotiated permessage-deflate parameters (nil
        /// when not negotiated) and the bytes that followed the head (frames).
        case upgraded(deflate: PerMessageDeflateParameters?, leftover: [UInt8])
        /// The response is malformed, over a limit or refuses the upgrade; close the
        /// connection. `status` is the status received (0 when no valid status line came).
        case failed(WebSocketHandshakeError)
    }

    private enum State: Sendable {
        case statusLine
        case headers
        case upgraded(PerMessageDeflateParameters?)
        case failed(WebSocketHandshakeError)
    }

    /// The `Host` header value (`host[:port]`).
    public let host: String
    /// The request target: path plus query.
    public let target: String
    /// This handshake's `Sec-WebSocket-Key`.
    public let key: String
    /// Whether the request offers permessage-deflate.
    public let offersDeflate: Bool
    /// Extra request header fields (`Origin`, `Authorization`, ...).
    public let extraHeaders: [(name: String, value: String)]
    /// The limits in force.
    public let limits: Limits
    /// The response head, once it is complete (also when it refuses the upgrade).
    public private(set) var response: WebSocketResponseHead?

    private var state = State.statusLine
    /// The current, incomplete line (bounded by `limits.maxHeadBytes`).
    private var line: [UInt8] = []
    private var headBytes = 0
    private var status = 0
    private var reason = ""
    private var fields: [(name: String, value: String)] = []

    /// A handshake for `target` on `host`; `key` defaults to a fresh random key.
    public init(host: String, target: String, key: String = WebSocketHandshake.makeClientKey(),
                offersDeflate: Bool, extraHeaders: [(name: String, value: String)] = [], limits: Limits = Limits()) {
        self.host = host
        self.target = target
        self.key = key
        self.offersDeflate = offersDeflate
        self.extraHeaders = extraHeaders
        self.limits = limits
    }

    /// The whole upgrade request to write (request line, headers, blank line).
    public var request: [UInt8] {
        WebSocketHandshake.clientRequest(host: host, path: target, key: key, offerDeflate: offersDeflate,
                                         extraHeaders: extraHeaders.map { ($0.name, $0.value) })
    }

    /// Feeds response bytes (only read during the call).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Event {
        switch state {
        case .upgraded(let deflate): return .upgraded(deflate: deflate, leftover: Array(bytes))
        case .failed(let error): return .failed(error)
        case .statusLine, .headers: break
        }
        // Byte by byte: a head is a few hundred bytes once per connection, and one byte at a
        // time makes every verdict independent of how the response was split.
        for index in bytes.indices {
            let byte = bytes[index]
            headBytes += 1
            if headBytes > limits.maxHeadBytes {
                return fail("response head larger than \(limits.maxHeadBytes) bytes")
            }
            guard byte == lineFeed else {
                line.append(byte)
                continue
            }
            guard line.last == carriageReturn else { return fail("response lines must end with CRLF") }
            line.removeLast()
            let complete = line
            line.removeAll(keepingCapacity: true)
            if let event = lineCompleted(complete, leftover: UnsafeRawBufferPointer(rebasing: bytes[(index + 1)...])) {
                return event
            }
        }
        return .needMoreData
    }

    /// Feeds response bytes.
    public mutating func feed(_ bytes: [UInt8]) -> Event {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// Handles one line without its CRLF; returns the final event when the head is done.
    private mutating func lineCompleted(_ line: [UInt8], leftover: UnsafeRawBufferPointer) -> Event? {
        if case .statusLine = state {
            guard let (status, reason) = Self.parseStatusLine(line) else {
                return fail("bad status line: \(String(decoding: line.prefix(80), as: UTF8.self).debugDescription)")
            }
            self.status = status
            self.reason = reason
            state = .headers
            return nil
        }
        if line.isEmpty { return headCompleted(leftover: leftover) }
        guard fields.count < limits.maxHeaderCount else { return fail("more than \(limits.maxHeaderCount) header fields") }
        switch Self.parseField(line) {
        case .success(let field): fields.append(field)
        case .failure(let why): return fail(why.message)
        }
        return nil
    }

    private mutating func headCompleted(leftover: UnsafeRawBufferPointer) -> Event {
        let head = WebSocketResponseHead(status: status, reason: reason, headers: fields)
        response = head
        fields = []
        do {
            let deflate = try WebSocketHandshake.validateServerResponse(status: head.status, header: head.header, key: key,
                                                                        offeredDeflate: offersDeflate)
            state = .upgraded(deflate)
            return .upgraded(deflate: deflate, leftover: Array(leftover))
        } catch {
            // Extension errors come without the status; every failure here saw one.
            let failure = WebSocketHandshakeError(status: head.status, message: error.message)
            state = .failed(failure)
            return .failed(failure)
        }
    }

    private mutating func fail(_ message: String) -> Event {
        let error = WebSocketHandshakeError(status: status, message: "bad upgrade response: \(message)")
        state = .failed(error)
        line = []
        fields = []
        return .failed(error)
    }

    /// `HTTP/1.1 101 Switching Protocols`: version, SP, three digits, then SP and a reason
    /// (the reason may be missing altogether).
    static func parseStatusLine(_ line: [UInt8]) -> (status: Int, reason: String)? {
        let version = Array("HTTP/1.".utf8)
        guard line.count >= 12, line.starts(with: version),
              line[7] == UInt8(ascii: "1") || line[7] == UInt8(ascii: "0"), line[8] == space else { return nil }
        var status = 0
        for byte in line[9..<12] {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            status = status * 10 + Int(byte - UInt8(ascii: "0"))
        }
        guard line.count == 12 || line[12] == space else { return nil }
        let reasonBytes = line.dropFirst(13)
        guard reasonBytes.allSatisfy(isFieldValueByte), let reason = String(validating: reasonBytes, as: UTF8.self) else {
            return nil
        }
        return (status, reason)
    }

    /// `name: value` with a token name, no whitespace before the colon, optional whitespace
    /// around the value, and a value of UTF-8 text without control characters.
    static func parseField(_ line: [UInt8]) -> Result<(name: String, value: String), MalformedHead> {
        func invalid(_ why: String) -> Result<(name: String, value: String), MalformedHead> {
            .failure(MalformedHead(message: why))
        }
        if line[0] == space || line[0] == tab { return invalid("obsolete line folding") }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return invalid("header line without a colon") }
        let nameBytes = line[..<colon]
        guard !nameBytes.isEmpty, nameBytes.allSatisfy(isHTTPTokenByte) else { return invalid("bad header name") }
        var start = colon + 1, end = line.count
        while start < end && (line[start] == space || line[start] == tab) { start += 1 }
        while end > start && (line[end - 1] == space || line[end - 1] == tab) { end -= 1 }
        let valueBytes = line[start..<end]
        guard valueBytes.allSatisfy(isFieldValueByte), let value = String(validating: valueBytes, as: UTF8.self) else {
            return invalid("bad header value")
        }
        return .success((String(decoding: nameBytes, as: UTF8.self), value))
    }
}

/// Why a header line was refused (wrapped into a ``WebSocketHandshakeError`` by the machine).
struct MalformedHead: Error {
    let message: String
}

private let carriageReturn: UInt8 = 0x0D
private let lineFeed: UInt8 = 0x0A
private let space: UInt8 = 0x20
private let tab: UInt8 = 0x09

/// RFC 9110 field-value bytes: visible ASCII, space, tab, and non-ASCII (checked as UTF-8
/// afterwards); never CR, LF, NUL or another control character.
private func isFieldValueByte(_ byte: UInt8) -> Bool {
    byte == tab || (byte >= 0x20 && byte != 0x7F)
}

/// RFC 9110 `tchar`: the bytes of a token (header names, extension names and parameters).
func isHTTPTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
         UInt8(ascii: "0")...UInt8(ascii: "9"):
        return true
    default:
        return "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
}

/// ASCII case-insensitive equality, for header names.
func asciiCaseInsensitiveEquals(_ a: String, _ b: String) -> Bool {
    a.utf8.elementsEqual(b.utf8) { x, y in
        (x >= 0x41 && x <= 0x5A ? x | 0x20 : x) == (y >= 0x41 && y <= 0x5A ? y | 0x20 : y)
    }
}
