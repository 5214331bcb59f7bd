/// Why a request was rejected: the HTTP status to answer with and a message for a person.
///
/// The status is the stable code (400, 413, 414, 431, 501, 505); the message is for logs and
/// the response body, and may change wording between versions.
public struct HTTPParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The status code the server should answer with before closing the connection.
    public var status: Int
    /// A short human-readable reason.
    public var message: String

    /// An error with `status` and `message`.
    public init(status: Int, message: String) {
        self.status = status
        self.message = message
    }

    init(_ status: Int, _ message: String) {
        self.init(status: status, message: message)
    }

    /// `status reason: message`, for logs.
    public var description: String { "\(status) \(httpReasonPhrase(status)): \(message)" }

    /// The plain-text response to send for this error; the connection must be closed after it.
    public var response: HTTPResponse { .text(status, message + "\n") }
}

/// Size limits applied while parsing; every one is a hard cap on what the parser buffers.
public struct HTTPParserLimits: Sendable, Equatable {
    /// Longest request line (method, target, version; without CRLF). Exceeding it → 414.
    public var maxRequestLineBytes: Int
    /// Largest header section (all field lines with their CRLFs, trailers included) → 431.
    public var maxHeaderBytes: Int
    /// Most header fields (trailers included) → 431.
    public var maxHeaderCount: Int
    /// Largest body, by Content-Length or the sum of chunk sizes → 413.
    public var maxBodyBytes: Int
    /// Longest chunk-size line, extensions included (without CRLF) → 400.
    public var maxChunkLineBytes: Int
    /// Most bytes of empty lines tolerated before a request line (RFC 9112 §2.2) → 400.
    public var maxLeadingEmptyLineBytes: Int

    /// Limits with Parley's defaults.
    public init(maxRequestLineBytes: Int = 8192, maxHeaderBytes: Int = 65536, maxHeaderCount: Int = 100,
                maxBodyBytes: Int = 1 << 20, maxChunkLineBytes: Int = 1024, maxLeadingEmptyLineBytes: Int = 64) {
        self.maxRequestLineBytes = maxRequestLineBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.maxHeaderCount = maxHeaderCount
        self.maxBodyBytes = maxBodyBytes
        self.maxChunkLineBytes = maxChunkLineBytes
        self.maxLeadingEmptyLineBytes = maxLeadingEmptyLineBytes
    }
}
