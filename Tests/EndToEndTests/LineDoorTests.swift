import Foundation
import Testing
import ParleyCore
import ParleyServer
import ParleyTestSupport

/// The line door over real sockets: a smoke test, fan-out at scale, a reader the kernel
/// stops, the binary, a taken port. The door's rules are tested in-process in
/// Tests/ParleyServerTests/LineDoorInProcessTests.
@Suite(.serialized) struct LineDoorTests {
    @Test func threeClientsSeeEachOtherJoinAndEveryMessageIncludingTheirOwn() throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let alice = try server.lineClient(name: "alice")
        let bob = try server.lineClient(name: "bob")
        #expect(try alice.readLine() == "bob has joined")
        let carol = try server.lineClient(name: "carol")
        #expect(try alice.readLine() == "carol has joined")
        #expect(try bob.readLine() == "carol has joined")

        try bob.send("msg:hello everyone\n")
        for client in [alice, bob, carol] { #expect(try client.readLine() == "bob:hello everyone") }
    }

    @Test func twoHundredClientsEachReceiveAThousandMessagesInOrder() throws {
        let server = try TestServer.start { $0.lineRatePerSecond = 1_000_000; $0.lineBurst = 1_000_000 }
        defer { server.stop() }
        let clients = try (0..<200).map { try server.lineClient(name: "u\($0)") }
        let publisher = clients[0]
        // Wait until the last joiner is known to the publisher, so every client is in.
        _ = try publisher.readLine(timeout: 10, until: { $0 == "u199 has joined" })
        let start = Date()
        var batch = ""
        for i in 0..<1000 { batch += "msg:m\(i)\n" }
        try publisher.send(batch)
        for (index, client) in clients.enumerated() {
            var expected = 0
            while expected < 1000 {
                let line = try client.readLine(timeout: 20)
                guard line.hasPrefix("u0:") else { continue }   // join lines
                #expect(line == "u0:m\(expected)", "client \(index)")
                if line != "u0:m\(expected)" { return }
                expected += 1
            }
        }
        let seconds = Date().timeIntervalSince(start)
        print("line fan-out: 200 clients x 1000 messages = 200000 deliveries in \(String(format: "%.2f", seconds)) s (\(Int(200_000 / seconds)) deliveries/s, debug build)")
    }

    @Test func aReaderThatNeverReadsIsCutOffWhileOthersGetEverything() throws {
        let server = try TestServer.start {
            $0.lineRatePerSecond = 1_000_000; $0.lineBurst = 1_000_000
            $0.writeQueueLimit = 1 << 20
        }
        defer { server.stop() }
        let stuck = try TestSocket(port: server.server.linePort, receiveBuffer: 4096)
        try stuck.send("iam:stuck\n")
        let sender = try server.lineClient(name: "sender")
        let reader = try server.lineClient(name: "reader")
        _ = try sender.readLine()   // reader has joined
        let text = String(repeating: "z", count: 8000)
        let count = 1500            // ~12 MB: far past the kernel buffers and the queue limit
        // Real threads: blocking reads must not sit on the (2-thread) concurrency pool.
        func countMessages(_ socket: TestSocket) -> BackgroundThread<Int> {
            BackgroundThread {
                var received = 0
                while received < count {
                    guard let line = try? socket.readLine(timeout: 30) else { break }
                    if line.hasPrefix("sender:") { received += 1 }
                }
                return received
            }
        }
        let readerThread = countMessages(reader)
        // The sender behaves like a chat client: it keeps at most 20 of its own messages in
        // flight, reading its echoes as it goes. Only `stuck` never reads.
        var senderGot = 0
        for i in 0..<count {
            try sender.send("msg:\(text)\n")
            while senderGot < i - 20 {
                if try sender.readLine(timeout: 30).hasPrefix("sender:") { senderGot += 1 }
            }
        }
        while senderGot < count {
            if try sender.readLine(timeout: 30).hasPrefix("sender:") { senderGot += 1 }
        }
        #expect(stuck.waitForClose(timeout: 30))
        let readerGot = try readerThread.result(timeout: 60)
        #expect(readerGot == count)
        #expect(senderGot == count)
    }

    @Test func serverBinaryPrintsPortsAndExitsCleanlyOnSIGTERM() throws {
        let binary = parleyBinary()
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build the parley binary first: \(binary)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve", "--host", "127.0.0.1", "--http-port", "0", "--line-port", "0", "--loops", "2",
                             "--data", NSTemporaryDirectory() + "parley-bin-\(UUID().uuidString)"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let reader = LineReader(output.fileHandleForReading)
        let line = try #require(reader.line(timeout: 10, matching: { $0.hasPrefix("line listening on 127.0.0.1:") }))
        let port = try #require(Int(line.split(separator: ":").last ?? ""))
        let client = try TestSocket(port: port)
        try client.send("iam:neo\nmsg:knock knock\n")
        #expect(try client.readLine() == "neo has joined")
        #expect(try client.readLine() == "neo:knock knock")
        kill(process.processIdentifier, SIGTERM)
        #expect(try client.readLine() == "server is shutting down, bye")
        #expect(client.waitForClose(timeout: 5))
        try eventuallyBlocking("the server to exit", timeout: 10, pollMillis: 20) { !process.isRunning }
        #expect(process.terminationStatus == 0)
    }

    @Test func portInUseIsAnError() throws {
        let first = try TestServer.start()
        defer { first.stop() }
        let port = first.server.linePort
        #expect(throws: (any Error).self) { _ = try TestServer.start { $0.linePort = port } }
    }
}

/// The built `parley` binary: $PARLEY_BIN, else the debug build next to the tests.
func parleyBinary() -> String {
    if let path = ProcessInfo.processInfo.environment["PARLEY_BIN"] { return path }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug/parley").path
}

/// Reads lines from a pipe with a timeout.
final class LineReader: @unchecked Sendable {
    // Safe: `buffer` is only touched under `lock`.
    private let handle: FileHandle
    private var buffer = Data()
    private let lock = NSLock()

    init(_ handle: FileHandle) { self.handle = handle }

    func line(timeout: Double, matching predicate: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            var pfd = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 100) > 0 {
                let chunk = handle.availableData
                if chunk.isEmpty { return nil }
                lock.lock(); buffer.append(chunk); lock.unlock()
            }
            lock.lock()
            while let newline = buffer.firstIndex(of: 10) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                if predicate(line) { lock.unlock(); return line }
            }
            lock.unlock()
        }
        return nil
    }
}
