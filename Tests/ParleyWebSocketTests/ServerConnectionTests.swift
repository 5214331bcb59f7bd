import Foundation
import ParleyHTTP
import ParleyIO
import Testing
import ParleyTestSupport
@testable import ParleyWebSocket

// MARK: - The heartbeat, fed by hand

@Suite struct WebSocketHeartbeatTests {
    @Test func aSilentPeerIsPingedThenGivenUp() {
        var heartbeat = WebSocketHeartbeat()
        #expect(heartbeat.tick() == .none)          // the opening counts as hearing
        #expect(heartbeat.tick() == .sendPing)      // silent for an interval
        #expect(heartbeat.pingOutstanding)
        #expect(heartbeat.tick() == .giveUp)        // and for the next one: half-open
    }

    @Test func hearingAnythingKeepsThePeerAlive() {
        var heartbeat = WebSocketHeartbeat()
        #expect(heartbeat.tick() == .none)
        #expect(heartbeat.tick() == .sendPing)
        heartbeat.heard()                           // the pong, or any byte
        #expect(heartbeat.tick() == .none)
        #expect(!heartbeat.pingOutstanding)
        heartbeat.heard()
        #expect(heartbeat.tick() == .none)          // heard every interval: never pinged
        #expect(heartbeat.tick() == .sendPing)
    }
}

// MARK: - The server connection over loopback

/// What the server's delegate heard, in order.
private enum ServerHeard: Equatable, Sendable {
    case text(String)
    case binary([UInt8])
    case failed(WebSocketCloseCode)
    case closed(WebSocketServerClose)
}

/// The session above a server connection: echoes messages; `close-me` makes it close
/// (1008 "asked"), `broadcast` makes it send a frame encoded once for many connections.
private final class EchoDelegate: WebSocketServerDelegate {
    let heard: Locked<[ServerHeard]>
    let deflated: Locked<Bool?>

    init(_ heard: Locked<[ServerHeard]>, deflated: Locked<Bool?>) {
        self.heard = heard
        self.deflated = deflated
    }

    func webSocket(_ socket: WebSocketServerConnection, didReceive kind: WebSocketMessageKind, payload: UnsafeRawBufferPointer) {
        deflated.withLock { $0 = socket.usesDeflate }
        guard kind == .text else {
            heard.withLock { $0.append(.binary(Array(payload))) }
            return socket.sendBinary(payload)
        }
        let text = String(decoding: payload, as: UTF8.self)
        heard.withLock { $0.append(.text(text)) }
        switch text {
        case "close-me": socket.close(.policyViolation, reason: "asked")
        case "broadcast": socket.sendPreEncoded(IOBuffer(sharedFrame))
        default: socket.sendText(utf8: payload)
        }
    }

    func webSocket(_ socket: WebSocketServerConnection, didFail code: WebSocketCloseCode) {
        heard.withLock { $0.append(.failed(code)) }
    }

    func webSocketDidClose(_ socket: WebSocketServerConnection, close: WebSocketServerClose) {
        heard.withLock { $0.append(.closed(close)) }
    }
}

/// An HTTP server of one route: parses the request with ParleyHTTP's parser and upgrades it
/// through ``WebSocketServerConnection/upgrade(_:connection:options:responseHeaders:)``.
private final class UpgradingServer: Sendable {
    private let group = EventLoopGroup(loopCount: 1)
    private let listener: TCPListener
    let heard = Locked<[ServerHeard]>([])
    let deflated = Locked<Bool?>(nil)
    var port: Int { listener.port }

    init(_ options: WebSocketServerConnection.Options) throws {
        let (heard, deflated) = (self.heard, self.deflated)
        listener = try TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { connection in
            connection.handler = Upgrader(options: options) { EchoDelegate(heard, deflated: deflated) }
        }
    }

    func stop() {
        listener.close()
        group.shutdown()
    }

    private final class Upgrader: ConnectionHandler {
        let options: WebSocketServerConnection.Options
        let makeDelegate: () -> EchoDelegate
        var parser = HTTPRequestParser()
        var head: HTTPRequestHead?

        init(options: WebSocketServerConnection.Options, makeDelegate: @escaping () -> EchoDelegate) {
            self.options = options
            self.makeDelegate = makeDelegate
        }

        func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
            for event in parser.feed(bytes) {
                switch event {
                case .head(let head): self.head = head
                case .upgrade(let leftover):
                    guard let head, let webSocket = WebSocketServerConnection.upgrade(
                        head, connection: connection, options: options, responseHeaders: [("X-Upgrader", "test")]) else { return }
                    webSocket.open(delegate: makeDelegate(), leftover: leftover)
                    return
                default:
                    connection.close()
                    return
                }
            }
        }

        func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {}
    }
}

/// What a ``WebSocketClientConnection`` heard.
private enum ClientHeard: Equatable, Sendable {
    case open, text(String), closed(UInt16, String), failed
}

private final class ClientRecorder: WebSocketClientDelegate {
    let heard: Locked<[ClientHeard]>
    let onOpen: (WebSocketClientConnection) -> Void
    init(_ heard: Locked<[ClientHeard]>, onOpen: @escaping (WebSocketClientConnection) -> Void) {
        self.heard = heard
        self.onOpen = onOpen
    }
    func webSocketDidOpen(_ socket: WebSocketClientConnection) {
        heard.withLock { $0.append(.open) }
        onOpen(socket)
    }
    func webSocket(_ socket: WebSocketClientConnection, didReceive kind: WebSocketMessageKind, payload: UnsafeRawBufferPointer) {
        let text = String(decoding: payload, as: UTF8.self)
        heard.withLock { $0.append(.text(text)) }
        if text == "bye-now" { socket.close(code: .normal, reason: "bye") }
    }
    func webSocket(_ socket: WebSocketClientConnection, didFailToOpen error: WebSocketClientError) {
        heard.withLock { $0.append(.failed) }
    }
    func webSocketDidClose(_ socket: WebSocketClientConnection, code: UInt16, reason: String) {
        heard.withLock { $0.append(.closed(code, reason)) }
    }
}

/// Runs Parley's client against `port`, sending `messages` once open, until `done` holds for
/// what the server heard (or 5 s pass).
private func runClient(port: Int, offersDeflate: Bool = false, messages: [String], server: UpgradingServer,
                       until done: @escaping @Sendable ([ServerHeard]) -> Bool) async throws -> [ClientHeard] {
    let group = EventLoopGroup(loopCount: 1)
    defer { group.shutdown() }
    let loop = group.loops[0]
    var options = WebSocketClientConnection.Options(host: "127.0.0.1", port: port, target: "/ws")
    options.configuration = WebSocketConfiguration(offersDeflate: offersDeflate)
    let heard = Locked<[ClientHeard]>([])
    loop.execute { [options] in
        WebSocketClientConnection(loop: loop, options: options, delegate: ClientRecorder(heard) { socket in
            for message in messages { socket.sendText(message) }
        }).connect()
    }
    try await waitUntil { done(server.heard.value) && heard.value.contains { if case .closed = $0 { true } else { false } } }
    return heard.value
}

/// Waits up to 5 s for `condition` (``eventually``); the test's expectations then say what
/// did not happen.
private func waitUntil(_ condition: @Sendable () -> Bool) async throws {
    try? await eventually("a WebSocket condition", timeout: 5) { condition() }
}

private func hasClosed(_ heard: [ServerHeard]) -> Bool {
    heard.contains { if case .closed = $0 { true } else { false } }
}

/// A TCP client that writes bytes and keeps what comes back.
private final class RawClient: Sendable {
    private let group = EventLoopGroup(loopCount: 1)
    let received = Locked<[UInt8]>([])
    let closed = Locked(false)

    init(port: Int, send bytes: [UInt8]) {
        let (received, closed) = (self.received, self.closed)
        let loop = group.loops[0]
        loop.execute {
            loop.connect(host: "127.0.0.1", port: port) { result in
                guard case .success(let connection) = result else { return closed.withLock { $0 = true } }
                connection.handler = Handler(received: received, closed: closed)
                connection.write(bytes)
            }
        }
    }

    func stop() { group.shutdown() }

    /// What came after the response head.
    var frames: [UInt8] {
        let bytes = received.value
        guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else { return [] }
        return Array(bytes[end.upperBound...])
    }

    var head: String {
        let bytes = received.value
        guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else { return "" }
        return String(decoding: bytes[..<end.lowerBound], as: UTF8.self)
    }

    private final class Handler: ConnectionHandler {
        let received: Locked<[UInt8]>
        let closed: Locked<Bool>
        init(received: Locked<[UInt8]>, closed: Locked<Bool>) {
            self.received = received
            self.closed = closed
        }
        func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
            received.withLock { $0.append(contentsOf: bytes) }
        }
        func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
            closed.withLock { $0 = true }
        }
    }
}

private func upgradeRequest(deflate: Bool = false) -> [UInt8] {
    Array(("GET /ws HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        + (deflate ? "Sec-WebSocket-Extensions: permessage-deflate\r\n" : "") + "\r\n").utf8)
}

/// A message long enough to be compressed (over the 64-byte threshold), framed once.
private let sharedText = String(repeating: "shared ", count: 30)
private let sharedFrame = WebSocketProtocolMachine.serverTextFrame(Array(sharedText.utf8))

@Suite(.serialized) struct ServerConnectionTests {
    private let plain = WebSocketServerConnection.Options(configuration: WebSocketConfiguration(acceptsDeflate: false))

    /// Messages come up and are answered; the client's close is answered and ends TCP, and the
    /// session hears the client's code and reason.
    @Test func echoesAndAnswersTheClientsClose() async throws {
        let server = try UpgradingServer(plain)
        defer { server.stop() }
        let client = try await runClient(port: server.port, messages: ["hi", "bye-now"], server: server, until: hasClosed)
        #expect(client == [.open, .text("hi"), .text("bye-now"), .closed(1000, "")])
        let expected = WebSocketServerClose(sent: nil, failure: nil, peer: (1000, "bye"), connection: .local)
        #expect(server.heard.value == [.text("hi"), .text("bye-now"), .closed(expected)])
    }

    /// The session's close: our frame, the client's answer, then TCP; the code and reason the
    /// session sent are what the close notification reports.
    @Test func theSessionsCloseIsAHandshake() async throws {
        let server = try UpgradingServer(plain)
        defer { server.stop() }
        let client = try await runClient(port: server.port, messages: ["close-me", "dropped"], server: server, until: hasClosed)
        #expect(client == [.open, .closed(1008, "asked")])
        let expected = WebSocketServerClose(sent: (.policyViolation, "asked"), failure: nil, peer: (1008, ""), connection: .local)
        // "dropped" came after our close frame: never handed up.
        #expect(server.heard.value == [.text("close-me"), .closed(expected)])
    }

    /// A client that never answers our close frame is cut off after the close timeout.
    @Test func anUnansweredCloseEndsAfterTheTimeout() async throws {
        var options = plain
        options.closeTimeoutMilliseconds = 100
        let server = try UpgradingServer(options)
        defer { server.stop() }
        let client = RawClient(port: server.port, send: upgradeRequest() + clientFrame(.text, "close-me"))
        defer { client.stop() }
        let started = Date()
        try await waitUntil { client.closed.value }
        #expect(client.closed.value)
        #expect(Date().timeIntervalSince(started) < 2)
        #expect(client.frames == WebSocketFrameEncoder.encode(opcode: .close, payload: closePayload(1008, "asked")))
        let expected = WebSocketServerClose(sent: (.policyViolation, "asked"), failure: nil, peer: nil, connection: .local)
        try await waitUntil { hasClosed(server.heard.value) }
        #expect(server.heard.value == [.text("close-me"), .closed(expected)])
    }

    /// A message followed by a protocol violation in the same read is answered before our
    /// close frame, and the session is told of the failure.
    @Test func repliesKeepTheirOrder() async throws {
        let server = try UpgradingServer(plain)
        defer { server.stop() }
        let broken = rawClientFrame(firstByte: 0x83, payload: [1])       // reserved opcode 3
        let client = RawClient(port: server.port, send: upgradeRequest() + clientFrame(.text, "one") + broken)
        defer { client.stop() }
        try await waitUntil { client.closed.value }
        let reply = WebSocketFrameEncoder.encode(opcode: .text, payload: Array("one".utf8))
        #expect(Array(client.frames.prefix(reply.count)) == reply)
        let close = Array(client.frames.dropFirst(reply.count))
        #expect(close.count >= 4 && close[0] == 0x88 && UInt16(close[2]) << 8 | UInt16(close[3]) == 1002)
        try await waitUntil { hasClosed(server.heard.value) }
        let heard = server.heard.value
        #expect(heard.prefix(2) == [.text("one"), .failed(.protocolError)])
        if case .closed(let close) = heard.last { #expect(close.code == .protocolError) } else { Issue.record("no close") }
    }

    /// A client that says nothing is pinged after one interval and cut off after the next.
    @Test func aSilentClientIsPingedThenCutOff() async throws {
        let server = try UpgradingServer(WebSocketServerConnection.Options(
            configuration: WebSocketConfiguration(acceptsDeflate: false), pingIntervalMilliseconds: 50))
        defer { server.stop() }
        let client = RawClient(port: server.port, send: upgradeRequest())
        defer { client.stop() }
        try await waitUntil { client.closed.value }
        #expect(client.closed.value)
        // Two ticks: the first counts the opening as hearing, the second pings; then the third gives up.
        #expect(client.frames == WebSocketFrameEncoder.encode(opcode: .ping, payload: []))
        try await waitUntil { hasClosed(server.heard.value) }
        #expect(server.heard.value == [.closed(WebSocketServerClose(sent: nil, failure: nil, peer: nil, connection: .local))])
    }

    /// A frame encoded once for many connections goes out as it is without deflate, and is
    /// compressed for a connection that negotiated it; either way the client reads the text.
    @Test(arguments: [false, true])
    func preEncodedFramesReachPlainAndDeflateClients(deflate: Bool) async throws {
        let server = try UpgradingServer(WebSocketServerConnection.Options(configuration: WebSocketConfiguration(acceptsDeflate: true)))
        defer { server.stop() }
        let client = try await runClient(port: server.port, offersDeflate: deflate, messages: ["broadcast", "bye-now"],
                                         server: server, until: hasClosed)
        #expect(client == [.open, .text(sharedText), .text("bye-now"), .closed(1000, "")])
        #expect(server.deflated.value == deflate)
    }

    /// The pre-encoded path writes the shared bytes untouched when deflate is off, and a
    /// compressed frame of its own (RSV1 set, smaller) for a connection that negotiated it.
    @Test(arguments: [false, true])
    func preEncodedBytesAreWrittenAsTheyAreOrCompressed(deflate: Bool) async throws {
        let server = try UpgradingServer(WebSocketServerConnection.Options(configuration: WebSocketConfiguration(acceptsDeflate: true)))
        defer { server.stop() }
        let client = RawClient(port: server.port, send: upgradeRequest(deflate: deflate) + clientFrame(.text, "broadcast"))
        defer { client.stop() }
        try await waitUntil { client.frames.count >= (deflate ? 2 : sharedFrame.count) }
        if deflate {
            #expect(client.head.contains("permessage-deflate"))
            #expect(client.frames.first == 0xC1)                      // FIN + RSV1 + text
            #expect(client.frames.count < sharedFrame.count)
        } else {
            #expect(client.frames == sharedFrame)
        }
    }

    /// A deflate connection gets the shared bytes as they are when its message is past the
    /// compression limit (RSV1 clear, not framed again).
    @Test func preEncodedBytesPastTheCompressionLimitGoAsTheyAre() async throws {
        let configuration = WebSocketConfiguration(acceptsDeflate: true, compressionLimit: sharedText.utf8.count - 1)
        let server = try UpgradingServer(WebSocketServerConnection.Options(configuration: configuration))
        defer { server.stop() }
        let client = RawClient(port: server.port, send: upgradeRequest(deflate: true) + clientFrame(.text, "broadcast"))
        defer { client.stop() }
        try await waitUntil { client.frames.count >= sharedFrame.count }
        #expect(client.head.contains("permessage-deflate"))
        #expect(client.frames == sharedFrame)
    }

    /// A request that is no valid upgrade gets its status, with the caller's extra headers,
    /// and the connection is closed.
    @Test func anInvalidUpgradeIsRefused() async throws {
        let server = try UpgradingServer(plain)
        defer { server.stop() }
        let request = "GET /ws HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n"
        let client = RawClient(port: server.port, send: Array(request.utf8))
        defer { client.stop() }
        try await waitUntil { client.closed.value }
        #expect(client.head.hasPrefix("HTTP/1.1 400"))
        #expect(client.head.contains("X-Upgrader: test"))
        #expect(server.heard.value.isEmpty)
    }

    /// Frames back to back in one shared buffer are each found (the deflate path re-frames them).
    @Test func framesInASharedBufferAreWalked() {
        let frames = WebSocketProtocolMachine.serverTextFrame(Array("a".utf8))
            + WebSocketFrameEncoder.encode(opcode: .binary, payload: [UInt8](repeating: 7, count: 300))
            + WebSocketProtocolMachine.serverTextFrame([UInt8](repeating: 65, count: 70_000))
        var seen: [(WebSocketOpcode, Int)] = []
        frames.withUnsafeBytes { bytes in
            WebSocketServerConnection.forEachFrame(in: bytes) { opcode, payload in seen.append((opcode, payload.count)) }
        }
        #expect(seen.map(\.0) == [.text, .binary, .text])
        #expect(seen.map(\.1) == [1, 300, 70_000])
    }
}
