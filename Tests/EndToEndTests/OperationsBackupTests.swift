import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// `parley backup` while publishes flow, restored with `parley serve --data NEWDIR`; and
/// `parley --version`.
@Suite(.serialized) struct OperationsBackupTests {
    func run(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ServerProcess.binary)
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, out, err)
    }

    /// Every message acknowledged before the backup started is in it, and the backup's room is
    /// offsets 1…n without a gap: a consistent snapshot of a server under load.
    @Test func aBackupTakenUnderLoadRestoresWithNothingMissingUpToItsPoint() async throws {
        let directory = NSTemporaryDirectory() + "parley-backup-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try ServerProcess(arguments: ["--data", directory + "/data", "--publish-rate", "1000000"])
        let port = server.httpPort
        let acknowledged = Locked<[Int: String]>([:])
        let stop = Locked(false)
        let group = DispatchGroup()
        for p in 0..<3 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                guard let client = try? NativeClient(port: port),
                      (try? client.send(["type": "handshake", "channel": "demo", "callback": 0])) != nil,
                      (try? client.next()) != nil else { return }
                var sent = 0, answered = 0
                while !stop.value {
                    do {
                        while sent - answered < 8 {
                            sent += 1
                            try client.send(["type": "publish", "room": "load", "message": .string("p\(p)-\(sent)"),
                                             "callback": .number(JSONNumber(sent))])
                        }
                        let reply = try client.next(timeout: 5)
                        guard let callback = reply["callback"]?.intValue, let offset = reply["offset"]?.intValue else { continue }
                        acknowledged.withLock { $0[offset] = "p\(p)-\(callback)" }
                        answered += 1
                    } catch {
                        return
                    }
                }
            }
        }
        try await eventually("300 acknowledged publishes", timeout: 60) { acknowledged.value.count >= 300 }
        let before = acknowledged.value
        let backup = try run(["backup", "--data", directory + "/data", "--to", directory + "/copy"])
        let during = acknowledged.value.count
        stop.withLock { $0 = true }
        #expect(group.wait(timeout: .now() + 20) == .success)
        server.kill()
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(backup.stdout.hasPrefix("backup of \(directory)/data written to \(directory)/copy: 1 rooms, "))
        #expect(during > before.count, "publishes went on while the backup ran")

        // It reads the whole history at once: more than the default 5 pages a second (with a
        // slow backup beside three publishers, over 10,000 messages).
        let restored = try ServerProcess(arguments: ["--data", directory + "/copy", "--history-rate", "1000"])
        defer { restored.kill() }
        let client = try NativeClient(port: restored.httpPort)
        try client.send(["type": "handshake", "channel": "demo", "callback": 0])
        _ = try await client.next()
        let history: [JSONValue] = try client.allHistory("load")
        let offsets = history.compactMap { $0["offset"]?.intValue }
        #expect(offsets == Array(0..<history.count).map { $0 + 1 }, "offsets 1…n with no gap")
        #expect(history.count >= before.keys.max() ?? 0, "the backup holds every message acknowledged before it began")
        let byOffset = Dictionary(uniqueKeysWithValues: history.map { ($0["offset"]?.intValue ?? 0, $0["message"]?.stringValue ?? "") })
        let missing = before.filter { byOffset[$0.key] != $0.value }
        #expect(missing.isEmpty, "acknowledged before the backup but missing from it: \(missing.prefix(5))")
        // The restored server goes on from there.
        let reply: JSONValue = try client.request(["type": "publish", "room": "load", "message": "after"], callback: 5)
        #expect(reply["offset"]?.intValue == history.count + 1)
        print("backup test: \(before.count) acknowledged before, \(history.count) in the backup, \(during) after")
    }

    /// The bans' own database is copied consistently with the messages: a restored server
    /// still has them.
    @Test func aBackupKeepsTheBans() async throws {
        let directory = NSTemporaryDirectory() + "parley-backup-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try startTestServer { $0.dataDirectory = directory + "/data"; $0.adminToken = adminToken }
        let added = try await admin(server, "POST", "/bans", body: #"{"ip": "203.0.113.50", "seconds": 600, "reason": "flood"}"#, expect: 201)
        _ = try DataBackup.run(dataDirectory: directory + "/data", to: directory + "/copy")
        server.shutdown(drain: .zero, timeout: .seconds(1))
        #expect(!FileManager.default.fileExists(atPath: directory + "/copy/bans.sqlite3-wal"), "no live sidecar copied")
        let restored = try startTestServer { $0.dataDirectory = directory + "/copy"; $0.adminToken = adminToken }
        defer { restored.shutdown() }
        let bans = try await admin(restored, "GET", "/bans")
        #expect(bans["bans"]?.arrayValue?.map { $0["id"] } == [added["ban"]?["id"]])
        #expect(bans["bans"]?.arrayValue?.first?["reason"] == "flood")
    }

    @Test func backupRefusesToOverwriteAndExplainsItself() throws {
        let directory = NSTemporaryDirectory() + "parley-backup-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let missing = try run(["backup", "--data", directory + "/nothing", "--to", directory + "/copy"])
        #expect(missing.status == 1 && missing.stderr.contains("holds no parley.sqlite3"))
        try FileManager.default.createDirectory(atPath: directory + "/full", withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: directory + "/full/file"))
        let server = try startTestServer { $0.dataDirectory = directory + "/data" }
        server.shutdown()
        let occupied = try run(["backup", "--data", directory + "/data", "--to", directory + "/full"])
        #expect(occupied.status == 1 && occupied.stderr.contains("is not an empty directory"))
        let usage = try run(["backup", "--data", directory + "/data"])
        #expect(usage.status == 2 && usage.stderr.contains("--to NEWDIR is required"))
        let ok = try run(["backup", "--data=" + directory + "/data", "--to=" + directory + "/copy"])
        #expect(ok.status == 0 && ok.stdout.contains("0 rooms, 0 messages"))
    }

    @Test func versionNamesTheBuildAndTheCLibraries() throws {
        let version = try run(["--version"])
        #expect(version.status == 0)
        let lines = version.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("parley \(BuildInfo.version) (commit ") == true)
        #expect(lines.first != "parley \(BuildInfo.version) (commit unknown)", "built from a git checkout")
        for library in ["libuv 1.", "SQLite 3.", "OpenSSL 3.", "zlib 1.", "libvips 8."] {
            #expect(lines.contains { $0.hasPrefix(library) }, "\(library) missing in \(lines)")
        }
        #expect(try run(["version"]).stdout == version.stdout)
    }
}
