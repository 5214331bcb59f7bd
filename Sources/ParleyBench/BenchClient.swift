import ParleyIO
import ParleyWebSocket

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
}

/// One connection of the bench: connects, speaks its door's join sequence, then receives
/// (and, for a publisher, sends) stamped messages. Loop-confined.
final class BenchClient: ConnectionHandler {
    enum Stage { case connecting, upgrading, joining, ready, closed }

    unowned let bench: BenchLoop
    let spec: ClientSpec
    private(set) var stage = Stage.connecting
    var connection: TCPConnection?
    private let startedNanos: Int64
    private var webSocketKey = ""
    private var head: [UInt8] = []
    private var frames = ServerFrameReader()
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
        startedNanos = monotonicNanos()
        trackers = Array(repeating: SequenceTracker(), count: spec.publishersInRoom)
        joinedLine = Array("m\(spec.index) has joined".utf8)
        switch bench.door {
        case .native:
            publishPrefix = Array("{\"type\":\"publish\",\"room\":\"\(spec.roomName)\",\"message\":\"".utf8)
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
        bench.loop.connect(host: bench.url.host, port: bench.url.port, sourceHost: spec.sourceHost) { [self] result in
            switch result {
            case .failure(let error):
                fail("connect: \(error.message)")
            case .success(let connection):
                self.connection = connection
                connection.handler = self
                connection.maxQueuedBytes = 64 << 20
                switch bench.door {
                case .line:
                    stage = .joining
                    connection.write(Array("iam:m\(spec.index)\n".utf8))
                case .native, .socketio:
                    stage = .upgrading
                    webSocketKey = WebSocketHandshake.makeClientKey()
                    var path = bench.url.path
                    if bench.door == .native && path.isEmpty { path = "/v3/websocket" }
                    if bench.door == .socketio {
                        if path.isEmpty || path == "/" { path = "/socket.io/" }
                        path += (path.contains("?") ? "&" : "?") + "EIO=4&transport=websocket"
                    }
                    connection.write(WebSocketHandshake.clientRequest(host: bench.url.hostHeader, path: path,
                                                                      key: webSocketKey, offerDeflate: false))
                }
            }
        }
    }

    private func fail(_ message: String) {
        guard stage != .closed else { return }
        let wasReady = stage == .ready
        stage = .closed
        connection?.close(flush: false)
        bench.clientFailed(self, wasReady: wasReady, message: message)
    }

    private func becameReady() {
        guard stage == .joining else { return }
        stage = .ready
        bench.clientReady(self, connectNanos: monotonicNanos() - startedNanos)
    }

    // MARK: reading

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        switch stage {
        case .connecting, .closed:
            return
        case .upgrading:
            readHandshake(bytes)
        case .joining, .ready:
            if bench.door == .line { readLines(bytes) } else { readFrames(bytes) }
        }
    }

    private func readHandshake(_ bytes: UnsafeRawBufferPointer) {
        head.append(contentsOf: bytes)
        guard let end = findHeadEnd(head) else {
            if head.count > 16 * 1024 { fail("handshake: response head too long") }
            return
        }
        let text = String(decoding: head[..<end], as: UTF8.self)
        let rest = Array(head[(end + 4)...])
        head = []
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let statusLine = lines.isEmpty ? "" : lines.removeFirst()
        let parts = statusLine.split(separator: " ")
        let status = parts.count >= 2 ? Int(parts[1]) ?? 0 : 0
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
        }
        do {
            _ = try WebSocketHandshake.validateServerResponse(status: status, header: { headers[$0.lowercased()] },
                                                              key: webSocketKey, offeredDeflate: false)
        } catch {
            fail("handshake: \(error.message)")
            return
        }
        stage = .joining
        if bench.door == .native {
            sendText(Array("{\"type\":\"handshake\",\"channel\":\"\(bench.channel)\",\"callback\":0}".utf8))
            sendText(Array("{\"type\":\"subscribe\",\"room\":\"\(spec.roomName)\",\"callback\":1}".utf8))
        }
        if !rest.isEmpty { rest.withUnsafeBytes { readFrames($0) } }
    }

    private func findHeadEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
    }

    private func readFrames(_ bytes: UnsafeRawBufferPointer) {
        let ok = frames.feed(bytes) { opcode, payload in
            switch opcode {
            case 1, 2: message(payload)
            case 8: if stage != .closed { closedByPeer("close frame from the server") }
            case 9: sendFrame(opcode: .pong, payload: Array(payload))
            default: break
            }
        }
        if !ok { fail("protocol: invalid frame from the server") }
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

    /// One text message (WebSocket doors) or line (line door).
    private func message(_ payload: UnsafeRawBufferPointer) {
        guard stage != .closed else { return }
        if let stamp = BenchPayload.find(in: payload) {
            bench.delivered(stamp, to: self)
            return
        }
        switch bench.door {
        case .native:
            if contains(payload, "\"error\"") {
                bench.serverError(String(decoding: payload.prefix(200), as: UTF8.self))
                if stage == .joining { fail("join: server answered with an error") }
            } else if stage == .joining && contains(payload, "\"callback\":1") {
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
                closedByPeer("Engine.IO close packet")
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

    private func sendFrame(opcode: WebSocketOpcode, payload: [UInt8]) {
        guard let connection, connection.state == .open else { return }
        connection.write(WebSocketFrameEncoder.encode(opcode: opcode, payload: payload, maskingKey: bench.maskKeys.next()))
    }

    private func sendText(_ payload: [UInt8]) { sendFrame(opcode: .text, payload: payload) }

    /// Sends the next stamped message (publishers only).
    func publish(size: Int) {
        guard stage == .ready, let publisher = spec.publisher, let connection, connection.state == .open else { return }
        var body = publishPrefix
        body.append(contentsOf: BenchPayload.make(publisher: publisher, sequence: sent, sentNanos: monotonicNanos(), size: size))
        body.append(contentsOf: publishSuffix)
        sent += 1
        inFlight += 1
        if bench.door == .line {
            connection.write(body)
        } else {
            sendText(body)
        }
    }

    // MARK: closing

    private func closedByPeer(_ why: String) {
        if !bench.stopping { fail(why) }
    }

    func close() {
        stage = .closed
        connection?.close(flush: false)
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        guard stage != .closed else { return }
        if bench.stopping {
            stage = .closed
            return
        }
        fail("connection closed by the server (\(reason))")
    }
}
