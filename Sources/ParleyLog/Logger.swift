import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One line to log, as a handler receives it.
public struct LogRecord: Sendable {
    public let level: LogLevel
    public let message: String
    /// The logger's label (what part of the program speaks: `parley`, `parley.store`).
    public let label: String
    public let metadata: LogMetadata
    /// Unix time in milliseconds.
    public let timestampMillis: Int64

    public init(level: LogLevel, message: String, label: String, metadata: LogMetadata, timestampMillis: Int64) {
        self.level = level
        self.message = message
        self.label = label
        self.metadata = metadata
        self.timestampMillis = timestampMillis
    }
}

/// Where log lines go: formats and writes them. Called only for enabled levels, from any
/// thread, so an implementation must be thread-safe and should not block for long.
public protocol LogHandler: Sendable {
    func log(_ record: LogRecord)
}

/// A handler and the level in force, shared by every ``Logger`` made from it. The program
/// makes one at start and passes loggers down; nothing here is global. The level can change
/// while running (a configuration reload) and is read with one relaxed atomic load per call.
public final class LogDestination: Sendable {
    public let handler: any LogHandler
    private let level: Atomic<Int>
    private let clock: @Sendable () -> Int64

    public init(handler: any LogHandler, level: LogLevel = .info,
                clock: @escaping @Sendable () -> Int64 = LogDestination.unixMillis) {
        self.handler = handler
        self.level = Atomic(level.rawValue)
        self.clock = clock
    }

    /// The lowest level written.
    public var logLevel: LogLevel {
        get { LogLevel(rawValue: level.load(ordering: .relaxed)) ?? .info }
        set { level.store(newValue.rawValue, ordering: .relaxed) }
    }

    @inline(__always)
    func isEnabled(_ level: LogLevel) -> Bool { level.rawValue >= self.level.load(ordering: .relaxed) }

    func write(_ level: LogLevel, _ message: String, label: String, metadata: LogMetadata) {
        handler.log(LogRecord(level: level, message: message, label: label, metadata: metadata, timestampMillis: clock()))
    }

    /// A destination that writes nothing (what a library uses when given no logger).
    public static let discarding = LogDestination(handler: DiscardingLogHandler(), level: .error)

    /// Milliseconds since the Unix epoch from the system clock.
    public static let unixMillis: @Sendable () -> Int64 = {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}

/// Drops every line.
public struct DiscardingLogHandler: LogHandler {
    public init() {}
    public func log(_ record: LogRecord) {}
}

/// A logger: a label, metadata added to every line, and a ``LogDestination``. A value: copy
/// it and add metadata for a part of the program (`logger.with(["door": "line"])`).
///
/// Messages and metadata are `@autoclosure`s: at a level that is off, a call costs one
/// atomic load and builds no string.
///
/// ```swift
/// logger.info("listening", metadata: ["door": "http", "address": "\(host):\(port)"])
/// logger.debug("connection closed", metadata: ["remote": "\(connection.remoteAddress)"])
/// ```
public struct Logger: Sendable {
    public let label: String
    public var metadata: LogMetadata
    public let destination: LogDestination

    public init(label: String, destination: LogDestination, metadata: LogMetadata = [:]) {
        self.label = label
        self.destination = destination
        self.metadata = metadata
    }

    /// A logger that writes nothing.
    public static let disabled = Logger(label: "disabled", destination: .discarding)

    /// The lowest level written (shared with every logger of the same destination).
    public var logLevel: LogLevel { destination.logLevel }

    @inline(__always)
    public func isEnabled(_ level: LogLevel) -> Bool { destination.isEnabled(level) }

    /// This logger with more metadata on every line.
    public func with(_ more: LogMetadata) -> Logger {
        Logger(label: label, destination: destination, metadata: metadata.merging(more))
    }

    public subscript(metadataKey key: String) -> LogValue? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    @inline(__always)
    public func log(_ level: LogLevel, _ message: @autoclosure () -> String,
                    metadata extra: @autoclosure () -> LogMetadata = [:]) {
        guard destination.isEnabled(level) else { return }
        destination.write(level, message(), label: label, metadata: metadata.merging(extra()))
    }

    @inline(__always)
    public func trace(_ message: @autoclosure () -> String, metadata: @autoclosure () -> LogMetadata = [:]) {
        log(.trace, message(), metadata: metadata())
    }

    @inline(__always)
    public func debug(_ message: @autoclosure () -> String, metadata: @autoclosure () -> LogMetadata = [:]) {
        log(.debug, message(), metadata: metadata())
    }

    @inline(__always)
    public func info(_ message: @autoclosure () -> String, metadata: @autoclosure () -> LogMetadata = [:]) {
        log(.info, message(), metadata: metadata())
    }

    @inline(__always)
    public func warn(_ message: @autoclosure () -> String, metadata: @autoclosure () -> LogMetadata = [:]) {
        log(.warn, message(), metadata: metadata())
    }

    @inline(__always)
    public func error(_ message: @autoclosure () -> String, metadata: @autoclosure () -> LogMetadata = [:]) {
        log(.error, message(), metadata: metadata())
    }
}
