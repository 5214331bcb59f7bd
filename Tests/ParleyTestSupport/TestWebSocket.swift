import Foundation
import ParleyWebSocket

/// A small blocking WebSocket client for tests: a ``TestSocket``, Parley's client handshake
/// state machine and a client-role protocol machine (the code every Parley client uses, minus
/// the event loop). Every wait has a timeout.
public final class TestWebSocket: @unchecked Sendable {
    // Safe: like TestSocket, used by one task at a time; Sendable only for hand-over.
    public let socket: TestSocket
    private let machine: WebSocketProtocolMachine
    private var inbox: [WebSocketAction] = []
    /// The close code the server sent, once its close frame arrived.
    public private(set) var closeCode: UInt16?
    public private(set) var closeReason = ""
    private var sawEOF = false

    /// Connects and completes the opening handshake on `path` with Parley's client handshake
    /// (``WebSocketClientHandshake``): the server's answer is validated as any client of
    /// Parley validates it; a refusal throws its ``WebSocketHandshakeError``.
    public init(port: Int, path: String = "/v3/websocket", deflate: Bool = false, timeout: Double = 5) throws {
        socket = try TestSocket(port: port)
        var handshake = WebSocketClientHandshake(host: "127.0.0.1:\(port)", target: path, offersDeflate: deflate)
        try socket.send(handshake.request)
        let deadline = Date().addingTimeInterval(timeout)
        var received: [UInt8] = []
        var upgrade: (deflate: PerMessageDeflateParameters?, leftover: [UInt8])?
        while upgrade == nil {
            let bytes = socket.buffered
            socket.clearBuffer()
            received += bytes
            switch handshake.feed(bytes) {
            case .needMoreData:
                guard deadline.timeIntervalSinceNow > 0 else { throw TestSocket.Failure("timed out waiting for the 101") }
                guard try socket.fill(timeout: min(0.5, deadline.timeIntervalSinceNow)) else {
                    throw TestSocket.Failure("closed during handshake: \(String(decoding: received, as: UTF8.self))")
                }
            case .upgraded(let parameters, let leftover):
                upgrade = (parameters, leftover)
            case .failed(let error):
                throw error
            }
        }
        machine = WebSocketProtocolMachine(role: .client, configuration: WebSocketConfiguration(maxMessageSize: 64 << 20, maxFrameSize: 64 << 20),
                                           deflate: upgrade!.deflate)
        if !upgrade!.leftover.isEmpty { absorb(machine.receive(upgrade!.leftover)) }
    }

    /// Whether permessage-deflate was negotiated.
    public var usesDeflate: Bool { machine.usesDeflate }

    public func sendText(_ text: String) throws { try socket.send(machine.sendText(text)) }
    public func sendBinary(_ bytes: [UInt8]) throws { try socket.send(machine.sendBinary(bytes)) }

    /// Sends a close frame.
    public func close(code: WebSocketCloseCode = .normal) throws {
        for case .send(let bytes) in machine.close(code: code) { try socket.send(bytes) }
    }

    private func absorb(_ actions: [WebSocketAction]) {
        for action in actions {
            switch action {
            case .send(let bytes):
                try? socket.send(bytes) // pongs and close echoes
            case .peerClosed(let code, let reason):
                closeCode = code
                closeReason = reason
            default:
                inbox.append(action)
            }
        }
    }

    private func pump(until deadline: Date) throws -> Bool {
        let left = deadline.timeIntervalSinceNow
        guard left > 0, !sawEOF else { return false }
        let open = try socket.fill(timeout: min(0.2, left))
        let bytes = socket.buffered
        socket.clearBuffer()
        if !bytes.isEmpty { absorb(machine.receive(bytes)) }
        if !open { sawEOF = true }
        return true
    }

    /// The next text message, waiting at most `timeout` seconds.
    public func receiveText(timeout: Double = 5) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let index = inbox.firstIndex(where: { if case .text = $0 { true } else { false } }) {
                guard case .text(let text) = inbox.remove(at: index) else { fatalError() }
                return text
            }
            if inbox.contains(where: { if case .binary = $0 { true } else { false } }) {
                throw TestSocket.Failure("server sent a binary frame")
            }
            guard try pump(until: deadline) else {
                throw TestSocket.Failure(sawEOF ? "connection closed (close code \(closeCode.map(String.init) ?? "none"))" : "timed out waiting for a message")
            }
        }
    }

    /// The next binary message, waiting at most `timeout` seconds.
    public func receiveBinary(timeout: Double = 5) throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let index = inbox.firstIndex(where: { if case .binary = $0 { true } else { false } }) {
                guard case .binary(let bytes) = inbox.remove(at: index) else { fatalError() }
                return bytes
            }
            guard try pump(until: deadline) else {
                throw TestSocket.Failure(sawEOF ? "connection closed (close code \(closeCode.map(String.init) ?? "none"))" : "timed out waiting for a message")
            }
        }
    }

    /// Texts until one satisfies `predicate`; returns it.
    public func receiveText(timeout: Double = 5, until predicate: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let text = try receiveText(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if predicate(text) { return text }
        }
    }

    /// Whether a text message arrives within `timeout` (consumed if so).
    public func nothingArrives(within timeout: Double) -> Bool {
        (try? receiveText(timeout: timeout)) == nil
    }

    /// Waits for the server's close frame (or EOF); returns its code.
    public func waitForClose(timeout: Double = 5) throws -> UInt16? {
        let deadline = Date().addingTimeInterval(timeout)
        while closeCode == nil && !sawEOF {
            guard try pump(until: deadline) else { break }
        }
        return closeCode
    }

    /// Whether the TCP connection has reached EOF.
    public var isClosedForReading: Bool { sawEOF }

    /// Reads (keeping what comes) until the server closes the TCP connection: true at EOF, false
    /// after `timeout`; throws if the connection was reset instead of closed.
    public func readToEnd(timeout: Double = 5) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !sawEOF {
            guard try pump(until: deadline) else { break }
        }
        return sawEOF
    }

    /// Closes the TCP connection abruptly (no close frame).
    public func abort() { socket.abort() }
}

// MARK: - Async waits

/// How long one short blocking poll may take inside an async wait: tests never hold a thread
/// of the cooperative pool for long, so other tests (and their detached tasks) keep running.
private let pollSlice = 0.005

extension TestWebSocket {
    /// The next text message, waiting at most `timeout` seconds without blocking a thread.
    public func nextText(timeout: Double = 5) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            do {
                return try receiveText(timeout: pollSlice)
            } catch {
                if deadline.timeIntervalSinceNow <= 0 || closeCode != nil && isClosedForReading { throw error }
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// True when no text message arrives within `seconds` (one that does is consumed).
    public func staysQuiet(for seconds: Double) async -> Bool {
        (try? await nextText(timeout: seconds)) == nil
    }

    /// The server's close code once its close frame (or EOF) arrived, waiting at most `timeout`.
    public func closeCode(timeout: Double = 5) async throws -> UInt16? {
        let deadline = Date().addingTimeInterval(timeout)
        while deadline.timeIntervalSinceNow > 0 {
            if let code = try waitForClose(timeout: pollSlice) { return code }
            if isClosedForReading { return closeCode }
            try await Task.sleep(for: .milliseconds(2))
        }
        return closeCode
    }
}

extension TestSocket {
    /// The next line, waiting at most `timeout` seconds without blocking a thread.
    public func nextLine(timeout: Double = 5) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            do {
                return try readLine(timeout: pollSlice)
            } catch {
                if deadline.timeIntervalSinceNow <= 0 || "\(error)".contains("connection closed") { throw error }
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// Reads until EOF (keeping the bytes); false when it stays open for `timeout` seconds.
    public func closed(within timeout: Double) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while deadline.timeIntervalSinceNow > 0 {
            guard let open = try? fill(timeout: pollSlice) else { return true }
            if !open { return true }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return false
    }
}
