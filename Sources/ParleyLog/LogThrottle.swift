import Synchronization

/// Keeps a flood of one kind of line (refused tokens, limit breaches) from flooding the log:
/// at most ``linesPerWindow`` lines of a kind per window; the rest are counted and reported
/// in one summary line per kind (`… 1234 more "auth failure" lines in the last 1 s`), written
/// by ``flushSummaries(to:)`` (the server calls it every second) or by the next line of that
/// kind once its window has passed. Thread-safe.
public final class LogThrottle: Sendable {
    private struct Window {
        var startMillis: Int64
        var written = 0
        var suppressed = 0
        var level: LogLevel
    }
    private let windows = Mutex<[String: Window]>([:])
    public let linesPerWindow: Int
    public let windowMillis: Int64
    private let clock: @Sendable () -> Int64
    /// Most kinds tracked at once (kinds are a small fixed set; this only bounds a mistake).
    static let maxKinds = 256

    public init(linesPerWindow: Int = 10, windowMillis: Int64 = 1000,
                clock: @escaping @Sendable () -> Int64 = LogDestination.unixMillis) {
        self.linesPerWindow = linesPerWindow
        self.windowMillis = windowMillis
        self.clock = clock
    }

    /// Logs the line unless this kind has used up its window; when a new window starts, the
    /// summary of the last one goes first. The message is built only when written.
    public func log(_ kind: String, to logger: Logger, _ level: LogLevel, _ message: @autoclosure () -> String,
                    metadata: @autoclosure () -> LogMetadata = [:]) {
        guard logger.isEnabled(level) else { return }
        let now = clock()
        let (allowed, summary) = windows.withLock { windows -> (Bool, (Int, Int64)?) in
            var window = windows[kind] ?? Window(startMillis: now, level: level)
            var summary: (Int, Int64)?
            if now - window.startMillis >= windowMillis {
                if window.suppressed > 0 { summary = (window.suppressed, now - window.startMillis) }
                window = Window(startMillis: now, level: level)
            }
            let allowed = window.written < linesPerWindow
            if allowed { window.written += 1 } else { window.suppressed += 1 }
            if windows[kind] != nil || windows.count < Self.maxKinds { windows[kind] = window }
            return (allowed, summary)
        }
        if let (count, span) = summary { writeSummary(kind, count: count, spanMillis: span, level: level, to: logger) }
        if allowed { logger.log(level, message(), metadata: metadata()) }
    }

    /// Writes the summary of every kind whose window has passed with lines suppressed.
    public func flushSummaries(to logger: Logger) {
        let now = clock()
        let due = windows.withLock { windows -> [(String, Int, Int64, LogLevel)] in
            var due: [(String, Int, Int64, LogLevel)] = []
            for (kind, window) in windows where now - window.startMillis >= windowMillis {
                if window.suppressed > 0 { due.append((kind, window.suppressed, now - window.startMillis, window.level)) }
                windows[kind] = nil
            }
            return due
        }
        for (kind, count, span, level) in due.sorted(by: { $0.0 < $1.0 }) {
            writeSummary(kind, count: count, spanMillis: span, level: level, to: logger)
        }
    }

    private func writeSummary(_ kind: String, count: Int, spanMillis: Int64, level: LogLevel, to logger: Logger) {
        logger.log(level, "\(count) more \"\(kind)\" lines suppressed",
                   metadata: ["kind": .string(kind), "suppressed": .int(count), "window_ms": .int(Int(spanMillis))])
    }
}
