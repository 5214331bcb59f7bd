import Foundation
import ParleyCore
import ParleyIO
import ParleyWebSocket
import Synchronization

private typealias Field = NativeProtocol.Field
private typealias MessageType = NativeProtocol.MessageType

/// `parley bench publish-durable`: N native-protocol publishers, each keeping a window of
/// publishes with callbacks in flight, counting receipts (which the server sends only once a
/// message is durable) and timing each from send to receipt. A libuv load generator on the
/// shared WebSocket client (``WebSocketClientConnection``).
public enum DurablePublishBench {
    public struct Options: Sendable {
        var host = "127.0.0.1"
        var port = 8080
        var path = "/v3/websocket"
        var publishers = 100
        var durationSeconds = 10.0
        var window = 32
        var rooms = 1
        var loops = 1
        var payloadBytes = 64
        /// One JSON object instead of the text report.
        var json = false
    }

    public static let usage = """
    usage: parley bench publish-durable --url ws://HOST:PORT/v3/websocket [options]

      --publishers N   concurrent connections publishing (default 100)
      --duration S     seconds to measure after all are connected (default 10)
      --window N       publishes in flight per connection (default 32)
      --rooms N        rooms the publishers spread over (default 1: one room, strictest order)
      --loops N        client event loops (default 1)
      --payload BYTES  message text size (default 64)
      --json           print one JSON object (acked_per_s, latency_ms p50/p99, errors, ok)

    Start the server with a high per-connection rate, e.g. parley serve --publish-rate 1000000.
    """

    public static func parse(_ arguments: [String]) throws -> Options {
        var options = Options(), index = 0
        func value() throws -> String {
            index += 1
            guard index < arguments.count else { throw BenchError("\(arguments[index - 1]) needs a value") }
            return arguments[index]
        }
        func number(_ text: String) throws -> Int {
            guard let n = Int(text), n > 0 else { throw BenchError("expected a positive number, got \(text)") }
            return n
        }
        while index < arguments.count {
            switch arguments[index] {
            case "--url":
                let url = try value()
                guard let parsed = URLComponents(string: url), parsed.scheme == "ws", let host = parsed.host else {
                    throw BenchError("--url must look like ws://HOST:PORT/v3/websocket")
                }
                options.host = host
                options.port = parsed.port ?? 80
                options.path = parsed.path.isEmpty ? "/" : parsed.path
            case "--publishers": options.publishers = try number(try value())
            case "--duration": options.durationSeconds = Double(try number(try value()))
            case "--window": options.window = try number(try value())
            case "--rooms": options.rooms = try number(try value())
            case "--loops": options.loops = try number(try value())
            case "--payload": options.payloadBytes = try number(try value())
            case "--json": options.json = true
            case "--help", "-h": throw BenchError(usage)
            default: throw BenchError("unknown option \(arguments[index])\n\n\(usage)")
            }
            index += 1
        }
        return options
    }

    struct BenchError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Shared by every publisher: whether to keep sending, and the results.
    final class Run: Sendable {
        let measuring = Atomic<Bool>(false)
        let stopping = Atomic<Bool>(false)
        let connected = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
        let errors = Atomic<Int>(0)
        let acked = Atomic<Int>(0)
        let latencies = Mutex<[UInt32]>([])
        let firstError = Mutex<String?>(nil)
    }

    /// Runs the bench; the report's first line says FAILED when any publisher failed, any
    /// publish was refused, or nothing was acknowledged (the bench never lies), and `ok` is
    /// false then.
    public static func run(_ options: Options) -> (report: String, ok: Bool) {
        let group = EventLoopGroup(loopCount: options.loops)
        let run = Run()
        for index in 0..<options.publishers {
            let loop = group.loops[index % group.loops.count]
            let room = "bench-\(index % options.rooms)"
            loop.execute {
                Publisher(loop: loop, options: options, room: room, run: run).start()
            }
        }
        let connectDeadline = Date().addingTimeInterval(30)
        while run.connected.load(ordering: .relaxed) + run.failed.load(ordering: .relaxed) < options.publishers,
              Date() < connectDeadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        // A second of warm-up, then measure.
        Thread.sleep(forTimeInterval: 1)
        run.measuring.store(true, ordering: .relaxed)
        let start = Date()
        let before = run.acked.load(ordering: .relaxed)
        Thread.sleep(forTimeInterval: options.durationSeconds)
        let acked = run.acked.load(ordering: .relaxed) - before
        let elapsed = Date().timeIntervalSince(start)
        run.measuring.store(false, ordering: .relaxed)
        run.stopping.store(true, ordering: .relaxed)
        Thread.sleep(forTimeInterval: 0.2)
        group.shutdown()
        var latencies = run.latencies.withLock { $0 }
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            guard !latencies.isEmpty else { return 0 }
            return Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) / 1000
        }
        var lines = [
            "publish-durable: \(run.connected.load(ordering: .relaxed)) publishers connected (\(run.failed.load(ordering: .relaxed)) failed), window \(options.window), \(options.rooms) room(s), \(options.payloadBytes)-byte messages",
            String(format: "acknowledged: %d in %.1f s = %.0f msgs/s", acked, elapsed, Double(acked) / elapsed),
            String(format: "time to ack: p50 %.2f ms, p99 %.2f ms (%d samples)", percentile(0.5), percentile(0.99), latencies.count),
        ]
        let errors = run.errors.load(ordering: .relaxed)
        let failed = run.failed.load(ordering: .relaxed)
        if errors > 0 || run.firstError.withLock({ $0 }) != nil {
            lines.append("errors: \(errors); first: \(run.firstError.withLock { $0 } ?? "-")")
        }
        let ok = errors == 0 && failed == 0 && acked > 0
        if !ok {
            lines.insert("FAILED: \(failed) publishers failed to connect, \(errors) errors, \(acked) acknowledged", at: 0)
        }
        if options.json {
            var w = JSONWriter()
            w.beginObject()
            w.key("ok"); w.writeBool(ok)
            w.key("acked_per_s"); w.writeDouble(elapsed > 0 ? Double(acked) / elapsed : 0, digits: 1)
            w.key("acked"); w.writeInt(acked)
            w.key("latency_ms"); w.beginObject()
            w.key("p50"); w.writeDouble(percentile(0.5)); w.key("p99"); w.writeDouble(percentile(0.99))
            w.key("count"); w.writeInt(latencies.count)
            w.endObject()
            w.key("connected"); w.writeInt(run.connected.load(ordering: .relaxed))
            w.key("failed"); w.writeInt(failed)
            w.key("errors"); w.writeInt(errors)
            w.key("error_samples"); w.beginArray()
            if let first = run.firstError.withLock({ $0 }) { w.writeString(first) }
            w.endArray()
            w.key("scenario"); w.beginObject()
            w.key("url"); w.writeString("\(options.host):\(options.port)\(options.path)")
            w.key("publishers"); w.writeInt(options.publishers)
            w.key("window"); w.writeInt(options.window)
            w.key("rooms"); w.writeInt(options.rooms)
            w.key("payload"); w.writeInt(options.payloadBytes)
            w.key("duration_s"); w.writeDouble(options.durationSeconds)
            w.endObject()
            w.endObject()
            return (String(decoding: w.bytes, as: UTF8.self), ok)
        }
        return (lines.joined(separator: "\n"), ok)
    }

    /// One publishing connection; lives on its loop.
    final class Publisher: WebSocketClientDelegate {
        let options: Options
        let room: String
        let run: Run
        private let loop: EventLoop
        private var socket: WebSocketClientConnection?
        private var handshaken = false
        private var nextCallback = 1
        private var sentAt: [Int: UInt64] = [:]
        private var latencies: [UInt32] = []
        private let text: String

        init(loop: EventLoop, options: Options, room: String, run: Run) {
            self.loop = loop
            self.options = options
            self.room = room
            self.run = run
            text = String(repeating: "x", count: options.payloadBytes)
        }

        func start() {
            var socketOptions = WebSocketClientConnection.Options(host: options.host, port: options.port, target: options.path)
            socketOptions.configuration = WebSocketConfiguration(offersDeflate: false)
            socketOptions.openTimeoutMilliseconds = 30_000
            let socket = WebSocketClientConnection(loop: loop, options: socketOptions, delegate: self)
            self.socket = socket
            socket.connect()
        }

        func webSocketDidOpen(_ socket: WebSocketClientConnection) {
            send(#"{"\#(Field.type)":"\#(MessageType.handshake)","\#(Field.channel)":"demo","\#(Field.callback)":0}"#)
        }

        func webSocket(_ socket: WebSocketClientConnection, didReceive kind: WebSocketMessageKind, payload: UnsafeRawBufferPointer) {
            if kind == .text { received(String(decoding: payload, as: UTF8.self)) }
        }

        func webSocket(_ socket: WebSocketClientConnection, didFailToOpen error: WebSocketClientError) {
            run.failed.add(1, ordering: .relaxed)
            let message = error.code == .connectFailed ? "connect: \(error.message)" : "upgrade refused: \(error.message)"
            run.firstError.withLock { $0 = $0 ?? message }
            self.socket = nil   // the connection holds this publisher for life: break the cycle
        }

        func webSocketDidClose(_ socket: WebSocketClientConnection, code: UInt16, reason: String) {
            flushLatencies()
            self.socket = nil
        }

        private func received(_ reply: String) {
            if !handshaken {
                handshaken = true
                run.connected.add(1, ordering: .relaxed)
                for _ in 0..<options.window { publish() }
                return
            }
            guard let callback = Self.callback(in: reply) else { return }
            if reply.contains(#""\#(Field.error)""#) {
                run.errors.add(1, ordering: .relaxed)
                run.firstError.withLock { $0 = $0 ?? reply }
            } else if let sent = sentAt.removeValue(forKey: callback), run.measuring.load(ordering: .relaxed) {
                run.acked.add(1, ordering: .relaxed)
                latencies.append(UInt32(min(UInt64(UInt32.max), (UInt64(MonotonicTime.nanoseconds()) - sent) / 1000)))
                if latencies.count >= 1024 { flushLatencies() }
            }
            sentAt[callback] = nil
            if !run.stopping.load(ordering: .relaxed) { publish() } else { flushLatencies() }
        }

        private func flushLatencies() {
            let batch = latencies
            latencies.removeAll(keepingCapacity: true)
            run.latencies.withLock { $0 += batch }
        }

        private func publish() {
            let callback = nextCallback
            nextCallback += 1
            sentAt[callback] = UInt64(MonotonicTime.nanoseconds())
            send(#"{"\#(Field.type)":"\#(MessageType.publish)","\#(Field.room)":"\#(room)","\#(Field.message)":"\#(text)","\#(Field.callback)":\#(callback)}"#)
        }

        private func send(_ json: String) {
            socket?.sendText(json)
        }

        /// The reply's `"callback":N`, read without a full JSON parse (the client must stay cheap).
        static func callback(in reply: String) -> Int? {
            var utf8 = reply.utf8[...]
            guard let range = reply.utf8.firstRange(of: #""\#(Field.callback)":"#.utf8) else { return nil }
            utf8 = utf8[range.upperBound...]
            var value = 0, digits = 0
            for byte in utf8 {
                guard byte >= 48 && byte <= 57 else { break }
                value = value * 10 + Int(byte - 48)
                digits += 1
            }
            return digits > 0 ? value : nil
        }
    }
}
