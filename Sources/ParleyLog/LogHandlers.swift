import Synchronization

/// Formats lines (``LogFormat``) and hands them to an output: the server's text and JSON
/// handlers on standard error.
public struct StreamLogHandler: LogHandler {
    public let format: LogFormat
    public let output: any LogOutput

    public init(format: LogFormat, output: any LogOutput) {
        self.format = format
        self.output = output
    }

    public func log(_ record: LogRecord) {
        output.write(format.render(record))
    }
}

/// Where formatted lines are written.
public protocol LogOutput: Sendable {
    /// Queues one line (it ends in a newline). Must not block for long.
    func write(_ line: [UInt8])
    /// Returns once what was written before the call is out (or `timeoutMillis` passed).
    func flush(timeoutMillis: Int)
}

/// Keeps every record in memory: for tests, and for tools that show recent lines.
public final class MemoryLogHandler: LogHandler {
    private let kept = Mutex<[LogRecord]>([])
    /// Most records kept (the oldest go first).
    public let capacity: Int

    public init(capacity: Int = 10_000) { self.capacity = capacity }

    public func log(_ record: LogRecord) {
        kept.withLock { records in
            records.append(record)
            if records.count > capacity { records.removeFirst(records.count - capacity) }
        }
    }

    public var records: [LogRecord] { kept.withLock { $0 } }

    /// Each record as a text line (without the newline), for assertions.
    public var lines: [String] {
        records.map { String(decoding: LogFormat.text.render($0).dropLast(), as: UTF8.self) }
    }

    public func removeAll() { kept.withLock { $0.removeAll() } }
}
