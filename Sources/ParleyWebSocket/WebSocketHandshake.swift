import COpenSSL
import Foundation
import ParleyIO

/// A rejected opening handshake: the HTTP status to answer with (server side; 0 when a
/// client rejects a server's response), a human message for the body, and extra headers
/// (426 carries `Sec-WebSocket-Version: 13`).
public struct WebSocketHandshakeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// HTTP status to answer with (400, 405, 426); for a client-side failure, the status received.
    public let status: Int
    /// What went wrong, for the response body or a log line.
    public let message: String
    /// Extra response headers, e.g. `Sec-WebSocket-Version: 13` with 426.
    public let headers: [(name: String, value: String)]

    /// Creates a handshake error.
    public init(status: Int, message: String, headers: [(name: String, value: String)] = []) {
        self.status = status
        self.message = message
        self.headers = headers
    }

    /// A one-line summary.
    public var description: String { "WebSocket handshake failed (\(status)): \(message)" }

    public static func == (a: Self, b: Self) -> Bool {
        a.status == b.status && a.message == b.message && a.headers.elementsEqual(b.headers) { $0 == $1 }
    }
}

/// The RFC 6455 §4 opening handshake, independent of the HTTP layer: header values come in
/// as plain strings through a lookup closure. The closure must be case-insensitive on the
/// name and should join repeated header lines with ", " (RFC 7230 §3.2.2).
public enum WebSocketHandshake {
    /// RFC 6455 §1.3 GUID appended to the key before hashing.
    public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `base64(SHA1(key + GUID))`, the `Sec-WebSocket-Accept` value for a client key.
    public static func acceptValue(forKey key: String) -> String {
        Data(SHA1Digest.bytes(of: Array((key + guid).utf8))).base64EncodedString()
    }

    /// Whether a comma-separated header value contains `token` (case-insensitive).
    static func headerContainsToken(_ header: String?, _ token: String) -> Bool {
        guard let header else { return false }
        // Bytes, not Foundation: comma-separated elements, optional whitespace around each,
        // tokens compared ASCII-case-insensitively (`token` is lowercase). Every upgrade asks
        // twice (Upgrade, Connection).
        var value = header, token = token
        return value.withUTF8 { bytes in
            token.withUTF8 { wanted in
                var start = 0
                while start <= bytes.count {
                    var end = start
                    while end < bytes.count && bytes[end] != UInt8(ascii: ",") { end += 1 }
                    var first = start, last = end
                    while first < last && (bytes[first] == 0x20 || bytes[first] == 0x09) { first += 1 }
                    while last > first && (bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09) { last -= 1 }
                    if last - first == wanted.count {
                        var same = true
                        for offset in 0..<wanted.count {
                            var byte = bytes[first + offset]
                            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { byte |= 0x20 }
                            if byte != wanted[offset] { same = false; break }
                        }
                        if same { return true }
                    }
                    start = end + 1
                }
                return false
            }
        }
    }

    /// Server: validates an upgrade request (method, HTTP/1.x minor version, headers) and
    /// returns the response header fields for `101 Switching Protocols` plus the negotiated
    /// deflate parameters (nil when not negotiated). Failures carry status 400, 405, or 426
    /// (with `Sec-WebSocket-Version: 13`) for an unsupported version.
    public static func serverResponse(method: String, versionMinor: Int, header: (String) -> String?,
                                      configuration: WebSocketConfiguration)
        -> Result<(headers: [(String, String)], deflate: PerMessageDeflateParameters?), WebSocketHandshakeError> {
        guard method == "GET" else {
            return .failure(WebSocketHandshakeError(status: 405, message: "WebSocket upgrade requires GET",
                                                    headers: [("Allow", "GET")]))
        }
        guard versionMinor >= 1 else {
            return .failure(WebSocketHandshakeError(status: 400, message: "WebSocket upgrade requires HTTP/1.1"))
        }
        guard let host = header("Host"), !host.trimmingCharacters(in: .whitespaces).isEmpty else {
            return .failure(WebSocketHandshakeError(status: 400, message: "missing Host header"))
        }
        guard headerContainsToken(header("Upgrade"), "websocket") else {
            return .failure(WebSocketHandshakeError(status: 400, message: "missing Upgrade: websocket"))
        }
        guard headerContainsToken(header("Connection"), "upgrade") else {
            return .failure(WebSocketHandshakeError(status: 400, message: "missing Connection: Upgrade"))
        }
        guard let version = header("Sec-WebSocket-Version"),
              version.trimmingCharacters(in: .whitespaces) == "13" else {
            return .failure(WebSocketHandshakeError(status: 426, message: "unsupported Sec-WebSocket-Version",
                                                    headers: [("Sec-WebSocket-Version", "13")]))
        }
        guard let rawKey = header("Sec-WebSocket-Key") else {
            return .failure(WebSocketHandshakeError(status: 400, message: "missing Sec-WebSocket-Key"))
        }
        let key = rawKey.trimmingCharacters(in: .whitespaces)
        guard isValidKey(key) else {
            return .failure(WebSocketHandshakeError(status: 400, message: "invalid Sec-WebSocket-Key"))
        }
        var headers: [(String, String)] = [
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Accept", acceptValue(forKey: key)),
        ]
        var deflate: PerMessageDeflateParameters?
        if configuration.acceptsDeflate,
           let negotiated = PerMessageDeflateNegotiation.negotiateServer(offerHeader: header("Sec-WebSocket-Extensions")) {
            headers.append(("Sec-WebSocket-Extensions", negotiated.responseHeaderValue))
            deflate = negotiated.parameters
        }
        return .success((headers, deflate))
    }

    /// A key is the base64 encoding of exactly 16 bytes: 24 characters ending in "==".
    static func isValidKey(_ key: String) -> Bool {
        guard key.utf8.count == 24, let data = Data(base64Encoded: key) else { return false }
        return data.count == 16
    }

    /// A fresh client key: base64 of 16 random bytes from OpenSSL.
    public static func makeClientKey() -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, 16) }
        if ok != 1 {
            var rng = SystemRandomNumberGenerator()
            for i in bytes.indices { bytes[i] = rng.next() }
        }
        return Data(bytes).base64EncodedString()
    }

    /// Client: the whole upgrade request (request line, headers, blank line) as bytes.
    /// `path` is the request target including any query ("/v3/websocket?x=1").
    public static func clientRequest(host: String, path: String, key: String, offerDeflate: Bool,
                                     extraHeaders: [(String, String)] = []) -> [UInt8] {
        var text = "GET \(path.isEmpty ? "/" : path) HTTP/1.1\r\n"
        text += "Host: \(host)\r\n"
        text += "Upgrade: websocket\r\n"
        text += "Connection: Upgrade\r\n"
        text += "Sec-WebSocket-Key: \(key)\r\n"
        text += "Sec-WebSocket-Version: 13\r\n"
        if offerDeflate {
            text += "Sec-WebSocket-Extensions: \(PerMessageDeflateNegotiation.clientOffer())\r\n"
        }
        for (name, value) in extraHeaders {
            text += "\(name): \(value)\r\n"
        }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// Client: validates the server's response to our upgrade request and returns the
    /// negotiated deflate parameters (nil if none). Throws if the client must fail the
    /// connection (RFC 6455 §4.1).
    public static func validateServerResponse(status: Int, header: (String) -> String?, key: String,
                                              offeredDeflate: Bool) throws(WebSocketHandshakeError) -> PerMessageDeflateParameters? {
        guard status == 101 else {
            throw WebSocketHandshakeError(status: status, message: "expected 101 Switching Protocols, got \(status)")
        }
        guard headerContainsToken(header("Upgrade"), "websocket") else {
            throw WebSocketHandshakeError(status: status, message: "missing Upgrade: websocket")
        }
        guard headerContainsToken(header("Connection"), "upgrade") else {
            throw WebSocketHandshakeError(status: status, message: "missing Connection: Upgrade")
        }
        guard header("Sec-WebSocket-Accept")?.trimmingCharacters(in: .whitespaces) == acceptValue(forKey: key) else {
            throw WebSocketHandshakeError(status: status, message: "wrong Sec-WebSocket-Accept")
        }
        let extensions = header("Sec-WebSocket-Extensions")
        if !offeredDeflate {
            if let extensions, !extensions.trimmingCharacters(in: .whitespaces).isEmpty {
                throw WebSocketHandshakeError(status: status, message: "server accepted an extension we did not offer")
            }
            return nil
        }
        return try PerMessageDeflateNegotiation.acceptClient(responseHeader: extensions)
    }
}
