import Foundation
import ParleyTestSupport
import Testing

/// The helper that keeps a child server's stderr: all of it, in order, and the end of file.
@Suite struct PipeCollectorTests {
    @Test func collectsEverythingAChildWritesAndSeesTheEnd() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        // 2,000 numbered lines (more than a pipe's 64 KiB buffer) on stderr, then exit.
        process.arguments = ["-c", "i=0; while [ $i -lt 2000 ]; do echo \"line $i of the log, padded to be long enough\" >&2; i=$((i+1)); done"]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let collector = PipeCollector(errors)
        #expect(collector.waitForEnd(timeout: 20))
        process.waitUntilExit()
        let lines = collector.value.split(separator: "\n")
        #expect(lines.count == 2000)
        #expect(lines.first == "line 0 of the log, padded to be long enough")
        #expect(lines.last == "line 1999 of the log, padded to be long enough")
    }
}
