// autobahn-client: drives Parley's client-side WebSocket codec (a client-role
// WebSocketProtocolMachine over ParleyIO's EventLoop.connect) against the Autobahn|Testsuite
// fuzzing server: getCaseCount, then runCase for every case (echoing every message), then
// updateReports. Used by `make conformance`; not part of the `parley` CLI.
//
//   autobahn-client [--host 127.0.0.1] [--port 9001] [--agent parley] [--cases N,M-K] [--no-deflate]

import Foundation
import ParleyIO
import ParleyWebSocket

struct Options {
    var host = "127.0.0.1"
    var port = 9001
    var agent = "parley"
    var cases: [Int]?
    var deflate = true

    static func parse(_ arguments: [String]) -> Options {
        var options = Options()
        var index = 0
        func value() -> String {
            index += 1
            guard index < arguments.count else { usage("\(arguments[index - 1]) needs a value") }
            return arguments[index]
        }
        while index < arguments.count {
            switch arguments[index] {
            case "--host": options.host = value()
            case "--port": options.port = Int(value()) ?? { usage("bad --port") }()
            case "--agent": options.agent = value()
            case "--no-deflate": options.deflate = false
            case "--cases":
                var list: [Int] = []
                for part in value().split(separator: ",") {
                    let bounds = part.split(separator: "-").compactMap { Int($0) }
                    guard let first = bounds.first else { usage("bad --cases") }
                    list += Array(first...(bounds.last ?? first))
                }
                options.cases = list
            case "--help", "-h": usage(nil)
            default: usage("unknown option \(arguments[index])")
            }
            index += 1
        }
        return options
    }
}

func usage(_ error: String?) -> Never {
    let text = "usage: autobahn-client [--host ADDR] [--port PORT] [--agent NAME] [--cases 1,5-9] [--no-deflate]\n"
    if let error {
        FileHandle.standardError.write(Data("autobahn-client: \(error)\n\(text)".utf8))
        exit(2)
    }
    FileHandle.standardOutput.write(Data(text.utf8))
    exit(0)
}

func log(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// One client WebSocket connection: the opening handshake, then the protocol machine.
/// Loop-confined.
final class ClientWebSocket: ConnectionHandler {
    let connection: TCPConnection
    private let key = WebSocketHandshake.makeClientKey()
    private let offerDeflate: Bool
    private var head: [UInt8] = []
    private var machine: WebSocketProtocolMachine?
    private let onMessage: (ClientWebSocket, WebSocketAction) -> Void
    private let onClose: () -> Void
    private var closeTimer: LoopTimer?

    init(connection: TCPConnection, host: String, port: Int, path: String, offerDeflate: Bool,
         onMessage: @escaping (ClientWebSocket, WebSocketAction) -> Void, onClose: @escaping () -> Void) {
        self.connection = connection
        self.offerDeflate = offerDeflate
        self.onMessage = onMessage
        self.onClose = onClose
        connection.maxQueuedBytes = 256 << 20
        connection.write(WebSocketHandshake.clientRequest(host: "\(host):\(port)", path: path, key: key,
                                                          offerDeflate: offerDeflate))
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        if let machine {
            machine.receive(bytes) { perform($0) }
            return
        }
        head.append(contentsOf: bytes)
        guard let end = headEnd() else {
            if head.count > 64 << 10 { connection.close(flush: false) }
            return
        }
        let text = String(decoding: head[..<end], as: UTF8.self)
        let leftover = Array(head[end...])
        head = []
        var lines = text.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        let status = statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0
        var headers: [(String, String)] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]).lowercased(),
                            line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        do {
            let deflate = try WebSocketHandshake.validateServerResponse(status: status, header: { name in
                let values = headers.filter { $0.0 == name.lowercased() }.map(\.1)
                return values.isEmpty ? nil : values.joined(separator: ", ")
            }, key: key, offeredDeflate: offerDeflate)
            let configuration = WebSocketConfiguration(maxMessageSize: 64 << 20, maxFrameSize: 64 << 20)
            let machine = WebSocketProtocolMachine(role: .client, configuration: configuration, deflate: deflate)
            self.machine = machine
            if !leftover.isEmpty { machine.receive(leftover) { perform($0) } }
        } catch {
            log("handshake failed: \(error)")
            connection.close(flush: false)
        }
    }

    private func headEnd() -> Int? {
        guard head.count >= 4 else { return nil }
        for i in 0...(head.count - 4)
        where head[i] == 13 && head[i + 1] == 10 && head[i + 2] == 13 && head[i + 3] == 10 {
            return i + 4
        }
        return nil
    }

    private func perform(_ action: WebSocketAction) {
        do {
            guard connection.state == .open else { return }
            switch action {
            case .send(let bytes):
                if !bytes.isEmpty { connection.write(bytes) }
            case .closeConnection:
                // RFC 6455 §7.1.1: the server should close TCP first; a client waits a moment
                // for that before closing itself.
                let timer = LoopTimer(loop: connection.loop)
                closeTimer = timer
                timer.start(after: 1000) { [weak self] in self?.connection.close() }
            case .text, .binary, .peerClosed:
                onMessage(self, action)
            }
        }
    }

    func sendText(_ text: String) { write(machine?.sendText(text) ?? []) }
    func sendBinary(_ bytes: [UInt8]) { write(machine?.sendBinary(bytes) ?? []) }

    private func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty, connection.state == .open else { return }
        connection.write(bytes)
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        closeTimer?.stop()
        closeTimer = nil
        onClose()
    }
}

/// Runs the whole sequence on one loop, one connection at a time.
final class AutobahnRun {
    let loop: EventLoop
    let options: Options
    let done: DispatchSemaphore
    private(set) var exitCode: Int32 = 0
    private var caseCount = 0
    private var current: ClientWebSocket?

    init(loop: EventLoop, options: Options, done: DispatchSemaphore) {
        self.loop = loop
        self.options = options
        self.done = done
    }

    func start() {
        open("/getCaseCount", deflate: false, onMessage: { [unowned self] _, action in
            if case .text(let text) = action { caseCount = Int(text) ?? 0 }
        }, onClose: { [unowned self] in
            guard caseCount > 0 else { return finish("could not read the case count", code: 1) }
            log("fuzzing server has \(caseCount) cases")
            let cases = (options.cases ?? Array(1...caseCount)).filter { (1...caseCount).contains($0) }
            run(cases[...])
        })
    }

    private func run(_ cases: ArraySlice<Int>) {
        guard let number = cases.first else { return updateReports() }
        open("/runCase?case=\(number)&agent=\(options.agent)", deflate: options.deflate, onMessage: { socket, action in
            switch action {
            case .text(let text): socket.sendText(text)
            case .binary(let bytes): socket.sendBinary(bytes)
            default: break
            }
        }, onClose: { [unowned self] in
            if number % 50 == 0 || number == cases.last { log("ran case \(number)/\(caseCount)") }
            run(cases.dropFirst())
        })
    }

    private func updateReports() {
        open("/updateReports?agent=\(options.agent)", deflate: false, onMessage: { _, _ in }, onClose: { [unowned self] in
            log("reports updated")
            finish(nil, code: 0)
        })
    }

    private func finish(_ error: String?, code: Int32) {
        if let error { log("autobahn-client: \(error)") }
        exitCode = code
        done.signal()
    }

    private func open(_ path: String, deflate: Bool, onMessage: @escaping (ClientWebSocket, WebSocketAction) -> Void,
                      onClose: @escaping () -> Void) {
        let host = options.host, port = options.port
        loop.connect(host: host, port: port) { [unowned self] result in
            switch result {
            case .failure(let error):
                finish("connect to \(host):\(port) failed: \(error)", code: 1)
            case .success(let connection):
                let socket = ClientWebSocket(connection: connection, host: host, port: port, path: path,
                                             offerDeflate: deflate, onMessage: onMessage, onClose: { [unowned self] in
                    current = nil
                    onClose()
                })
                current = socket
                connection.handler = socket
            }
        }
    }
}

/// Hands the run between the main thread and the loop; only touched on the loop after start.
final class RunBox: @unchecked Sendable {
    var run: AutobahnRun?
}

func runAutobahnClient() -> Int32 {
    let options = Options.parse(Array(CommandLine.arguments.dropFirst()))
    let group = EventLoopGroup(loopCount: 1)
    let loop = group.loops[0]
    let done = DispatchSemaphore(value: 0)
    let box = RunBox()
    loop.execute {
        let run = AutobahnRun(loop: loop, options: options, done: done)
        box.run = run
        run.start()
    }
    done.wait()
    let code = box.run?.exitCode ?? 1
    group.shutdown()
    return code
}

exit(runAutobahnClient())
