import Foundation
import ParleyIO
import ParleyWebSocket

// What a test reads from an ``InMemoryPeer``: lines, HTTP responses, WebSocket messages,
// each with the codec the socket tests use (``HTTPTestResponse``'s parser, Parley's client
// handshake and client-role protocol machine). Every wait has a timeout.

private let newline = UInt8(ascii: "\n")

extension InMemoryPeer {
    /// The next line the connection wrote, without its `\n` (or `\r\n`).
    public func readLine(timeout: Double = 5) async throws -> String {
        try await read(timeout: timeout, "a line") { buffer in
            guard let end = buffer.firstIndex(of: newline) else { return nil }
            var line = Array(buffer[..<end])
            buffer.removeFirst(end + 1)
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            return String(decoding: line, as: UTF8.self)
        }
    }

    /// Lines until one satisfies `predicate`; returns it (the others are dropped).
    public func readLine(timeout: Double = 5, until predicate: (String) -> Bool) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let line = try await readLine(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if predicate(line) { return line }
        }
    }

    /// True when no whole line arrives within `seconds` (one that does is consumed).
    public func staysQuiet(for seconds: Double) async -> Bool {
        (try? await readLine(timeout: seconds)) == nil
    }

    /// Sends one HTTP/1.1 request (``HTTPTestClient/requestBytes(_:_:headers:body:close:)``);
    /// keep-alive unless `close`.
    public func sendRequest(_ method: String, _ target: String, headers: [(String, String)] = [],
                            body: [UInt8]? = nil, json: String? = nil, close: Bool = false) {
        var headers = headers
        var body = body
        if let json {
            headers.append(("Content-Type", "application/json"))
            body = Array(json.utf8)
        }
        send(HTTPTestClient.requestBytes(method, target, headers: headers, body: body, close: close))
    }

    /// The next whole response (by its Content-Length); what follows stays unread.
    public func readResponse(timeout: Double = 5) async throws -> HTTPTestResponse {
        try await read(timeout: timeout, "an HTTP response") { buffer in
            guard let (response, consumed) = HTTPTestResponse.parse(buffer, requireBody: true) else { return nil }
            buffer.removeFirst(consumed)
            return response
        }
    }

    /// Waits until the server closes the connection, then parses the response it sent (for
    /// answers without a length, and refusals).
    public func responseAtClose(timeout: Double = 5) async throws -> HTTPTestResponse {
        try await waitForClose(timeout: timeout)
        return try HTTPTestResponse(received: unread)
    }

    /// Sends a request and reads its response (keep-alive unless `close`).
    public func request(_ method: String, _ target: String, headers: [(String, String)] = [],
                        body: [UInt8]? = nil, json: String? = nil, close: Bool = false,
                        timeout: Double = 5) async throws -> HTTPTestResponse {
        sendRequest(method, target, headers: headers, body: body, json: json, close: close)
        return try await readResponse(timeout: timeout)
    }
}

/// A WebSocket client over an ``InMemoryPeer``: Parley's client handshake, then a
/// client-role protocol machine, as ``TestWebSocket`` does over a socket.
public final class InMemoryWebSocket: @unchecked Sendable {
    // Safe: used by one test task at a time (like TestWebSocket); Sendable for hand-over only.
    public let peer: InMemoryPeer
    private let machine: WebSocketProtocolMachine
    private var inbox: [WebSocketAction] = []
    /// The close code the server sent, once its close frame arrived.
    public private(set) var closeCode: UInt16?
    public private(set) var closeReason = ""

    /// Upgrades `peer`'s HTTP connection on `path`; a refusal throws its
    /// ``WebSocketHandshakeError``.
    public init(_ peer: InMemoryPeer, path: String = "/v3/websocket", deflate: Bool = false,
                headers: [(name: String, value: String)] = [], timeout: Double = 5) async throws {
        self.peer = peer
        var handshake = WebSocketClientHandshake(host: "127.0.0.1", target: path, offersDeflate: deflate, extraHeaders: headers)
        peer.send(handshake.request)
        let deadline = Date().addingTimeInterval(timeout)
        var upgrade: (deflate: PerMessageDeflateParameters?, leftover: [UInt8])?
        while upgrade == nil {
            let bytes = try await peer.read(atLeast: 1, timeout: max(0.01, deadline.timeIntervalSinceNow))
            let event = bytes.withUnsafeBytes { handshake.feed($0) }
            switch event {
            case .needMoreData: continue
            case .upgraded(let parameters, let leftover): upgrade = (parameters, leftover)
            case .failed(let error): throw error
            }
        }
        machine = WebSocketProtocolMachine(role: .client, configuration: WebSocketConfiguration(maxMessageSize: 64 << 20, maxFrameSize: 64 << 20),
                                           deflate: upgrade!.deflate)
        if !upgrade!.leftover.isEmpty { absorb(machine.receive(upgrade!.leftover)) }
    }

    public var usesDeflate: Bool { machine.usesDeflate }

    public func sendText(_ text: String) { peer.send(machine.sendText(text)) }
    public func sendBinary(_ bytes: [UInt8]) { peer.send(machine.sendBinary(bytes)) }

    /// Sends a close frame.
    public func close(code: WebSocketCloseCode = .normal) {
        for case .send(let bytes) in machine.close(code: code) { peer.send(bytes) }
    }

    private func absorb(_ actions: [WebSocketAction]) {
        for action in actions {
            switch action {
            case .send(let bytes): peer.send(bytes)  // pongs and close echoes
            case .peerClosed(let code, let reason):
                closeCode = code
                closeReason = reason
            default: inbox.append(action)
            }
        }
    }

    /// Takes what arrived and decodes it; false when the wait ended with nothing new.
    private func pump(timeout: Double) async -> Bool {
        guard let bytes = try? await peer.read(atLeast: 1, timeout: timeout) else { return false }
        absorb(machine.receive(bytes))
        return true
    }

    /// The next text message, waiting at most `timeout` seconds.
    public func nextText(timeout: Double = 5) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let index = inbox.firstIndex(where: { if case .text = $0 { true } else { false } }) {
                guard case .text(let text) = inbox.remove(at: index) else { fatalError("not a text") }
                return text
            }
            if inbox.contains(where: { if case .binary = $0 { true } else { false } }) {
                throw InMemoryPeer.Timeout(description: "the server sent a binary frame")
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0, closeCode == nil || !peer.unread.isEmpty, await pump(timeout: left) else {
                throw InMemoryPeer.Timeout(description: closeCode != nil || peer.closeReason != nil
                    ? "connection closed (close code \(closeCode.map(String.init) ?? "none"))"
                    : "no message within \(timeout) s")
            }
        }
    }

    /// The next binary message, waiting at most `timeout` seconds.
    public func nextBinary(timeout: Double = 5) async throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let index = inbox.firstIndex(where: { if case .binary = $0 { true } else { false } }) {
                guard case .binary(let bytes) = inbox.remove(at: index) else { fatalError("not binary") }
                return bytes
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0, await pump(timeout: left) else {
                throw InMemoryPeer.Timeout(description: "no binary message within \(timeout) s")
            }
        }
    }

    /// Text messages until one satisfies `predicate`; returns it.
    public func nextText(timeout: Double = 5, until predicate: (String) -> Bool) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let text = try await nextText(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if predicate(text) { return text }
        }
    }

    /// True when no text message arrives within `seconds` (one that does is consumed).
    public func staysQuiet(for seconds: Double) async -> Bool {
        (try? await nextText(timeout: seconds)) == nil
    }

    /// The server's close code once its close frame arrived (nil when the connection closed
    /// without one), waiting at most `timeout` seconds.
    public func closeCode(timeout: Double = 5) async throws -> UInt16? {
        let deadline = Date().addingTimeInterval(timeout)
        while closeCode == nil {
            if peer.closeReason != nil && peer.unread.isEmpty { return nil }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw InMemoryPeer.Timeout(description: "no close within \(timeout) s") }
            _ = await pump(timeout: min(left, 0.05))
        }
        return closeCode
    }
}
