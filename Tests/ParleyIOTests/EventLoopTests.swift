import Foundation
import Synchronization
import Testing
@testable import ParleyIO
import ParleyTestSupport

/// Echoes every read back and counts closes.
final class EchoHandler: ConnectionHandler {
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        connection.write(Array(bytes))
    }
    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {}
}


@Suite struct EventLoopTests {
    @Test func executeRunsTasksInOrderOnTheLoopThread() async throws {
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let loop = group.loops[1]
        let seen = Locked<[Int]>([])
        let onLoop = Locked<Bool>(true)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            for i in 0..<1000 {
                loop.execute {
                    if !loop.inEventLoop { onLoop.withLock { $0 = false } }
                    seen.withLock { $0.append(i) }
                    if i == 999 { done.resume() }
                }
            }
        }
        #expect(seen.value == Array(0..<1000))
        #expect(onLoop.value)
        #expect(!loop.inEventLoop)
    }

    @Test func timersFireAfterTheirDelay() async throws {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let start = ContinuousClock.now
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute { loop.schedule(after: 50) { done.resume() } }
        }
        #expect(ContinuousClock.now - start >= .milliseconds(45))
    }

    @Test func stoppedTimerDoesNotFire() async throws {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let fired = Locked(false)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute {
                let timer = LoopTimer(loop: loop)
                timer.start(after: 20, keepAlive: true) { fired.withLock { $0 = true } }
                timer.stop()
                loop.schedule(after: 80) { done.resume() }
            }
        }
        #expect(!fired.value)
    }

    @Test func echoServerSpreadsConnectionsOverLoops() async throws {
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let loopsUsed = Locked<Set<Int>>([])
        let listener = try TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { connection in
            loopsUsed.withLock { _ = $0.insert(connection.loop.index) }
            connection.handler = EchoHandler()
        }
        defer { listener.close() }
        #expect(listener.port > 0)
        var sockets: [TestSocket] = []
        for i in 0..<20 {
            let socket = try TestSocket(port: listener.port)
            try socket.send("hello \(i)\n")
            sockets.append(socket)
        }
        for (i, socket) in sockets.enumerated() {
            #expect(try socket.readLine() == "hello \(i)")
        }
        #expect(loopsUsed.value == [0, 1])
    }

    @Test func largeEchoArrivesIntact() async throws {
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let listener = try TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { connection in
            connection.handler = EchoHandler()
        }
        defer { listener.close() }
        let socket = try TestSocket(port: listener.port)
        let payload = (0..<(2 << 20)).map { UInt8(truncatingIfNeeded: $0 % 251) } + [10]
        // A real thread: blocking I/O must not occupy the small concurrency pool.
        let sender = BackgroundThread { (try? socket.send(payload)) != nil }
        var received = 0
        let deadline = Date().addingTimeInterval(30)
        while received < payload.count && Date() < deadline {
            try socket.fill(timeout: 0.5)
            received = socket.buffered.count
        }
        #expect(try sender.result(timeout: 30))
        // Compare as a Bool: a failing #expect on two 2 MiB arrays would compute a huge diff.
        let intact = socket.buffered == payload
        #expect(received == payload.count)
        #expect(intact)
    }

    @Test func readerThatNeverReadsIsCutOff() async throws {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let closed = Locked<ConnectionCloseReason?>(nil)
        final class Recorder: ConnectionHandler {
            let closed: Locked<ConnectionCloseReason?>
            init(_ closed: Locked<ConnectionCloseReason?>) { self.closed = closed }
            func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
                // Any byte from the client starts a flood of 64 KiB blocks, 100 MiB in total.
                let block = IOBuffer([UInt8](repeating: 65, count: 64 * 1024))
                func pump(_ left: Int) {
                    guard left > 0, connection.state == .open else { return }
                    for _ in 0..<16 { connection.write(block) }
                    connection.loop.schedule(after: 1) { pump(left - 1) }
                }
                pump(100)
            }
            func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
                closed.withLock { $0 = reason }
            }
        }
        let listener = try TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { connection in
            connection.maxQueuedBytes = 1 << 20
            connection.handler = Recorder(closed)
        }
        defer { listener.close() }
        let socket = try TestSocket(port: listener.port, receiveBuffer: 4096)
        try socket.send("go")
        try await eventually("the slow reader's connection closed", timeout: 10) { closed.value != nil }
        #expect(closed.value == .writeQueueOverflow)
    }

    @Test func clientConnectsThroughTheLoop() async throws {
        let group = EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let listener = try TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { connection in
            connection.handler = EchoHandler()
        }
        defer { listener.close() }
        final class Collector: ConnectionHandler {
            let done: CheckedContinuation<String, Never>
            var text = ""
            init(_ done: CheckedContinuation<String, Never>) { self.done = done }
            func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
                text += String(decoding: bytes, as: UTF8.self)
                if text.hasSuffix("\n") { done.resume(returning: text); connection.close() }
            }
            func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {}
        }
        let port = listener.port
        let loop = group.loops[0]
        let echoed = await withCheckedContinuation { (done: CheckedContinuation<String, Never>) in
            loop.execute {
                loop.connect(host: "127.0.0.1", port: port) { result in
                    guard case .success(let connection) = result else { done.resume(returning: "failed"); return }
                    connection.handler = Collector(done)
                    connection.write("ping héllo\n")
                }
            }
        }
        #expect(echoed == "ping héllo\n")
    }

    @Test func connectToClosedPortFails() async throws {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        // Bind then close a listener to get a port nobody listens on.
        let listener = try TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { _ in }
        let port = listener.port
        listener.close()
        // The listener closes on its loop, a moment later: wait until the port refuses.
        try await eventually("port \(port) refuses connections") { (try? TestSocket(port: port)) == nil }
        let loop = group.loops[0]
        let failed = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            loop.execute {
                loop.connect(host: "127.0.0.1", port: port) { result in
                    if case .failure = result { done.resume(returning: true) } else { done.resume(returning: false) }
                }
            }
        }
        #expect(failed)
    }

    @Test func bindToBadAddressThrows() {
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        #expect(throws: IOError.self) { try TCPListener.bind(host: "not-an-ip", port: 0, group: group) { _ in } }
    }
}
