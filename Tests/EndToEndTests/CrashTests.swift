import Foundation
import ParleyCore
import ParleyTestSupport
import Synchronization
import Testing

/// `parley serve` as a child process: the real binary (PARLEY_BIN, else .build/debug/parley).
final class ServerProcess {
    let process = Process()
    let httpPort: Int

    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["PARLEY_BIN"], !path.isEmpty { return path }
        return FileManager.default.currentDirectoryPath + "/.build/debug/parley"
    }

    init(arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["serve", "--http-port", "0", "--line-port", "0", "--loops", "2"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        var text = ""
        let deadline = Date().addingTimeInterval(20)
        while !text.contains("line listening"), Date() < deadline {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("http listening on") }),
              let port = line.split(separator: ":").last.flatMap({ Int($0) }) else {
            process.terminate()
            throw TestSocket.Failure("parley serve did not start: \(text)")
        }
        httpPort = port
    }

    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

@Suite(.serialized) struct CrashTests {
    @Test func everyAcknowledgedMessageSurvivesSIGKILL() throws {
        let directory = NSTemporaryDirectory() + "parley-crash-\(UUID().uuidString)"
        let flags = ["--data", directory, "--publish-rate", "1000000"]
        let server = try ServerProcess(arguments: flags)
        let port = server.httpPort
        let acknowledged = Mutex<[String: Int]>([:])
        let publishers = 4
        let group = DispatchGroup()
        for p in 0..<publishers {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                guard let client = try? NativeClient(port: port) else { return }
                guard (try? client.send(["type": "handshake", "channel": "demo", "callback": 0])) != nil,
                      (try? client.next()) != nil else { return }
                var n = 0
                // A window of 8 publishes in flight per publisher, until the server dies.
                var sent = 0
                while true {
                    do {
                        while sent - n < 8 {
                            sent += 1
                            try client.send(["type": "publish", "room": "crash", "message": .string("p\(p)-\(sent)"),
                                             "callback": .number(JSONNumber(sent))])
                        }
                        let reply = try client.next(timeout: 5)
                        guard let callback = reply["callback"]?.intValue, reply["error"] == nil,
                              let offset = reply["offset"]?.intValue else { return }
                        acknowledged.withLock { $0["p\(p)-\(callback)"] = offset }
                        n += 1
                    } catch {
                        return
                    }
                }
            }
        }
        // Killed at a random moment once publishing is in full swing: after a random number of
        // acknowledgements rather than a random time, so a slow machine still gets there.
        let target = Int.random(in: 50...1_000)
        try eventuallyBlocking("\(target) acknowledged publishes", timeout: 60, pollMillis: 1) {
            acknowledged.withLock { $0.count } >= target
        }
        server.kill()
        #expect(group.wait(timeout: .now() + 20) == .success)
        let acked = acknowledged.withLock { $0 }
        #expect(acked.count > 0)

        let restarted = try ServerProcess(arguments: flags)
        defer { restarted.kill() }
        let client = try NativeClient(port: restarted.httpPort)
        try client.send(["type": "handshake", "channel": "demo", "callback": 0])
        _ = try client.next()
        let history = try client.allHistory("crash")
        let offsets = history.compactMap { $0["offset"]?.intValue }
        #expect(offsets == Array(0..<history.count).map { $0 + 1 }, "offsets are 1...n with no gap")
        var stored: [String: Int] = [:]
        for message in history { stored[message["message"]?.stringValue ?? "", default: 0] += 1 }
        #expect(stored.values.allSatisfy { $0 == 1 }, "no message stored twice")
        let byBody = Dictionary(history.map { ($0["message"]?.stringValue ?? "", $0["offset"]?.intValue ?? 0) }, uniquingKeysWith: { a, _ in a })
        let lost = acked.filter { byBody[$0.key] != $0.value }
        #expect(lost.isEmpty, "acknowledged but missing or moved: \(lost.prefix(5))")
        let reply = try client.request(["type": "publish", "room": "crash", "message": "after"], callback: 5)
        #expect(reply["offset"]?.intValue == history.count + 1)
        print("crash test: \(acked.count) acknowledged, \(history.count) stored before SIGKILL")
    }
}

/// A real full disk: a 2 MB tmpfs (needs root and mount; skipped otherwise). What it adds to
/// `StoreFailureTests`, which run for everyone: the kernel's ENOSPC through SQLite's WAL,
/// reported as "disk full", and the same database file usable again once space is back.
@Suite(.serialized) struct FullDiskTests {
    static func sh(_ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    @Test(.enabled(if: getuid() == 0)) func fullDiskGivesErrorRepliesAndRecoversWhenSpaceReturns() throws {
        let mountPoint = NSTemporaryDirectory() + "parley-tmpfs-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard Self.sh(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mountPoint]) else { return }
        defer { _ = Self.sh(["umount", mountPoint]) }
        let server = try startTestServer {
            $0.dataDirectory = mountPoint + "/data"
            $0.nativeRatePerSecond = 1_000_000
            $0.nativeBurst = 1_000_000
        }
        defer { server.shutdown() }
        let client = try NativeClient.connect(server)
        let big = JSONValue.string(String(repeating: "z", count: 20_000))
        var stored = 0, failure: String?
        for n in 1...400 where failure == nil {
            let reply = try client.request(["type": "publish", "room": "full", "message": big], callback: n)
            if let error = reply["error"]?.stringValue { failure = error } else { stored += 1 }
        }
        #expect(failure?.contains("disk full") == true)
        #expect(stored > 0)
        #expect(Self.sh(["mount", "-o", "remount,size=64m", mountPoint]))
        let reply = try client.request(["type": "publish", "room": "full", "message": "space is back"], callback: 1_000)
        #expect(reply["offset"]?.intValue == stored + 1)
        let offsets = try client.allHistory("full", pageSize: 20).map { $0["offset"]?.intValue ?? 0 }
        #expect(offsets == Array(1...(stored + 1)))
    }
}
