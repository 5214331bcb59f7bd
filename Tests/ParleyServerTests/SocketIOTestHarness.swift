import Dispatch
import Foundation
import ParleyCore
import ParleyIO
import ParleyTestSupport
import Testing
@testable import ParleyServer

/// An Engine.IO session stand-in: records what the Socket.IO layer sends.
final class FakeEngineIOChannel: EngineIOMessageChannel {
    let version: EngineIOVersion
    let loop: EventLoop
    var transport: EngineIOTransport = .webSocket
    private(set) var isClosed = false
    private(set) var closeReason: String?
    /// Everything sent, in order: text messages as they are, binary ones as `<bin:hex>`.
    private(set) var sent: [String] = []
    private(set) var preEncoded: [(IOBuffer, EngineIOTransport)] = []

    init(version: EngineIOVersion, loop: EventLoop) {
        self.version = version
        self.loop = loop
    }

    func send(_ messages: [EngineIOMessage]) {
        guard !isClosed else { return }
        for message in messages {
            switch message {
            case .text(let text): sent.append(text)
            case .binary(let bytes): sent.append("<bin:" + bytes.map { String($0, radix: 16) }.joined(separator: ",") + ">")
            }
        }
    }

    func sendPreEncoded(_ frames: IOBuffer, as transport: EngineIOTransport) {
        guard !isClosed else { return }
        preEncoded.append((frames, transport))
    }

    func close(reason: String) {
        isClosed = true
        closeReason = reason
    }

    /// Backlogs the layer above asked to be throttled by.
    private(set) var throttledBy: [RoomBacklog?] = []

    func throttle(by backlog: RoomBacklog?) { throttledBy.append(backlog) }

    /// What was sent since the last call.
    func takeSent() -> [String] {
        defer { sent = [] }
        return sent
    }
}

/// A Socket.IO application that records what it is told and does what a test asks.
final class RecordingApplication: SocketIOApplication {
    var namespaces: Set<String> = ["/", "/custom"]
    var decide: (SocketIOConnectRequest) -> SocketIOConnectDecision = { _ in .accept() }
    var onConnected: (SocketIOSocket) -> Void = { _ in }
    private(set) var log: [String] = []
    private(set) var events: [SocketIOEvent] = []

    func serves(_ namespace: String) -> Bool { namespaces.contains(namespace) }

    func connect(_ socket: SocketIOSocket, _ request: SocketIOConnectRequest) -> SocketIOConnectDecision {
        log.append("connect \(socket.namespace) auth=\(request.auth?.jsonString ?? "nil") implicit=\(request.isImplicit)")
        return decide(request)
    }

    func connected(_ socket: SocketIOSocket, _ request: SocketIOConnectRequest) {
        log.append("connected \(socket.namespace)")
        onConnected(socket)
    }

    func received(_ event: SocketIOEvent, on socket: SocketIOSocket) {
        log.append("event \(socket.namespace) \(event.name) \(JSONValue.array(event.arguments).jsonString)")
        events.append(event)
    }

    func disconnected(_ socket: SocketIOSocket, reason: SocketIODisconnectReason) {
        log.append("disconnected \(socket.namespace) \(reason)")
    }
}

/// A ``SocketIOConnection`` on a fake Engine.IO channel, on one real event loop (so acks can
/// hop to it from other threads).
///
/// `@unchecked Sendable` proof: the non-Sendable objects (`channel`, `connection`, `app`) are
/// created and used only inside `onLoop` bodies, which run on the loop's thread while the
/// calling thread waits; the test thread never touches them directly.
final class SocketIOHarness: @unchecked Sendable {
    let group = EventLoopGroup(loopCount: 1)
    private(set) var channel: FakeEngineIOChannel!
    private(set) var connection: SocketIOConnection!
    private(set) var app: (any SocketIOApplication)!

    var loop: EventLoop { group.loops[0] }
    var recording: RecordingApplication { app as! RecordingApplication }

    struct Timeout: Error {}

    init(version: EngineIOVersion = .v4, connectTimeoutMillis: UInt64? = nil, maxPayload: Int = 1_000_000,
         application: @escaping @Sendable () -> any SocketIOApplication = { RecordingApplication() }) throws {
        try onLoop { harness in
            harness.channel = FakeEngineIOChannel(version: version, loop: harness.loop)
            harness.app = application()
            harness.connection = SocketIOConnection(channel: harness.channel, application: harness.app, maxPayload: maxPayload,
                                                    connectTimeoutMillis: connectTimeoutMillis)
        }
    }

    /// Stops the loop; call it from the test (not from the loop).
    func shutdown() { group.shutdown() }

    /// Runs `body` on the loop and waits for it (5 s at most).
    @discardableResult
    func onLoop<T: Sendable>(_ body: @escaping @Sendable (SocketIOHarness) -> T) throws -> T {
        let result = Locked<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            result.withLock { $0 = body(self) }
            done.signal()
        }
        guard done.wait(timeout: .now() + 5) == .success, let value = result.value else { throw Timeout() }
        return value
    }

    /// Tells the connection its session opened; returns what it sent.
    func open() throws -> [String] {
        try onLoop { $0.connection.engineIOSessionOpened(); return $0.channel.takeSent() }
    }

    /// Feeds messages from the client, on the loop; returns what was sent meanwhile.
    @discardableResult
    func receive(_ messages: EngineIOMessage...) throws -> [String] {
        try onLoop { harness in
            for message in messages { harness.connection.engineIOSessionReceived(message) }
            return harness.channel.takeSent()
        }
    }

    @discardableResult
    func receive(_ texts: String...) throws -> [String] {
        try onLoop { harness in
            for text in texts { harness.connection.engineIOSessionReceived(.text(text)) }
            return harness.channel.takeSent()
        }
    }

    /// Waits until the channel has sent something (answers that hop from other threads).
    func waitForSent(timeout: Double = 5) throws -> [String] {
        var sent: [String] = []
        try eventuallyBlocking("the channel to send", timeout: timeout) {
            sent = try onLoop { $0.channel.takeSent() }
            return !sent.isEmpty
        }
        return sent
    }
}
