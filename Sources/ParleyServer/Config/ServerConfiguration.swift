import ParleyCore

/// Everything `parley serve` can be told. Each flag has a `PARLEY_*` environment variable;
/// a flag wins over the variable.
public struct ServerConfiguration: Sendable, Equatable {
    public var host = "127.0.0.1"
    public var httpPort = 8080
    public var linePort = 8081
    public var dataDirectory = "./parley-data"
    public var loops = EventLoopCount.cores
    public var lobby = RoomKey(channel: "demo", room: "observable-room")
    /// Longest line the line door accepts, in bytes.
    public var lineMaxLength = 16 * 1024
    /// Messages per second one line connection may send (token bucket rate)...
    public var lineRatePerSecond = 20.0
    /// ...and the burst it may send at once.
    public var lineBurst = 40.0
    /// Bytes that may wait to be written to one connection before it is cut off.
    public var writeQueueLimit = 4 << 20
    /// Messages kept in memory per room.
    public var historyCapacity = 1_000
    /// Quiet period that ends an unframed line-door message, in milliseconds.
    public var lineQuietMillis: UInt64 = 50
    /// Largest HTTP request body (REST publish), in bytes.
    public var httpMaxBodyBytes = 1 << 20
    /// A request that has started must be complete within this long, in milliseconds.
    public var httpRequestTimeoutMillis: UInt64 = 10_000
    /// A keep-alive connection with no request in progress is closed after this long.
    public var httpIdleTimeoutMillis: UInt64 = 60_000
    /// Largest WebSocket message on the native door, in bytes (close 1009 above).
    public var webSocketMaxMessageSize = 1 << 20
    /// Rooms one native connection may be subscribed to at once.
    public var nativeMaxRooms = 100
    /// Publishes per second one native connection may send (token bucket rate)...
    public var nativeRatePerSecond = 50.0
    /// ...and the burst it may send at once.
    public var nativeBurst = 100.0
    /// Most history messages one subscribe may ask for (`history_count` is capped to it).
    public var nativeMaxHistoryCount = 1_000
    /// A native connection silent this long is pinged; one still silent this long after the
    /// ping is closed. Milliseconds.
    public var webSocketPingIntervalMillis: UInt64 = 30_000

    public enum EventLoopCount: Sendable, Equatable {
        case cores
        case fixed(Int)
    }

    public init() {}

    /// A usage or value error, with the text to print.
    public struct UsageError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    struct Option: Sendable {
        let flag: String
        let env: String
        let value: String
        let help: String
        let apply: @Sendable (inout ServerConfiguration, String) throws(UsageError) -> Void
    }

    static let options: [Option] = [
        Option(flag: "--host", env: "PARLEY_HOST", value: "ADDR", help: "address to bind (default 127.0.0.1; 0.0.0.0 for all)") { c, v throws(UsageError) in
            c.host = v
        },
        Option(flag: "--http-port", env: "PARLEY_HTTP_PORT", value: "PORT", help: "HTTP/WebSocket port (default 8080; 0 picks a free port)") { c, v throws(UsageError) in
            c.httpPort = try port(v, "--http-port")
        },
        Option(flag: "--line-port", env: "PARLEY_LINE_PORT", value: "PORT", help: "line-protocol TCP port (default 8081; 0 picks a free port)") { c, v throws(UsageError) in
            c.linePort = try port(v, "--line-port")
        },
        Option(flag: "--data", env: "PARLEY_DATA", value: "DIR", help: "data directory (default ./parley-data)") { c, v throws(UsageError) in
            guard !v.isEmpty else { throw UsageError(description: "--data needs a directory") }
            c.dataDirectory = v
        },
        Option(flag: "--loops", env: "PARLEY_LOOPS", value: "N", help: "event loops (threads); default one per core") { c, v throws(UsageError) in
            c.loops = .fixed(try integer(v, "--loops", 1...256))
        },
        Option(flag: "--lobby", env: "PARLEY_LOBBY", value: "CHANNEL/ROOM", help: "room shared by the line and Socket.IO doors (default demo/observable-room)") { c, v throws(UsageError) in
            guard let key = RoomKey(parsing: v) else { throw UsageError(description: "--lobby must look like CHANNEL/ROOM, got \"\(v)\"") }
            c.lobby = key
        },
        Option(flag: "--max-line-length", env: "PARLEY_MAX_LINE_LENGTH", value: "BYTES", help: "longest line-door line (default 16384)") { c, v throws(UsageError) in
            c.lineMaxLength = try integer(v, "--max-line-length", 16...(16 << 20))
        },
        Option(flag: "--line-rate", env: "PARLEY_LINE_RATE", value: "N", help: "line-door messages per second per connection (default 20, burst 2x)") { c, v throws(UsageError) in
            let rate = try integer(v, "--line-rate", 1...1_000_000)
            c.lineRatePerSecond = Double(rate)
            c.lineBurst = Double(rate * 2)
        },
        Option(flag: "--native-rate", env: "PARLEY_NATIVE_RATE", value: "N", help: "native-door publishes per second per connection (default 50, burst 2x)") { c, v throws(UsageError) in
            let rate = try integer(v, "--native-rate", 1...10_000_000)
            c.nativeRatePerSecond = Double(rate)
            c.nativeBurst = Double(rate * 2)
        },
        Option(flag: "--write-queue-limit", env: "PARLEY_WRITE_QUEUE_LIMIT", value: "BYTES", help: "unsent bytes per connection before it is cut off (default 4194304)") { c, v throws(UsageError) in
            c.writeQueueLimit = try integer(v, "--write-queue-limit", 4096...(1 << 30))
        },
        Option(flag: "--history", env: "PARLEY_HISTORY", value: "N", help: "messages kept per room (default 1000)") { c, v throws(UsageError) in
            c.historyCapacity = try integer(v, "--history", 0...1_000_000)
        },
    ]

    private static func integer(_ text: String, _ flag: String, _ range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw UsageError(description: "\(flag) must be a whole number in \(range.lowerBound)...\(range.upperBound), got \"\(text)\"")
        }
        return value
    }

    private static func port(_ text: String, _ flag: String) throws(UsageError) -> Int {
        try integer(text, flag, 0...65535)
    }

    /// The `--help` text.
    public static var usage: String {
        var lines = ["usage: parley serve [options]", "", "Starts the Parley chat server.", "", "options (each also read from its environment variable):"]
        for option in options {
            let left = "  \(option.flag) \(option.value)"
            lines.append(left.padding(toLength: 32, withPad: " ", startingAt: 0) + option.help + "  [\(option.env)]")
        }
        lines.append("  --help                        show this help")
        return lines.joined(separator: "\n")
    }

    /// Reads the environment, then the flags. Throws a usage error for unknown flags and bad
    /// values; `--help` is reported as `nil`.
    public static func parse(arguments: [String], environment: [String: String]) throws(UsageError) -> ServerConfiguration? {
        var configuration = ServerConfiguration()
        for option in options {
            if let value = environment[option.env] {
                do { try option.apply(&configuration, value) } catch {
                    throw UsageError(description: "\(option.env): \(error.description)")
                }
            }
        }
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--help" || argument == "-h" { return nil }
            var flag = argument, inlineValue: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                flag = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            guard let option = options.first(where: { $0.flag == flag }) else {
                throw UsageError(description: "unknown option \(argument) (see parley serve --help)")
            }
            let value: String
            if let inlineValue {
                value = inlineValue
            } else {
                index += 1
                guard index < arguments.count else { throw UsageError(description: "\(flag) needs a value") }
                value = arguments[index]
            }
            try option.apply(&configuration, value)
            index += 1
        }
        return configuration
    }
}
