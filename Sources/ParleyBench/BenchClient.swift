import ParleyCore
import ParleyIO
import ParleyWebSocket

private typealias Field = NativeProtocol.Field
private typealias MessageType = NativeProtocol.MessageType

/// What one bench connection is and does.
struct ClientSpec {
    /// Global connection index.
    let index: Int
    let room: Int
    let roomName: String
    /// This connection's publisher number, when it publishes.
    let publisher: Int?
    /// Publishers of this connection's room (their numbers are `room + k * rooms`).
    let publishersInRoom: Int
    let sourceHost: String?
    /// Which of the run's servers (``BenchLoop/urls``) this connection goes to.
    var urlIndex = 0
}

/// One connection of the bench: connects, speaks its door's join sequence, then receives
/// (and, for a publisher, sends) stamped messages. The WebSocket doors go through
/// ``WebSocketClientConnection``, whose decoder hands each message's payload straight from
/// the read buffer, so reading a stamp copies nothing; the line door is plain TCP.
/// Loop-confined.
final class BenchClient: ConnectionHandler, WebSocketClientDelegate {
    enum Stage { case connecting, joining, ready, closed }

    unowned let bench: BenchLoop
    let spec: ClientSpec
    private(set) var stage = Stage.connecting
    /// The line door's connection.
    var connection: TCPConnection?
    /// The WebSocket doors' connection.
    private var webSocket: WebSocketClientConnection?
    private let startedNanos: Int64
    private var lineCarry: [UInt8] = []
    /// Per publisher of the room (index k for publisher `room + k * rooms`).
    var trackers: [SequenceTracker]
    // publisher state
    private(set) var sent = 0
    var inFlight = 0
    private var publishPrefix: [UInt8] = []
    private var publishSuffix: [UInt8] = []
    private let joinedLine: [UInt8]

    init(bench: BenchLoop, spec: ClientSpec) {
        self.bench = bench
        self.spec = spec
        startedNanos = MonotonicTime.nanoseconds()
        trackers = Array(repeating: SequenceTracker(), count: spec.publishersInRoom)
        joinedLine = Array("m\(spec.index) has joined".utf8)
        switch bench.door {
        case .native:
            publishPrefix = Array("{\"\(Field.type)\":\"\(MessageType.publish)\",\"\(Field.room)\":\"\(spec.roomName)\",\"\(Field.message)\":\"".utf8)
            publishSuffix = Array("\"}".utf8)
        case .line:
            publishPrefix = Array("msg:".utf8)
            publishSuffix = [10]
        case .socketio:
            publishPrefix = Array("42[\"chatMessage\",\"p\(spec.publisher ?? 0)\",\"".utf8)
            publishSuffix = Array("\"]".utf8)
        }
    }

    // MARK: setup

    func start() {
        let url = bench.urls[spec.urlIndex]
        switch bench.door {
        case .line:
            bench.loop.connect(host: url.host, port: url.port, sourceHost: spec.sourceHost) { [self] result in
                switch result {
                case .failure(let error):
                    fail("connect: \(error.message)")
                case .success(let connection):
                    guard stage != .closed else { return }      // the run stopped meanwhile
                    self.connection = connection
                    connection.handler = self
                    connection.maxQueuedBytes = 64 << 20
                    stage = .joining
                    connection.write(Array("iam:m\(spec.index)\n".utf8))
                }
            }
        case .native, .socketio:
            var path = url.path
            if bench.door == .native && path.isEmpty { path = "/v3/websocket" }
            if bench.door == .socketio {
                if path.isEmpty || path == "/" { path = "/socket.io/" }
                path += (path.contains("?") ? "&" : "?") + "EIO=4&transport=websocket"
            }
            var options = WebSocketClientConnection.Options(host: url.host, port: url.port, target: path,
                                                            hostHeader: url.hostHeader)
            options.sourceHost = spec.sourceHost
            // The bench reads its stamps out of the payload and checks nothing else in it: no
            // UTF-8 validation, and masking keys that cost no system call (they protect no
            // intermediary on a benchmark's loopback).
            options.configuration = WebSocketConfiguration(
                maxMessageSize: 16 << 20, maxFrameSize: 16 << 20, offersDeflate: false, validatesUTF8: false,
                maskingKeys: .fastPseudoRandom(seed: UInt64(bitPattern: startedNanos) &+ UInt64(spec.index) &* 0x9E37_79B9_7F4A_7C15))
            options.maxQueuedBytes = 64 << 20
            // Only a server that accepts the connection and then hangs ever reaches this.
            options.openTimeoutMilliseconds = 60_000
            options.closeTimeoutMilliseconds = 1000
            let webSocket = WebSocketClientConnection(loop: bench.loop, options: options, delegate: self)
            self.webSocket = webSocket
            webSocket.connect()
        }
    }

    private func fail(_ message: String) {
        guard stage != .closed else { return }
        let wasReady = stage == .ready
        stage = .closed
        webSocket?.abort()
        connection?.close(flush: false)
        bench.clientFailed(self, wasReady: wasReady, message: message)
    }

    private func becameReady() {
        guard stage == .joining else { return }
        stage = .ready
        bench.clientReady(self, connectNanos: MonotonicTime.nanoseconds() - startedNanos)
    }

    // MARK: WebSocket doors

    func webSocketDidOpen(_ socket: WebSocketClientConnection) {
        guard stage == .connecting else { return }
        stage = .joining
        if bench.door == .native {
            sendText(Array("{\"\(Field.type)\":\"\(MessageType.handshake)\",\"\(Field.channel)\":\"\(bench.channel)\",\"\(Field.callback)\":0}".utf8))
            sendText(Array("{\"\(Field.type)\":\"\(MessageType.subscribe)\",\"\(Field.room)\":\"\(spec.roomName)\",\"\(Field.callback)\":1}".utf8))
        }
    }

    func webSocket(_ socket: WebSocketClientConnection, didReceive kind: WebSocketMessageKind, payload: UnsafeRawBufferPointer) {
        message(payload)
    }

    func webSocket(_ socket: WebSocketClientConnection, didFailToOpen error: WebSocketClientError) {
        webSocket = nil     // the connection holds this client for life: break the cycle
        fail(error.code == .connectFailed ? "connect: \(error.message)" : "handshake: \(error.message)")
    }

    func webSocketDidClose(_ socket: WebSocketClientConnection, code: UInt16, reason: String) {
        webSocket = nil
        closedByServer(code == WebSocketCloseCode.abnormal.rawValue
                       ? "connection closed by the server" : "close frame from the server (\(code) \(reason))")
    }

    // MARK: line door

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard stage == .joining || stage == .ready else { return }
        readLines(bytes)
    }

    private func readLines(_ bytes: UnsafeRawBufferPointer) {
        var start = 0
        for i in 0..<bytes.count where bytes[i] == 10 {
            if lineCarry.isEmpty {
                message(UnsafeRawBufferPointer(rebasing: bytes[start..<i]))
            } else {
                lineCarry.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<i]))
                let line = lineCarry
                lineCarry = []
                line.withUnsafeBytes { message($0) }
            }
            start = i + 1
        }
        if start < bytes.count { lineCarry.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start...])) }
    }

    /// What marks a native reply as an error, and the reply to the subscribe (callback 1).
    private static let errorMarker = Array("\"\(Field.error)\"".utf8)
    private static let subscribedMarker = Array("\"\(Field.callback)\":1".utf8)

    /// One text message (WebSocket doors) or line (line door).
    private func message(_ payload: UnsafeRawBufferPointer) {
        guard stage != .closed else { return }
        if let stamp = BenchPayload.find(in: payload) {
            bench.delivered(stamp, to: self)
            return
        }
        switch bench.door {
        case .native:
            if contains(payload, Self.errorMarker) {
                bench.serverError(String(decoding: payload.prefix(200), as: UTF8.self))
                if stage == .joining { fail("join: server answered with an error") }
            } else if stage == .joining && contains(payload, Self.subscribedMarker) {
                becameReady()
            }
        case .line:
            if payload.starts(with: "error:".utf8) {
                bench.serverError(String(decoding: payload.prefix(200), as: UTF8.self))
            } else if stage == .joining && payload.elementsEqual(joinedLine) {
                becameReady()
            }
        case .socketio:
            guard let first = payload.first else { return }
            switch first {
            case UInt8(ascii: "0"):
                sendText(Array("40".utf8))
            case UInt8(ascii: "2"):
                sendText(Array("3".utf8))
            case UInt8(ascii: "1"):
                if !bench.stopping { fail("Engine.IO close packet") }
            case UInt8(ascii: "4"):
                let kind = payload.count > 1 ? payload[1] : 0
                if kind == UInt8(ascii: "0") && stage == .joining {
                    // Every SocketChat user identifies itself first (servers such as Parley
                    // deliver chat only to identified users; the original sends to everyone).
                    if spec.publisher != nil || bench.identifySocketIOMembers {
                        let name = spec.publisher.map { "p\($0)" } ?? "m\(spec.index)"
                        sendText(Array("42[\"connectUser\",\"\(name)\"]".utf8))
                    }
                    becameReady()
                } else if kind == UInt8(ascii: "4") || kind == UInt8(ascii: "1") {
                    bench.serverError(String(decoding: payload.prefix(200), as: UTF8.self))
                    if stage == .joining { fail("join: Socket.IO connect refused") }
                }
            default:
                break
            }
        }
    }

    // MARK: writing

    private func sendText(_ payload: [UInt8]) {
        payload.withUnsafeBytes { webSocket?.sendText(utf8: $0) }
    }

    /// Sends the next stamped message (publishers only).
    func publish(size: Int) {
        guard stage == .ready, let publisher = spec.publisher else { return }
        if bench.door == .line {
            guard let connection, connection.state == .open else { return }
        } else {
            guard webSocket?.canSend == true else { return }
        }
        var body = publishPrefix
        body.append(contentsOf: BenchPayload.make(publisher: publisher, sequence: sent, sentNanos: MonotonicTime.nanoseconds(), size: size))
        body.append(contentsOf: publishSuffix)
        sent += 1
        inFlight += 1
        if bench.door == .line {
            connection?.write(body)
        } else {
            sendText(body)
        }
    }

    // MARK: closing

    /// The server ended the connection (close frame or TCP); a failure unless the run is stopping.
    private func closedByServer(_ why: String) {
        guard stage != .closed else { return }
        if bench.stopping {
            stage = .closed
            return
        }
        fail(why)
    }

    func close() {
        stage = .closed
        webSocket?.abort()
        connection?.close(flush: false)
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        closedByServer("connection closed by the server (\(reason))")
    }
}
