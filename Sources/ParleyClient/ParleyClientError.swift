/// A client-side failure: a stable code and a message a person can read.
///
/// `code` tells a program what to do: ``Code/rejected`` means the server said no (bad channel,
/// bad token, a 1008/4xxx close) and retrying will not help; the other codes are transient or
/// local.
public struct ParleyClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public let code: Code
    /// What went wrong, for a person.
    public let message: String

    /// The server's stable code for a refused command, when it sent one (for message
    /// actions: `not_author`, `unknown_message`, `edit_window_closed`, … — docs/protocols.md).
    public let serverCode: String?

    /// Creates an error.
    public init(_ code: Code, _ message: String, serverCode: String? = nil) {
        self.code = code
        self.message = message
        self.serverCode = serverCode
    }

    /// A stable error code.
    public enum Code: String, Sendable, Hashable {
        /// The URL is not a `ws://` (or `wss://`) URL the client can use.
        case invalidURL
        /// The feature is not available here (e.g. `wss://` on Linux, a command the server lacks).
        case unsupported
        /// The TCP connection or the WebSocket upgrade failed.
        case connectionFailed
        /// The server refused the handshake or the token, or closed with 1008 / 4000–4999.
        /// The client does not reconnect after this.
        case rejected
        /// The server answered a request with an error reply.
        case server
        /// The connection dropped before the answer came.
        case connectionLost
        /// The client is not connected (never connected, or ``ParleyClient/disconnect()`` was called).
        case notConnected
        /// No answer within the time limit.
        case timeout
        /// The task waiting for the answer was cancelled.
        case cancelled
        /// The server sent something the client could not read.
        case protocolViolation
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }

    /// Whether this error ends the session for good (no reconnect).
    public var isFatal: Bool { code == .rejected || code == .invalidURL || code == .unsupported }
}
