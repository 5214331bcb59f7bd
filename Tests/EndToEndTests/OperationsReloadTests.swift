import Foundation
import ParleyCore
import ParleyLog
import ParleyServer
import ParleyTestSupport
import Synchronization
import Testing

/// Reloading the configuration (SIGHUP): channels, secrets, limits and the log level change
/// for a running server; connections that are no longer allowed are told and closed; a
/// broken file is refused and the old configuration stays.
@Suite(.serialized) struct OperationsReloadTests {
    static func configuration() -> ServerConfiguration {
        .forTests { c in
            c.channels = [ChannelSettings(id: "a"), ChannelSettings(id: "b"),
                          ChannelSettings(id: "c", secret: "old-secret", requireAuth: false)]
            c.openChannels = false
            c.lobby = RoomKey(channel: "a", room: "observable-room")
        }
    }

    @Test func aReloadClosesOnlyTheConnectionsItNoLongerAllows() async throws {
        let (logger, memory) = memoryLogger(level: .info)
        let server = try ParleyServer(configuration: Self.configuration(), logger: logger)
        defer { server.shutdown() }
        let (onA, _) = try await NativeClient.handshake(server, channel: "a")
        let (onB, _) = try await NativeClient.handshake(server, channel: "b")
        let (onC, _) = try await NativeClient.handshake(server, channel: "c")
        let token = AuthFixtures.jwt(AuthFixtures.payload(client: onC.clientID, channel: "c"), secret: "old-secret")
        #expect(try await onC.authenticate(token)["error"] == nil)
        let (plainC, _) = try await NativeClient.handshake(server, channel: "c")
        let carol = try server.lineClientForLogTest(name: "carol")

        var fresh = server.configuration
        fresh.channels = [ChannelSettings(id: "a"), ChannelSettings(id: "c", secret: "new-secret", requireAuth: false)]
        fresh.nativeMaxRooms = 1
        fresh.logLevel = .debug
        fresh.httpPort = 1  // only a restart changes it
        let needsRestart = server.applyConfiguration(fresh)
        #expect(needsRestart == ["--http-port"])
        #expect(server.configuration.httpPort == 0 && server.configuration.nativeMaxRooms == 1)
        #expect(server.logger.logLevel == .debug)

        #expect(try await onB.next()["error"] == "channel \"b\" is not open on this server; disconnecting")
        #expect(try await onB.ws.closeCode() == 1008)
        #expect(try await onC.next()["error"] == "your token is no longer valid: token signature does not match; disconnecting")
        #expect(try await onC.ws.closeCode() == 1008)
        // Still allowed: a, c without a token (c does not require one), the lobby's line user.
        #expect(try await onA.publishAcknowledged("still here", to: "r")["offset"] == 1)
        #expect(try await plainC.publishAcknowledged("me too", to: "r")["offset"] == 1)
        try carol.send("msg:and me\n")
        _ = try await carol.nextLine(until: { $0 == "carol:and me" })
        // New connections get the new rules: b is closed, one room per connection.
        let (lateB, reply) = try await NativeClient.handshake(server, channel: "b")
        #expect(reply["error"] == "channel \"b\" is not open on this server")
        _ = lateB
        let (lateA, _) = try await NativeClient.handshake(server, channel: "a")
        #expect(try await lateA.subscribe("one")["error"] == nil)
        #expect(try await lateA.subscribe("two")["error"] == "too many rooms (limit 1 per connection)")

        let reloaded = try #require(memory.records.first { $0.message == "configuration reloaded" })
        #expect(reloaded.metadata["removed"] == "b" && reloaded.metadata["changed"] == "c")
        #expect(reloaded.metadata["needs_restart"] == "--http-port")
        #expect(memory.records.contains { $0.message == "connection closed after a configuration reload" && $0.metadata["channel"] == "b" })
        #expect(metric(server.metricsText(), #"parley_config_reloads_total{outcome="applied"}"#) == 1)
    }

    @Test func aConfigurationThatDoesNotLoadIsRefusedAndTheOldOneStays() async throws {
        let (logger, memory) = memoryLogger(level: .info)
        let server = try ParleyServer(configuration: Self.configuration(), logger: logger)
        defer { server.shutdown() }
        let (onB, _) = try await NativeClient.handshake(server, channel: "b")
        let before = server.configuration
        let applied = server.reloadConfiguration {
            throw BrokenFile(description: "config file /etc/parley.json: invalid JSON: unexpected end")
        }
        #expect(!applied)
        let refused = try #require(memory.records.first { $0.message.hasPrefix("configuration reload refused") })
        #expect(refused.level == .error)
        #expect(refused.metadata["error"] == "config file /etc/parley.json: invalid JSON: unexpected end")
        #expect(server.configuration == before)
        #expect(try await onB.publishAcknowledged("fine", to: "r")["offset"] == 1)
        #expect(metric(server.metricsText(), #"parley_config_reloads_total{outcome="refused"}"#) == 1)
    }

    /// The real thing: `parley serve --config FILE`, the file edited, SIGHUP; then a broken
    /// file and SIGHUP again.
    @Test func sighupReloadsTheFileAndRefusesABrokenOne() async throws {
        let directory = NSTemporaryDirectory() + "parley-reload-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/parley.json"
        func write(_ text: String) throws { try Data(text.utf8).write(to: URL(fileURLWithPath: file)) }
        try write(#"{"channels": [{"id": "a"}, {"id": "b"}], "log": {"level": "info"}}"#)
        let process = try LoggedServerProcess(arguments: ["--config", file, "--data", directory + "/data", "--lobby", "a/observable-room"])
        defer { process.stop() }
        let onB = try await NativeClient.handshakeOn(port: process.httpPort, channel: "b")
        let onA = try await NativeClient.handshakeOn(port: process.httpPort, channel: "a")

        try write(#"{"channels": [{"id": "a"}], "log": {"level": "debug"}}"#)
        process.signal(SIGHUP)
        #expect(try await onB.next()["error"] == "channel \"b\" is not open on this server; disconnecting")
        #expect(try await onB.ws.closeCode() == 1008)
        try await eventually("the reload logged") { process.stderr.contains("configuration reloaded") }
        let reloaded = try #require(process.stderr.split(separator: "\n").first { $0.contains("configuration reloaded") })
        #expect(reloaded.contains("removed=b") && reloaded.contains("log_level=debug"))

        try write(#"{"channels": [{"id": "a"}, "#)
        process.signal(SIGHUP)
        try await eventually("the refusal logged") { process.stderr.contains("configuration reload refused") }
        let refused = try #require(process.stderr.split(separator: "\n").first { $0.contains("configuration reload refused") })
        #expect(refused.contains(" error ") || refused.contains("error  parley"))
        #expect(refused.contains("config file \(file): invalid JSON"))
        // The old configuration stays: a works, b is still closed, debug lines still come.
        #expect(try await onA.publishAcknowledged("still on", to: "r")["offset"] == 1)
        let (_, reply) = try await NativeClient.handshake(port: process.httpPort, channel: "b")
        #expect(reply["error"] == "channel \"b\" is not open on this server")
        try await eventually("debug lines") { process.stderr.contains("debug parley: connection opened") }
        #expect(process.stop() == 0)
    }
}

struct BrokenFile: Error, CustomStringConvertible { let description: String }

extension NativeClient {
    static func handshakeOn(port: Int, channel: String) async throws -> NativeClient {
        let (client, reply) = try await handshake(port: port, channel: channel)
        guard reply["error"] == nil else { throw TestSocket.Failure("handshake refused: \(reply)") }
        return client
    }

    static func handshake(port: Int, channel: String) async throws -> (NativeClient, JSONValue) {
        let client = try NativeClient(port: port)
        try client.send(["type": "handshake", "channel": .string(channel), "callback": 0])
        let reply = try await client.next()
        client.clientID = reply["client_id"]?.stringValue ?? ""
        return (client, reply)
    }
}

/// `parley serve` as a child process with its standard error kept for the test (the log).
final class LoggedServerProcess: @unchecked Sendable {
    // Safe: `process` is used by the test's task only; the log is a Sendable collector.
    let process = Process()
    let httpPort: Int
    private let log: PipeCollector

    init(arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: ServerProcess.binary)
        process.arguments = ["serve", "--http-port", "0", "--line-port", "0", "--loops", "2"] + arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        log = PipeCollector(errors)
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
            throw TestSocket.Failure("parley serve did not start: \(text) \(log.value)")
        }
        httpPort = port
    }

    var stderr: String { log.value }

    func signal(_ signal: Int32) { kill(process.processIdentifier, signal) }

    /// SIGTERM, then the exit status (SIGKILL after 10 s).
    @discardableResult
    func stop() -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, SIGTERM)
        try? eventuallyBlocking("the server to exit", timeout: 10, pollMillis: 10) { !process.isRunning }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        return process.terminationStatus
    }
}
