import Foundation
import ParleyIO

/// `parley bench fanout|idle ...`: parses flags, runs, prints, and returns the exit status
/// (0 only for a clean run; 1 for a run with loss or errors; 2 for a usage error).
public enum BenchCommand {
    /// Subcommands this module runs. (`publish-durable` lives in the executable.)
    public static let subcommands = ["fanout", "idle"]

    public static let usage = """
    usage: parley bench fanout --url URL [--url URL2 ...] [--door native|socketio|line] [--rooms R]
                               [--members M] [--publishers P] [--rate MSGS_PER_S|max] [--window N]
                               [--size BYTES] [--sio-identify all|publishers]
                               [--duration S] [--warmup S] [--loops N] [--drain S] [--server-pid PID ...]
                               [--json]
           parley bench idle --url URL [--url URL2 ...] --connections N [--server-pid PID ...]
                               [--report-at 5000,10000,19000] [--per-address N] [--hold S]
                               [--room NAME] [--loops N] [--json]

    URLs: ws://127.0.0.1:8080/v3/websocket (native), http://127.0.0.1:5000/socket.io/ (socketio),
    tcp://127.0.0.1:8081 (line). --rate is messages per second over all publishers; with --rate max
    each publisher keeps at most --window messages in flight (an echo to the sender lands one).
    Several --url (cluster nodes): fanout puts every publisher on the first and spreads the other
    members round robin, and reports latency per node too; idle spreads its connections round
    robin. Several --server-pid (one per node): fanout reports the sum of their CPU time over the
    measured window, idle the sum of their resident memory.
    Exit status: 0 clean, 1 loss/duplicates/errors, 2 usage.
    """

    struct Usage: Error { let message: String }

    /// Servers one run may spread over (each adds a latency histogram per bench loop).
    static let maxURLs = 64

    public static func run(_ subcommand: String, arguments: [String]) -> Int32 {
        do {
            switch subcommand {
            case "fanout":
                let options = try parseFanout(arguments)
                let (limit, capacity) = IdleRun.capacity()
                if options.totalConnections > capacity {
                    log("parley bench fanout: cannot open \(options.totalConnections) connections (rooms × members): this process may open at most \(limit) files (hard limit RLIMIT_NOFILE), so at most \(capacity) connections")
                    return 2
                }
                let result = FanoutRun.run(options) { note in if !options.json { log(note) } }
                print(options.json ? result.json : result.table)
                return result.isClean ? 0 : 1
            case "idle":
                let options = try parseIdle(arguments)
                let (limit, capacity) = IdleRun.capacity()
                if options.connections > capacity {
                    log("parley bench idle: cannot hold \(options.connections) connections: this process may open at most \(limit) files (hard limit RLIMIT_NOFILE), so at most \(capacity) connections")
                    return 2
                }
                let result = IdleRun.run(options) { note in if !options.json { log(note) } }
                print(options.json ? result.json : result.table)
                return result.isClean ? 0 : 1
            default:
                throw Usage(message: "unknown bench \"\(subcommand)\"")
            }
        } catch let error as Usage {
            log("parley bench: \(error.message)\n\n\(usage)")
            return 2
        } catch {
            log("parley bench: \(error)")
            return 2
        }
    }

    static func log(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// Splits `--flag value` / `--flag=value` pairs; `--json` takes no value.
    static func pairs(_ arguments: [String]) throws -> [(String, String)] {
        var result: [(String, String)] = []
        var i = 0
        while i < arguments.count {
            let argument = arguments[i]
            guard argument.hasPrefix("--") else { throw Usage(message: "unexpected argument \(argument)") }
            if argument == "--json" { result.append((argument, "true")); i += 1; continue }
            if let eq = argument.firstIndex(of: "=") {
                result.append((String(argument[..<eq]), String(argument[argument.index(after: eq)...])))
                i += 1
                continue
            }
            guard i + 1 < arguments.count else { throw Usage(message: "\(argument) needs a value") }
            result.append((argument, arguments[i + 1]))
            i += 2
        }
        return result
    }

    static func int(_ flag: String, _ value: String, min: Int = 1) throws -> Int {
        guard let n = Int(value.replacingOccurrences(of: "_", with: "")), n >= min else {
            throw Usage(message: "\(flag) must be a whole number ≥ \(min), got \"\(value)\"")
        }
        return n
    }

    static func seconds(_ flag: String, _ value: String) throws -> Double {
        guard let s = Double(value), s >= 0, s.isFinite else { throw Usage(message: "\(flag) must be seconds ≥ 0, got \"\(value)\"") }
        return s
    }

    static func url(_ value: String) throws -> BenchURL {
        guard let url = BenchURL(parsing: value) else { throw Usage(message: "--url must look like ws://127.0.0.1:8080/v3/websocket, got \"\(value)\"") }
        return url
    }

    public static func parseFanout(_ arguments: [String]) throws -> FanoutOptions {
        var o = FanoutOptions()
        o.loops = EventLoopGroup.coreCount
        var urls: [BenchURL] = []
        for (flag, value) in try pairs(arguments) {
            switch flag {
            case "--url": urls.append(try url(value))
            case "--door":
                guard let door = BenchDoor(rawValue: value) else { throw Usage(message: "--door must be native, socketio or line") }
                o.door = door
            case "--rooms": o.rooms = try int(flag, value)
            case "--members": o.members = try int(flag, value)
            case "--publishers": o.publishers = try int(flag, value)
            case "--rate":
                if value == "max" { o.rate = .max } else {
                    guard let r = Double(value), r > 0 else { throw Usage(message: "--rate must be messages per second or max") }
                    o.rate = .perSecond(r)
                }
            case "--window": o.window = try int(flag, value)
            case "--sio-identify":
                guard value == "all" || value == "publishers" else {
                    throw Usage(message: "--sio-identify must be all or publishers, got \"\(value)\"")
                }
                o.identifySocketIOMembers = value == "all"
            case "--size": o.size = try int(flag, value)
            case "--duration": o.durationSeconds = try seconds(flag, value)
            case "--warmup": o.warmupSeconds = try seconds(flag, value)
            case "--loops": o.loops = try int(flag, value)
            case "--drain": o.drainSeconds = try seconds(flag, value)
            case "--server-pid":
                guard let pid = Int32(exactly: try int(flag, value)) else { throw Usage(message: "--server-pid is too large") }
                o.serverPIDs.append(pid)
            case "--channel": o.channel = value
            case "--connect-concurrency": o.connectConcurrency = try int(flag, value)
            case "--json": o.json = true
            default: throw Usage(message: "unknown option \(flag)")
            }
        }
        guard !urls.isEmpty else { throw Usage(message: "--url is required") }
        guard urls.count <= maxURLs, o.serverPIDs.count <= maxURLs else {
            throw Usage(message: "at most \(maxURLs) --url and \(maxURLs) --server-pid")
        }
        o.urls = urls
        guard o.publishers <= o.rooms * o.members else { throw Usage(message: "--publishers must be at most rooms × members (publishers are members)") }
        if o.door != .native && o.rooms != 1 { throw Usage(message: "the \(o.door.rawValue) door has one room (the lobby): use --rooms 1") }
        guard o.durationSeconds > 0 else { throw Usage(message: "--duration must be more than 0") }
        return o
    }

    public static func parseIdle(_ arguments: [String]) throws -> IdleOptions {
        var o = IdleOptions()
        o.loops = EventLoopGroup.coreCount
        var urls: [BenchURL] = []
        var sawCount = false
        for (flag, value) in try pairs(arguments) {
            switch flag {
            case "--url": urls.append(try url(value))
            case "--connections": o.connections = try int(flag, value); sawCount = true
            case "--server-pid":
                guard let pid = Int32(exactly: try int(flag, value)) else { throw Usage(message: "--server-pid is too large") }
                o.serverPIDs.append(pid)
            case "--report-at": o.reportAt = try value.split(separator: ",").map { try int(flag, String($0)) }
            case "--per-address": o.perAddress = try int(flag, value)
            case "--hold": o.holdSeconds = try seconds(flag, value)
            case "--loops": o.loops = try int(flag, value)
            case "--channel": o.channel = value
            case "--room": o.room = value
            case "--connect-concurrency": o.connectConcurrency = try int(flag, value)
            case "--json": o.json = true
            default: throw Usage(message: "unknown option \(flag)")
            }
        }
        guard !urls.isEmpty, sawCount else { throw Usage(message: "--url and --connections are required") }
        guard urls.count <= maxURLs, o.serverPIDs.count <= maxURLs else {
            throw Usage(message: "at most \(maxURLs) --url and \(maxURLs) --server-pid")
        }
        o.urls = urls
        guard o.connections <= 254 * o.perAddress else { throw Usage(message: "--connections exceeds 254 source addresses × --per-address") }
        return o
    }
}
