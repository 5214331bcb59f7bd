// autobahn-client: drives Parley's WebSocket client (WebSocketClientConnection: the client
// handshake and a client-role WebSocketProtocolMachine over ParleyIO) against the
// Autobahn|Testsuite fuzzing server: getCaseCount, then runCase for every case (echoing every
// message), then updateReports. Used by `make conformance`; not part of the `parley` CLI.
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

/// One case's connection: hands messages and the end to closures. Loop-confined.
final class CaseConnection: WebSocketClientDelegate {
    private let onMessage: (WebSocketClientConnection, WebSocketMessageKind, UnsafeRawBufferPointer) -> Void
    private let onClose: (WebSocketClientError?) -> Void

    init(onMessage: @escaping (WebSocketClientConnection, WebSocketMessageKind, UnsafeRawBufferPointer) -> Void,
         onClose: @escaping (WebSocketClientError?) -> Void) {
        self.onMessage = onMessage
        self.onClose = onClose
    }

    func webSocketDidOpen(_ socket: WebSocketClientConnection) {}

    func webSocket(_ socket: WebSocketClientConnection, didReceive kind: WebSocketMessageKind, payload: UnsafeRawBufferPointer) {
        onMessage(socket, kind, payload)
    }

    func webSocket(_ socket: WebSocketClientConnection, didFailToOpen error: WebSocketClientError) {
        onClose(error)
    }

    func webSocketDidClose(_ socket: WebSocketClientConnection, code: UInt16, reason: String) {
        onClose(nil)
    }
}

/// Runs the whole sequence on one loop, one connection at a time.
final class AutobahnRun {
    let loop: EventLoop
    let options: Options
    let done: DispatchSemaphore
    private(set) var exitCode: Int32 = 0
    private var caseCount = 0
    private var current: WebSocketClientConnection?

    init(loop: EventLoop, options: Options, done: DispatchSemaphore) {
        self.loop = loop
        self.options = options
        self.done = done
    }

    func start() {
        open("/getCaseCount", deflate: false, onMessage: { [unowned self] _, kind, payload in
            if kind == .text { caseCount = Int(String(decoding: payload, as: UTF8.self)) ?? 0 }
        }, onClose: { [unowned self] in
            guard caseCount > 0 else { return finish("could not read the case count", code: 1) }
            log("fuzzing server has \(caseCount) cases")
            let cases = (options.cases ?? Array(1...caseCount)).filter { (1...caseCount).contains($0) }
            run(cases[...])
        })
    }

    private func run(_ cases: ArraySlice<Int>) {
        guard let number = cases.first else { return updateReports() }
        open("/runCase?case=\(number)&agent=\(options.agent)", deflate: options.deflate, onMessage: { socket, kind, payload in
            switch kind {
            case .text: socket.sendText(utf8: payload)
            case .binary: socket.sendBinary(payload)
            }
        }, onClose: { [unowned self] in
            if number % 50 == 0 || number == cases.last { log("ran case \(number)/\(caseCount)") }
            run(cases.dropFirst())
        })
    }

    private func updateReports() {
        open("/updateReports?agent=\(options.agent)", deflate: false, onMessage: { _, _, _ in }, onClose: { [unowned self] in
            log("reports updated")
            finish(nil, code: 0)
        })
    }

    private func finish(_ error: String?, code: Int32) {
        if let error { log("autobahn-client: \(error)") }
        exitCode = code
        done.signal()
    }

    private func open(_ path: String, deflate: Bool,
                      onMessage: @escaping (WebSocketClientConnection, WebSocketMessageKind, UnsafeRawBufferPointer) -> Void,
                      onClose: @escaping () -> Void) {
        let host = options.host, port = options.port
        var socketOptions = WebSocketClientConnection.Options(host: host, port: port, target: path)
        socketOptions.configuration = WebSocketConfiguration(maxMessageSize: 64 << 20, maxFrameSize: 64 << 20, offersDeflate: deflate)
        socketOptions.maxQueuedBytes = 256 << 20
        // RFC 6455 §7.1.1: the server closes TCP first; wait a moment for that.
        socketOptions.closeTimeoutMilliseconds = 1000
        let delegate = CaseConnection(onMessage: onMessage, onClose: { [unowned self] error in
            current = nil
            if let error, error.code == .connectFailed {
                return finish("connect to \(host):\(port) failed: \(error.message)", code: 1)
            }
            if let error { log("handshake failed: \(error.message)") }
            onClose()
        })
        let socket = WebSocketClientConnection(loop: loop, options: socketOptions, delegate: delegate)
        current = socket
        socket.connect()
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
