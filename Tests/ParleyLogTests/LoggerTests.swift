import Foundation
@testable import ParleyLog
import Synchronization
import Testing

@Suite struct LoggerTests {
    @Test func aLevelThatIsOffDoesNotBuildTheMessage() {
        let memory = MemoryLogHandler()
        let logger = Logger(label: "t", destination: LogDestination(handler: memory, level: .info))
        let evaluated = Mutex(0)
        func expensive() -> String {
            evaluated.withLock { $0 += 1 }
            return "expensive"
        }
        logger.debug(expensive(), metadata: ["n": .string(expensive())])
        logger.trace(expensive())
        #expect(evaluated.withLock { $0 } == 0)
        #expect(memory.records.isEmpty)
        logger.info(expensive())
        #expect(evaluated.withLock { $0 } == 1)
        #expect(memory.records.map(\.message) == ["expensive"])
    }
}

@Suite struct LogFormatTests {
    let record = LogRecord(level: .warn, message: "line one\nline two", label: "parley",
                           metadata: ["door": "native", "remote": "1.2.3.4:5", "note": "a \"quoted\" value", "n": 42, "ok": true],
                           timestampMillis: 1_764_585_045_196)

    @Test func textIsOneLineWithEscapedValues() {
        let line = String(decoding: LogFormat.text.render(record), as: UTF8.self)
        #expect(line == #"2025-12-01T10:30:45.196Z warn  parley: line one\nline two door=native remote=1.2.3.4:5 note="a \"quoted\" value" n=42 ok=true"# + "\n")
    }

    @Test func jsonIsOneObjectPerLineWithTypedValues() throws {
        let bytes = LogFormat.json.render(record)
        #expect(bytes.last == 0x0A)
        #expect(bytes.dropLast().allSatisfy { $0 != 0x0A })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        #expect(object["time"] as? String == "2025-12-01T10:30:45.196Z")
        #expect(object["level"] as? String == "warn")
        #expect(object["logger"] as? String == "parley")
        #expect(object["msg"] as? String == "line one\nline two")
        #expect(object["note"] as? String == "a \"quoted\" value")
        #expect(object["n"] as? Int == 42)
        #expect(object["ok"] as? Bool == true)
    }

    @Test func controlCharactersCannotForgeALine() {
        let hostile = LogRecord(level: .info, message: "hi", label: "parley",
                                metadata: ["name": "eve\n2025-01-01T00:00:00.000Z error parley: forged\u{1b}[31m"], timestampMillis: 0)
        for format in LogFormat.allCases {
            let bytes = format.render(hostile)
            #expect(bytes.filter { $0 == 0x0A }.count == 1, "\(format)")
            #expect(!bytes.contains(0x1B), "\(format)")
        }
    }

    @Test func timestampsAcrossDatesAreUTC() {
        func stamp(_ millis: Int64) -> String {
            var out: [UInt8] = []
            LogFormat.appendTimestamp(millis, into: &out)
            return String(decoding: out, as: UTF8.self)
        }
        #expect(stamp(0) == "1970-01-01T00:00:00.000Z")
        #expect(stamp(951_782_400_000) == "2000-02-29T00:00:00.000Z")
        #expect(stamp(4_102_444_799_999) == "2099-12-31T23:59:59.999Z")
    }
}

@Suite struct LoggerValueTests {
    @Test func metadataMergesInOrderAndLevelChangesWhileRunning() {
        let memory = MemoryLogHandler()
        let destination = LogDestination(handler: memory, level: .info)
        let base = Logger(label: "parley", destination: destination, metadata: ["a": 1])
        let child = base.with(["b": 2, "a": 3])
        child.info("x", metadata: ["c": "z"])
        #expect(memory.records.last?.metadata == ["a": 3, "b": 2, "c": "z"])
        child.debug("hidden")
        destination.logLevel = .debug
        child.debug("shown")
        #expect(memory.records.map(\.message) == ["x", "shown"])
        #expect(base.logLevel == .debug)
        #expect(LogLevel(name: "WARNING") == .warn && LogLevel(name: "loud") == nil)
    }

    @Test func theDiscardingLoggerWritesNothing() {
        Logger.disabled.error("nothing")
        #expect(!Logger.disabled.isEnabled(.error) || Logger.disabled.destination.handler is DiscardingLogHandler)
    }
}

@Suite struct LogThrottleTests {
    /// A flood of one kind: a few lines, then one summary line saying how many were held
    /// back; another kind is not affected.
    @Test func aFloodIsCutToAFewLinesAndASummary() {
        let memory = MemoryLogHandler()
        let logger = Logger(label: "parley", destination: LogDestination(handler: memory, level: .info))
        let now = Mutex<Int64>(1_000)
        let throttle = LogThrottle(linesPerWindow: 3, windowMillis: 1000, clock: { now.withLock { $0 } })
        for n in 1...1_000 { throttle.log("auth failure", to: logger, .info, "refused \(n)") }
        throttle.log("limit message_rate", to: logger, .info, "breach")
        #expect(memory.records.map(\.message) == ["refused 1", "refused 2", "refused 3", "breach"])
        throttle.flushSummaries(to: logger)
        #expect(memory.records.count == 4, "no summary before the window has passed")
        now.withLock { $0 += 1_000 }
        throttle.flushSummaries(to: logger)
        let summary = memory.records.last
        #expect(summary?.message == "997 more \"auth failure\" lines suppressed")
        #expect(summary?.metadata["suppressed"] == 997)
        // A new window lets lines through again.
        throttle.log("auth failure", to: logger, .info, "refused again")
        #expect(memory.records.last?.message == "refused again")
    }

    @Test func theNextLineAfterTheWindowBringsTheSummary() {
        let memory = MemoryLogHandler()
        let logger = Logger(label: "parley", destination: LogDestination(handler: memory, level: .info))
        let now = Mutex<Int64>(0)
        let throttle = LogThrottle(linesPerWindow: 1, windowMillis: 1000, clock: { now.withLock { $0 } })
        throttle.log("k", to: logger, .warn, "a")
        throttle.log("k", to: logger, .warn, "b")
        now.withLock { $0 = 1500 }
        throttle.log("k", to: logger, .warn, "c")
        #expect(memory.records.map(\.message) == ["a", "1 more \"k\" lines suppressed", "c"])
    }

    @Test func aDisabledLevelCostsNoBookkeeping() {
        let memory = MemoryLogHandler()
        let logger = Logger(label: "parley", destination: LogDestination(handler: memory, level: .error))
        let throttle = LogThrottle(linesPerWindow: 1)
        let built = Mutex(0)
        for _ in 1...10 { throttle.log("k", to: logger, .info, { built.withLock { $0 += 1 }; return "x" }()) }
        throttle.flushSummaries(to: logger)
        #expect(built.withLock { $0 } == 0)
        #expect(memory.records.isEmpty)
    }
}

@Suite struct StandardErrorOutputTests {
    /// Lines reach the file descriptor in order, through the output's own thread.
    @Test func linesAreWrittenInOrderAndFlushWaitsForThem() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let output = StandardErrorOutput(fileDescriptor: fds[1])
        for n in 1...100 { output.write(Array("line \(n)\n".utf8)) }
        output.flush(timeoutMillis: 5_000)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let flags = fcntl(fds[0], F_GETFL)
        _ = fcntl(fds[0], F_SETFL, flags | O_NONBLOCK)
        while true {
            let n = read(fds[0], &buffer, buffer.count)
            if n <= 0 { break }
            received += buffer[0..<n]
        }
        let lines = String(decoding: received, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines == (1...100).map { "line \($0)" })
    }
}
