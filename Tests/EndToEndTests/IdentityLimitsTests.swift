import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// What reaches a terminal through the `parley chat` binary (docs/security.md, "Identity and
/// history"); the name, `client_data` and line-door rules are tested in-process
/// (Tests/ParleyServerTests/IdentityAndNativeLimitsInProcessTests).
@Suite(.serialized) struct IdentityLimitsTests {
    @Test func parleyChatPrintsOthersControlSequencesDefused() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ServerProcess.binary)
        process.arguments = ["chat", "--plain", "--url", "ws://127.0.0.1:\(server.httpPort)/v3/websocket",
                             "--room", "observable-tty", "--name", "bob", "--history", "0"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let printed = PipeCollector(output)
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice"])
        _ = try await alice.subscribe("observable-tty")
        let members = try await alice.next { $0["type"] == "observable_members" }
        if members["data"]?.arrayValue?.count != 2 {
            _ = try await alice.next(timeout: 15) { $0["type"] == "observable_member_join" }
        }
        try alice.publish("\u{1B}[2J\u{1B}]0;pwned\u{7}hi\u{9B}1m \u{202E}txt.exe\u{2028}x\ny", to: "observable-tty")
        try await eventually("alice's line", timeout: 10, pollMillis: 20) { printed.value.contains("alice: ") }
        try await Task.sleep(for: .milliseconds(100))
        let line = printed.value.split(separator: "\n").first { $0.hasPrefix("alice: ") }.map(String.init)
        #expect(line == "alice: \u{FFFD}[2J\u{FFFD}]0;pwned\u{FFFD}hi\u{FFFD}1m \u{FFFD}txt.exe\u{FFFD}x y", "\(printed.value.debugDescription)")
    }
}
