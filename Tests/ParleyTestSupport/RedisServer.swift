import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A real `redis-server` for tests: on a free port of 127.0.0.1, in a temporary directory,
/// without snapshots (and with an append-only file when asked). Stopped by its own pid;
/// ``restart(timeout:)`` brings it back on the same port and data directory. Every wait has
/// a timeout.
public final class RedisServer: Sendable {
    public let port: Int
    /// The data directory (removed by ``stop(timeout:)`` when the server created it).
    public let directory: String
    private let arguments: [String]
    private let ownsDirectory: Bool
    /// The running server's pid (nil once it has exited and been reaped).
    private let process = Mutex<pid_t?>(nil)

    /// Test failures from here.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// `redis://127.0.0.1:PORT`
    public var url: String { "redis://127.0.0.1:\(port)" }

    /// The server's pid while it runs.
    public var pid: Int32? { process.withLock { pid in RedisServer.reap(&pid) ? nil : pid } }

    /// Starts a server and waits until it answers `PING`. `appendOnly` turns on the AOF with
    /// `appendfsync` (`always`, `everysec`, `no`); `extraArguments` are more `--name value`
    /// settings. A port somebody else took meanwhile is retried with another.
    public static func start(appendOnly: Bool = false, appendFsync: String = "always", extraArguments: [String] = [],
                             timeout: Double = 10) throws -> RedisServer {
        var lastError: Error?
        for _ in 0..<5 {
            let port = try freePort()
            let directory = try temporaryDirectory(prefix: "parley-redis-\(port)")
            var arguments = ["--appendonly", appendOnly ? "yes" : "no"]
            if appendOnly { arguments += ["--appendfsync", appendFsync] }
            let server = RedisServer(port: port, directory: directory, arguments: arguments + extraArguments, ownsDirectory: true)
            do {
                try server.launch(timeout: timeout)
                return server
            } catch let error as PortTaken {
                lastError = error
                server.stop()
                continue
            }
        }
        throw Failure("redis-server could not find a free port: \(lastError.map { "\($0)" } ?? "")")
    }

    init(port: Int, directory: String, arguments: [String], ownsDirectory: Bool) {
        self.port = port
        self.directory = directory
        self.arguments = arguments
        self.ownsDirectory = ownsDirectory
    }

    deinit {
        if let pid {
            Glibc.kill(pid, SIGKILL)
            _ = waitForExit(timeout: 10)
        }
        if ownsDirectory { try? FileManager.default.removeItem(atPath: directory) }
    }

    struct PortTaken: Error, CustomStringConvertible {
        let port: Int
        var description: String { "port \(port) is taken" }
    }

    private func launch(timeout: Double) throws {
        let executable = try RedisServer.executable("redis-server")
        let pid = try RedisServer.spawn(executable, ["--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--dir", directory,
                                                     "--daemonize", "no", "--logfile", "\(directory)/redis.log"] + arguments)
        process.withLock { $0 = pid }
        try waitUntilReady(timeout: timeout)
    }

    /// Starts a program with a clean signal mask and default handlers. (Foundation's
    /// `Process` hands the child the spawning thread's mask; test threads block SIGTERM, and a
    /// redis-server that inherits that never sees the polite stop.)
    static func spawn(_ path: String, _ arguments: [String]) throws -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let status = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        guard status == 0 else { throw Failure("posix_spawn \(path) failed: \(status)") }
        return pid
    }

    /// True (and `pid` cleared) once the process has exited; reaps it.
    static func reap(_ pid: inout pid_t?) -> Bool {
        guard let running = pid else { return true }
        var status: Int32 = 0
        let result = waitpid(running, &status, WNOHANG)
        if result == running || (result < 0 && errno == ECHILD) {
            pid = nil
            return true
        }
        return false
    }

    /// Waits up to `timeout` seconds for the server to exit.
    private func waitForExit(timeout: Double) -> Bool {
        (try? eventuallyBlocking("redis-server to exit", timeout: timeout) { process.withLock { RedisServer.reap(&$0) } }) != nil
    }

    /// Waits until the server answers `PING` (or has exited: then says why).
    public func waitUntilReady(timeout: Double = 10) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if pid == nil {
                let log = (try? String(contentsOfFile: "\(directory)/redis.log", encoding: .utf8)) ?? ""
                if log.contains("Address already in use") { throw PortTaken(port: port) }
                throw Failure("redis-server on port \(port) exited: \(log.suffix(600))")
            }
            if ping() { return }
            usleep(20_000)
        }
        throw Failure("redis-server on port \(port) did not answer PING within \(timeout) s")
    }

    /// True when the server answers `PING` within a second.
    public func ping() -> Bool {
        guard let socket = try? TestSocket(port: port) else { return false }
        guard (try? socket.send(Array("PING\r\n".utf8))) != nil else { return false }
        guard let line = try? socket.readLine(timeout: 1) else { return false }
        // A server with a password answers NOAUTH: it is up all the same.
        return line.hasPrefix("+PONG") || line.hasPrefix("-NOAUTH")
    }

    /// SIGTERM, then SIGKILL if the server has not exited after `timeout` seconds; waits for
    /// the exit. Removes the data directory it created unless `keepData`.
    public func stop(timeout: Double = 5, keepData: Bool = false) {
        if let pid {
            Glibc.kill(pid, SIGCONT)  // a paused server cannot exit
            Glibc.kill(pid, SIGTERM)
            if !waitForExit(timeout: timeout) {
                Glibc.kill(pid, SIGKILL)
                _ = waitForExit(timeout: 10)
            }
        }
        if ownsDirectory && !keepData { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// SIGKILL (a crash: nothing is flushed) and waits for the exit. The data stays for
    /// ``restart(timeout:)``.
    public func kill() {
        guard let pid else { return }
        Glibc.kill(pid, SIGKILL)
        _ = waitForExit(timeout: 10)
    }

    /// SIGSTOP: the server holds its sockets but answers nothing (a network pause).
    public func pause() {
        if let pid { Glibc.kill(pid, SIGSTOP) }
    }

    /// SIGCONT after ``pause()``.
    public func resume() {
        if let pid { Glibc.kill(pid, SIGCONT) }
    }

    /// Starts the server again on the same port and data directory (after ``kill()`` or
    /// ``stop(timeout:keepData:)`` with `keepData`).
    public func restart(timeout: Double = 10) throws {
        if pid != nil { kill() }
        // The old socket may linger for a moment; retry while the port is busy.
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            do {
                try launch(timeout: max(1, deadline.timeIntervalSinceNow))
                return
            } catch is PortTaken where Date() < deadline {
                usleep(100_000)
            }
        }
    }

    /// Runs `redis-cli -p PORT args…` and returns its output (trimmed).
    @discardableResult
    public func cli(_ args: String..., timeout: Double = 10) throws -> String {
        try cli(args, timeout: timeout)
    }

    @discardableResult
    public func cli(_ args: [String], timeout: Double = 10) throws -> String {
        try RedisServer.run("redis-cli", ["-h", "127.0.0.1", "-p", "\(port)"] + args, timeout: timeout)
    }

    // MARK: helpers

    /// Runs a tool with a timeout, returning its stdout+stderr (trimmed); throws on a non-zero
    /// exit or the timeout.
    @discardableResult
    public static func run(_ tool: String, _ arguments: [String], timeout: Double = 30) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try executable(tool))
        process.arguments = arguments
        // A file, not a pipe: a pipe that fills up would block the tool forever.
        let outputPath = NSTemporaryDirectory() + "parley-redis-cli-\(UUID().uuidString)"
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let exited = waitForExit(process, timeout: timeout)
        try? output.close()
        let text = ((try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard exited else {
            Glibc.kill(process.processIdentifier, SIGKILL)
            _ = waitForExit(process, timeout: 5)
            throw Failure("\(tool) \(arguments.joined(separator: " ")) did not finish within \(timeout) s: \(text.suffix(400))")
        }
        guard process.terminationStatus == 0 else {
            throw Failure("\(tool) \(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(text.suffix(600))")
        }
        return text
    }

    static func waitForExit(_ process: Process, timeout: Double) -> Bool {
        (try? eventuallyBlocking("\(process.executableURL?.lastPathComponent ?? "the process") to exit", timeout: timeout) { !process.isRunning }) != nil
    }

    static func executable(_ name: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") + ["/usr/bin", "/usr/local/bin", "/usr/sbin"] {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw Failure("\(name) is not installed (make deps installs redis-server and redis-tools)")
    }

    /// A port that was free a moment ago (bind 127.0.0.1:0, read it, close).
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket() failed") }
        defer { Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw Failure("bind failed: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw Failure("getsockname failed: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func temporaryDirectory(prefix: String) throws -> String {
        let path = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

/// A local Redis Cluster of masters without replicas: one `redis-server --cluster-enabled
/// yes` per master on free ports (client port and cluster bus port), joined with
/// `redis-cli --cluster create`, waited on until every node reports `cluster_state:ok`.
public final class RedisClusterServers: Sendable {
    public let nodes: [RedisServer]

    /// `127.0.0.1:P1,127.0.0.1:P2,…`, the seed list for a cluster client.
    public var seedList: String { nodes.map { "127.0.0.1:\($0.port)" }.joined(separator: ",") }

    public static func start(masters: Int = 3, timeout: Double = 60) throws -> RedisClusterServers {
        var nodes: [RedisServer] = []
        do {
            for _ in 0..<masters {
                let bus = try RedisServer.freePort()
                nodes.append(try RedisServer.start(extraArguments: [
                    "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port", "\(bus)",
                    "--cluster-node-timeout", "5000", "--cluster-require-full-coverage", "no",
                ]))
            }
            let cluster = RedisClusterServers(nodes: nodes)
            try RedisServer.run("redis-cli", ["--cluster", "create"] + nodes.map { "127.0.0.1:\($0.port)" }
                                + ["--cluster-replicas", "0", "--cluster-yes"], timeout: timeout)
            try cluster.waitUntilStable(timeout: timeout)
            return cluster
        } catch {
            for node in nodes { node.stop() }
            throw error
        }
    }

    init(nodes: [RedisServer]) { self.nodes = nodes }

    /// Waits until every node says `cluster_state:ok` and all of them agree on who serves
    /// which slots.
    public func waitUntilStable(timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        var last = ""
        while Date() < deadline {
            let infos = nodes.map { (try? $0.cli("CLUSTER", "INFO")) ?? "" }
            let slots = nodes.map { (try? $0.cli("CLUSTER", "SLOTS")) ?? "?" }
            let ok = infos.allSatisfy { $0.contains("cluster_state:ok") && $0.contains("cluster_known_nodes:\(nodes.count)") }
            if ok && Set(slots).count == 1 { return }
            last = infos.first { !$0.contains("cluster_state:ok") } ?? "slot maps differ"
            usleep(50_000)
        }
        throw Failure("the Redis Cluster did not become stable within \(timeout) s: \(last.prefix(300))")
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The node's cluster id (`CLUSTER MYID`).
    public func nodeID(_ node: RedisServer) throws -> String {
        try node.cli("CLUSTER", "MYID")
    }

    /// The node serving `slot` (per the first node's `CLUSTER NODES`).
    public func owner(ofSlot slot: Int) throws -> RedisServer {
        // Lines: id ip:port@bus flags master-id ping pong epoch link-state slot-range...
        for line in try nodes[0].cli("CLUSTER", "NODES").split(whereSeparator: \.isNewline) {
            let fields = line.split(separator: " ")
            guard fields.count >= 9, fields[2].contains("master"),
                  let portText = fields[1].split(separator: "@").first?.split(separator: ":").last,
                  let port = Int(portText) else { continue }
            for range in fields[8...] where !range.hasPrefix("[") {
                let bounds = range.split(separator: "-").compactMap { Int($0) }
                guard let low = bounds.first else { continue }
                if (low...(bounds.last ?? low)).contains(slot), let node = nodes.first(where: { $0.port == port }) {
                    return node
                }
            }
        }
        throw Failure("no node serves slot \(slot)")
    }

    /// Moves one slot (and its keys) from its owner to `target`, the way `redis-cli --cluster
    /// reshard` does: IMPORTING/MIGRATING, MIGRATE the keys, then SETSLOT NODE on every node.
    /// With `finish: false` it stops after MIGRATE of `keysToMove` (the slot stays migrating:
    /// new keys get `ASK`).
    public func moveSlot(_ slot: Int, to target: RedisServer, finish: Bool = true, migrateKeys: Bool = true) throws {
        let source = try owner(ofSlot: slot)
        guard source.port != target.port else { return }
        let sourceID = try nodeID(source), targetID = try nodeID(target)
        try target.cli("CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", sourceID)
        try source.cli("CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID)
        if migrateKeys {
            while true {
                let keys = try source.cli("CLUSTER", "GETKEYSINSLOT", "\(slot)", "100")
                    .split(whereSeparator: \.isNewline).map(String.init).filter { !$0.isEmpty }
                if keys.isEmpty { break }
                try source.cli(["MIGRATE", "127.0.0.1", "\(target.port)", "", "0", "5000", "KEYS"] + keys)
            }
        }
        guard finish else { return }
        try finishSlotMove(slot, to: target)
    }

    /// Completes a move started with `moveSlot(_:to:finish: false)`.
    public func finishSlotMove(_ slot: Int, to target: RedisServer) throws {
        let targetID = try nodeID(target)
        try target.cli("CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID)
        for node in nodes where node.port != target.port {
            try node.cli("CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID)
        }
        try waitUntilStable()
    }

    /// Stops every node.
    public func stop() {
        for node in nodes { node.stop() }
    }
}

/// A Redis server and a Redis Cluster shared by every test of a process that asks for one:
/// started on first use, stopped (by pid) when the process exits, and by a watchdog process
/// if it crashes. Tests keep apart by using key prefixes of their own; a test that kills,
/// pauses or restarts Redis starts its own.
public enum SharedRedisServers {
    private struct Started {
        var single: RedisServer?
        var cluster: RedisClusterServers?
        var stopsAtExit = false
        /// Watchdogs (one per started server set): each kills its servers once this process
        /// is gone, so a crashed test run leaves no redis-server behind.
        var watchdogs: [pid_t] = []
    }
    private static let started = Mutex(Started())

    /// The shared single server (started on first use).
    public static func single() throws -> RedisServer {
        try started.withLock { started in
            if let server = started.single { return server }
            let server = try RedisServer.start()
            started.single = server
            watch([server], &started)
            return server
        }
    }

    /// The shared three-master cluster (started on first use).
    public static func cluster() throws -> RedisClusterServers {
        try started.withLock { started in
            if let cluster = started.cluster { return cluster }
            let cluster = try RedisClusterServers.start(masters: 3)
            started.cluster = cluster
            watch(cluster.nodes, &started)
            return cluster
        }
    }

    private static func watch(_ servers: [RedisServer], _ started: inout Started) {
        if !started.stopsAtExit {
            started.stopsAtExit = true
            atexit { SharedRedisServers.stopAll() }
        }
        let pids = servers.compactMap(\.pid).map(String.init).joined(separator: " ")
        let script = "while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done; kill -9 \(pids) 2>/dev/null"
        if let watchdog = try? RedisServer.spawn("/bin/sh", ["-c", script]) { started.watchdogs.append(watchdog) }
    }

    /// Stops the shared servers (also run at exit).
    public static func stopAll() {
        let (single, cluster, watchdogs) = started.withLock { started in
            defer { started.single = nil; started.cluster = nil; started.watchdogs = [] }
            return (started.single, started.cluster, started.watchdogs)
        }
        // The watchdogs go first: once the servers have exited their pids may be reused.
        for watchdog in watchdogs {
            kill(watchdog, SIGKILL)
            var status: Int32 = 0
            waitpid(watchdog, &status, 0)
        }
        single?.stop(timeout: 2)
        cluster?.stop()
    }
}
