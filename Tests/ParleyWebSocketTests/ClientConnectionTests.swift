import Foundation
import ParleyIO
import Testing
@testable import ParleyWebSocket

/// What the fake server does once it has read an upgrade request.
private enum Script: Sendable {
    /// Answers 101 and, in the same write, `frames`; then echoes text and answers close.
    case accept(frames: [UInt8])
    /// Answers 101, then ignores everything (a server that never answers a close frame).
    case acceptThenIgnore
    /// Answers with this status and closes.
    case refuse(status: Int)
    /// Never answers.
    case silent
}

/// A tiny WebSocket server on ParleyIO that follows a script; remembers its peers' addresses.
private final class FakeServer: Sendable {
    private let group = EventLoopGroup(loopCount: 1)
    private let listener: TCPListener
    let peers = Locked<[String]>([])
    var port: Int { listener.port }

    init(_ script: Script) throws {
        let peers = self.peers
        listener = try TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { connection in
            peers.withLock { $0.append(connection.remoteIP) }
            connection.handler = Session(script: script)
        }
    }

    func stop() {
        listener.close()
        group.shutdown()
    }

    private final class Session: ConnectionHandler {
        let script: Script
        var head: [UInt8] = []
        var machine: WebSocketProtocolMachine?

        init(script: Script) { self.script = script }

        func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
            if let machine {
                if case .acceptThenIgnore = script { return }
                for action in machine.receive(bytes) {
                    switch action {
                    case .text(let text): connection.write(machine.sendText(text))
                    case .send(let frame): connection.write(frame)
                    case .closeConnection: connection.close()
                    default: break
                    }
                }
                return
            }
            head.append(contentsOf: bytes)
            guard let end = head.firstRange(of: Array("\r\n\r\n".utf8)) else { return }
            // The request's fields, answered by the server side of Parley's handshake.
            let fields = String(decoding: head[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n").dropFirst()
            let lookup: (String) -> String? = { name in
                fields.first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
                    .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
            }
            guard case .success(let accepted) = WebSocketHandshake.serverResponse(
                method: "GET", versionMinor: 1, header: lookup, configuration: WebSocketConfiguration(acceptsDeflate: false)) else {
                connection.close()
                return
            }
            let upgrade = "HTTP/1.1 101 Switching Protocols\r\n" + accepted.headers.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n"
            switch script {
            case .accept(let frames):
                connection.write(Array(upgrade.utf8) + frames)
                machine = WebSocketProtocolMachine(role: .server, deflate: nil)
            case .acceptThenIgnore:
                connection.write(upgrade)
                machine = WebSocketProtocolMachine(role: .server, deflate: nil)
            case .refuse(let status):
                connection.write("HTTP/1.1 \(status) Refused\r\nContent-Length: 0\r\n\r\n")
                connection.close()
            case .silent:
                break
            }
        }

        func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {}
    }
}

/// What a delegate heard, in order.
private enum Heard: Equatable, Sendable {
    case open
    case text(String)
    case binary([UInt8])
    case failed(WebSocketClientError.Code, status: Int?)
    case closed(code: UInt16, reason: String)
}

/// Records delegate calls; the test reads them from another thread.
private final class Recorder: WebSocketClientDelegate {
    let heard: Locked<[Heard]>
    let onOpen: (WebSocketClientConnection) -> Void

    init(_ heard: Locked<[Heard]>, onOpen: @escaping (WebSocketClientConnection) -> Void) {
        self.heard = heard
        self.onOpen = onOpen
    }

    func webSocketDidOpen(_ socket: WebSocketClientConnection) {
        heard.withLock { $0.append(.open) }
        onOpen(socket)
    }

    func webSocket(_ socket: WebSocketClientConnection, didReceive kind: WebSocketMessageKind, payload: UnsafeRawBufferPointer) {
        let event: Heard = kind == .text ? .text(String(decoding: payload, as: UTF8.self)) : .binary(Array(payload))
        heard.withLock { $0.append(event) }
    }

    func webSocket(_ socket: WebSocketClientConnection, didFailToOpen error: WebSocketClientError) {
        heard.withLock { $0.append(.failed(error.code, status: error.status)) }
    }

    func webSocketDidClose(_ socket: WebSocketClientConnection, code: UInt16, reason: String) {
        heard.withLock { $0.append(.closed(code: code, reason: reason)) }
    }
}

/// Opens a client connection on a loop of its own and returns what it heard once `done`
/// holds (or the timeout passes: the test then fails on its expectations).
private func run(port: Int, timeout: Double = 5, configure: (inout WebSocketClientConnection.Options) -> Void = { _ in },
                 onOpen: @escaping @Sendable (WebSocketClientConnection) -> Void = { _ in },
                 until done: @escaping @Sendable ([Heard]) -> Bool) async throws -> [Heard] {
    let group = EventLoopGroup(loopCount: 1)
    defer { group.shutdown() }
    let loop = group.loops[0]
    var options = WebSocketClientConnection.Options(host: "127.0.0.1", port: port, target: "/chat")
    options.configuration = WebSocketConfiguration(offersDeflate: false)
    configure(&options)
    let heard = Locked<[Heard]>([])
    loop.execute { [options] in
        WebSocketClientConnection(loop: loop, options: options, delegate: Recorder(heard, onOpen: onOpen)).connect()
    }
    // A timeout is not an error here: the test fails on its expectations about what was heard.
    try? await eventually("the client to finish", timeout: timeout) { done(heard.value) }
    return heard.value
}

private func isFinal(_ heard: [Heard]) -> Bool {
    heard.contains { if case .failed = $0 { true } else if case .closed = $0 { true } else { false } }
}

@Suite(.serialized) struct ClientConnectionTests {
    /// Frames in the same read as the 101, the server's close among them: delivered after the
    /// open, then the close handshake the server started.
    @Test func framesSentWithThe101AreDeliveredAfterOpen() async throws {
        let frames = WebSocketFrameEncoder.encode(opcode: .text, payload: Array("hello".utf8))
            + WebSocketFrameEncoder.encode(opcode: .binary, payload: [7, 8])
            + WebSocketFrameEncoder.encode(opcode: .close, payload: [0x03, 0xE9] + Array("going".utf8))
        let server = try FakeServer(.accept(frames: frames))
        defer { server.stop() }
        let heard = try await run(port: server.port, until: isFinal)
        #expect(heard == [.open, .text("hello"), .binary([7, 8]), .closed(code: 1001, reason: "going")])
    }

    @Test func ourCloseIsAnswered() async throws {
        let server = try FakeServer(.accept(frames: []))
        defer { server.stop() }
        let heard = try await run(port: server.port, onOpen: { $0.close(code: .normal, reason: "bye") }, until: isFinal)
        #expect(heard == [.open, .closed(code: 1000, reason: "")])
    }

    @Test func echoesThroughTheMachine() async throws {
        let server = try FakeServer(.accept(frames: []))
        defer { server.stop() }
        let heard = try await run(port: server.port, onOpen: { $0.sendText("ping?") }, until: { $0.contains(.text("ping?")) })
        #expect(heard == [.open, .text("ping?")])
    }

    @Test func aRefusalIsAHandshakeFailureWithItsStatus() async throws {
        let server = try FakeServer(.refuse(status: 403))
        defer { server.stop() }
        #expect(try await run(port: server.port, until: isFinal) == [.failed(.handshakeFailed, status: 403)])
    }

    @Test func nothingListeningIsAConnectFailure() async throws {
        #expect(try await run(port: 1, until: isFinal) == [.failed(.connectFailed, status: nil)])
    }

    /// A server that stops answering (no pong, nothing) is given up after two keep-alive
    /// intervals (``WebSocketHeartbeat``): close 1006.
    @Test func aSilentServerIsGivenUpAfterTwoKeepAliveIntervals() async throws {
        let server = try FakeServer(.acceptThenIgnore)
        defer { server.stop() }
        let started = Date()
        let heard = try await run(port: server.port, configure: { $0.keepAliveMilliseconds = 50 }, until: isFinal)
        #expect(heard == [.open, .closed(code: 1006, reason: "")])
        #expect(Date().timeIntervalSince(started) < 4)
    }

    @Test func aSilentServerTimesOut() async throws {
        let server = try FakeServer(.silent)
        defer { server.stop() }
        let started = Date()
        let heard = try await run(port: server.port, configure: { $0.openTimeoutMilliseconds = 100 }, until: isFinal)
        #expect(heard == [.failed(.timedOut, status: nil)])
        #expect(Date().timeIntervalSince(started) < 4)
    }

    @Test func anUnansweredCloseEndsAfterTheCloseTimeout() async throws {
        let server = try FakeServer(.acceptThenIgnore)
        defer { server.stop() }
        let heard = try await run(port: server.port, configure: { $0.closeTimeoutMilliseconds = 100 },
                                  onOpen: { $0.close() }, until: isFinal)
        #expect(heard == [.open, .closed(code: 1006, reason: "")])
    }

    @Test func connectsFromTheSourceAddress() async throws {
        let server = try FakeServer(.accept(frames: []))
        defer { server.stop() }
        let heard = try await run(port: server.port, configure: { $0.sourceHost = "127.0.0.2" },
                                  onOpen: { $0.close() }, until: isFinal)
        #expect(heard == [.open, .closed(code: 1000, reason: "")])
        #expect(server.peers.value == ["127.0.0.2"])
    }

    @Test func abortBeforeTheUpgradeIsCancelled() async throws {
        let server = try FakeServer(.silent)
        defer { server.stop() }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let heard = Locked<[Heard]>([])
        let port = server.port
        loop.execute {
            let socket = WebSocketClientConnection(loop: loop, options: .init(host: "127.0.0.1", port: port, target: "/"),
                                                   delegate: Recorder(heard, onOpen: { _ in }))
            socket.connect()
            socket.abort()
            socket.abort()   // once only
        }
        try await eventually("the client to report", timeout: 5) { !heard.value.isEmpty }
        #expect(heard.value == [.failed(.cancelled, status: nil)])
    }
}
