import Foundation

/// One parsed HTTP/1.1 response, as a test received it.
public struct HTTPTestResponse: Sendable {
    public let status: Int
    /// Header fields in arrival order, names as sent.
    public let headers: [(String, String)]
    /// The body bytes (by Content-Length when there is one, else all that came).
    public let bytes: [UInt8]

    /// The body as text.
    public var body: String { String(decoding: bytes, as: UTF8.self) }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }

    /// Parses the first complete response in `bytes` (skipping interim `100 Continue`s);
    /// returns it and the number of bytes it took, or nil when no complete response is there yet.
    static func parse(_ bytes: [UInt8], requireBody: Bool) -> (HTTPTestResponse, consumed: Int)? {
        var start = 0
        while true {
            guard let split = find(headEnd, in: bytes, from: start) else { return nil }
            var lines = String(decoding: bytes[start..<split], as: UTF8.self).components(separatedBy: "\r\n")
            let statusParts = lines.removeFirst().split(separator: " ")
            let status = statusParts.count > 1 ? Int(statusParts[1]) ?? 0 : 0
            let bodyStart = split + headEnd.count
            if status == 100 {
                start = bodyStart
                continue
            }
            let headers = lines.compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            let rest = bytes[bodyStart...]
            let response = { (length: Int) in HTTPTestResponse(status: status, headers: headers, bytes: Array(rest.prefix(length))) }
            if let length = headers.first(where: { $0.0.lowercased() == "content-length" }).flatMap({ Int($0.1) }) {
                if requireBody && rest.count < length { return nil }
                return (response(length), bodyStart + min(length, rest.count))
            }
            if requireBody { return (response(0), bodyStart) }
            return (response(rest.count), bytes.count)
        }
    }

    /// Parses the response the server sent before closing (or before the wait ended).
    public init(received bytes: [UInt8]) throws {
        guard let (response, _) = Self.parse(bytes, requireBody: false) else {
            throw TestSocket.Failure("no complete response: \(String(decoding: bytes.prefix(300), as: UTF8.self).debugDescription)")
        }
        self = response
    }

    private init(status: Int, headers: [(String, String)], bytes: [UInt8]) {
        self.status = status
        self.headers = headers
        self.bytes = bytes
    }
}

private let headEnd = Array("\r\n\r\n".utf8)

private func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
    guard haystack.count - start >= needle.count else { return nil }
    for i in start...(haystack.count - needle.count) where haystack[i] == needle[0] && haystack[i..<i + needle.count].elementsEqual(needle) {
        return i
    }
    return nil
}

/// The one raw HTTP/1.1 client of the tests: writes requests byte for byte and reads the
/// responses back, on one connection (several requests on it when they keep it alive).
public final class HTTPTestClient {
    public let socket: TestSocket

    public init(port: Int) throws { socket = try TestSocket(port: port) }

    /// Reads responses from a connection the test opened and wrote to itself.
    public init(socket: TestSocket) { self.socket = socket }

    /// The bytes of a request: `Host`, `Connection: close` when `close`, `headers` in order, and
    /// `Content-Length` when there is a body.
    public static func requestBytes(_ method: String, _ target: String, headers: [(String, String)] = [],
                                    body: [UInt8]? = nil, close: Bool = true) -> [UInt8] {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if close { text += "Connection: close\r\n" }
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let body { text += "Content-Length: \(body.count)\r\n" }
        return Array((text + "\r\n").utf8) + (body ?? [])
    }

    /// Sends a request (see ``requestBytes(_:_:headers:body:close:)``).
    public func send(_ method: String, _ target: String, headers: [(String, String)] = [],
                     body: [UInt8]? = nil, close: Bool = true) throws {
        try socket.send(Self.requestBytes(method, target, headers: headers, body: body, close: close))
    }

    /// Sends bytes as they are.
    public func send(raw: String) throws { try socket.send(raw) }

    /// Reads until the server closes (`timeout` seconds at most), then parses the response.
    public func responseAtClose(timeout: Double = 5) throws -> HTTPTestResponse {
        let deadline = Date().addingTimeInterval(timeout)
        while deadline.timeIntervalSinceNow > 0, try socket.fill(timeout: min(0.2, max(0.01, deadline.timeIntervalSinceNow))) {}
        return try HTTPTestResponse(received: socket.buffered)
    }

    /// The async form: never blocks a thread of the cooperative pool while it waits.
    public func responseAtClose(timeout: Double = 5) async throws -> HTTPTestResponse {
        _ = await socket.closed(within: timeout)
        return try HTTPTestResponse(received: socket.buffered)
    }

    /// Reads the next whole response (by its Content-Length) on a connection that stays open;
    /// what follows it stays buffered for the next call.
    public func nextResponse(timeout: Double = 5) throws -> HTTPTestResponse {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let (response, consumed) = HTTPTestResponse.parse(socket.buffered, requireBody: true) {
                socket.consume(consumed)
                return response
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw TestSocket.Failure("no whole response within \(timeout) s") }
            guard try socket.fill(timeout: min(0.2, left)) else {
                throw TestSocket.Failure("connection closed before a whole response: \(String(decoding: socket.buffered.prefix(300), as: UTF8.self).debugDescription)")
            }
        }
    }
}

/// One request with `Connection: close` on a connection of its own (or `raw` bytes as they
/// are); reads until the server closes, `timeout` seconds at most. `json` is a body sent as
/// `Content-Type: application/json`.
public func httpRequest(port: Int, _ method: String, _ target: String, body: [UInt8]? = nil, json: String? = nil,
                        headers: [(String, String)] = [], raw: String? = nil, timeout: Double = 5) throws -> HTTPTestResponse {
    let client = try sendRequest(port: port, method, target, body: body, json: json, headers: headers, raw: raw)
    return try client.responseAtClose(timeout: timeout)
}

/// The async form of `httpRequest`, chosen in async code: never blocks a thread of the
/// cooperative pool (the server answers REST requests from tasks on that same pool).
public func httpRequest(port: Int, _ method: String, _ target: String, body: [UInt8]? = nil, json: String? = nil,
                        headers: [(String, String)] = [], raw: String? = nil, timeout: Double = 5) async throws -> HTTPTestResponse {
    let client = try sendRequest(port: port, method, target, body: body, json: json, headers: headers, raw: raw)
    return try await client.responseAtClose(timeout: timeout)
}

private func sendRequest(port: Int, _ method: String, _ target: String, body: [UInt8]?, json: String?,
                         headers: [(String, String)], raw: String?) throws -> HTTPTestClient {
    let client = try HTTPTestClient(port: port)
    if let raw {
        try client.send(raw: raw)
    } else if let json {
        try client.send(method, target, headers: [("Content-Type", "application/json")] + headers, body: Array(json.utf8))
    } else {
        try client.send(method, target, headers: headers, body: body)
    }
    return client
}
