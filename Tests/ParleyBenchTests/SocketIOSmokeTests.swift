import Foundation
import ParleyTestSupport
import Testing
@testable import ParleyBench

/// The Socket.IO client against the python-socketio SocketChat server (Tests/bench), in its
/// venv `.venv-bench`, which `make test` and `make bench` create. Without the venv the test
/// fails, naming what to run: a test that quietly skips is no test. The server is stopped by
/// its pid.
@Suite struct SocketIOSmokeTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let python = root.appendingPathComponent(".venv-bench/bin/python").path
    static var available: Bool { FileManager.default.isExecutableFile(atPath: python) }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length); return getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test(.timeLimit(.minutes(1)))
    func fanoutAgainstPythonSocketIO() throws {
        try #require(Self.available, "needs \(Self.python): run `make .venv-bench/.ready` (make test does it)")
        let port = Self.freePort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = [Self.root.appendingPathComponent("Tests/bench/socketchat_server.py").path, "--port", String(port)]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let pid = process.processIdentifier
        defer {
            kill(pid, SIGTERM)
            try? eventuallyBlocking("the server to exit", timeout: 5, pollMillis: 50) { !process.isRunning }
            if process.isRunning { kill(pid, SIGKILL) }
        }
        // Wait (bounded) until it accepts connections.
        let deadline = Date().addingTimeInterval(15)
        var up = false
        while !up && Date() < deadline {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            up = withUnsafePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            close(fd)
            if !up { Thread.sleep(forTimeInterval: 0.1) }
        }
        try #require(up, "python-socketio server did not start")
        var o = FanoutOptions()
        o.door = .socketio
        o.url = BenchURL(host: "127.0.0.1", port: port, path: "/socket.io/")
        o.members = 5
        o.rate = .perSecond(50)
        o.durationSeconds = 0.5
        o.warmupSeconds = 0.2
        o.drainSeconds = 5
        o.setupTimeoutSeconds = 20
        let r = FanoutRun.run(o)
        #expect(r.isClean, "\(r.table)")
        #expect(r.sent > 0 && r.delivered == r.sent * 5)
        #expect(Int(r.latency.count) == r.measuredDelivered && r.measuredDelivered > 0)
    }
}
