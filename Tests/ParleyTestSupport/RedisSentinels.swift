import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One Redis Sentinel for tests: `redis-server sentinel.conf --sentinel` on a free port of
/// 127.0.0.1, in a temporary directory (Sentinel rewrites its config file). Stopped by its own
/// pid; every wait has a timeout.
public final class RedisSentinelProcess: Sendable {
    public let port: Int
    public let directory: String
    private let process = Mutex<pid_t?>(nil)

    init(port: Int, directory: String) {
        self.port = port
        self.directory = directory
    }

    deinit { stop() }

    public var pid: Int32? { process.withLock { pid in RedisServer.reap(&pid) ? nil : pid } }

    static func start(masterName: String, masterPort: Int, quorum: Int, downAfterMillis: Int, failoverTimeoutMillis: Int,
                      timeout: Double = 10) throws -> RedisSentinelProcess {
        var lastError: Error?
        for _ in 0..<5 {
            let port = try RedisServer.freePort()
            let directory = try RedisServer.temporaryDirectory(prefix: "parley-sentinel-\(port)")
            let conf = """
                port \(port)
                bind 127.0.0.1
                daemonize no
                dir \(directory)
                logfile \(directory)/sentinel.log
                sentinel monitor \(masterName) 127.0.0.1 \(masterPort) \(quorum)
                sentinel down-after-milliseconds \(masterName) \(downAfterMillis)
                sentinel failover-timeout \(masterName) \(failoverTimeoutMillis)
                sentinel parallel-syncs \(masterName) 1

                """
            try conf.write(toFile: "\(directory)/sentinel.conf", atomically: true, encoding: .utf8)
            let sentinel = RedisSentinelProcess(port: port, directory: directory)
            let pid = try RedisServer.spawn(try RedisServer.executable("redis-server"), ["\(directory)/sentinel.conf", "--sentinel"])
            sentinel.process.withLock { $0 = pid }
            do {
                try eventuallyBlocking("Sentinel on port \(port) to answer", timeout: timeout, pollMillis: 20) {
                    if sentinel.pid == nil { throw RedisServer.Failure("Sentinel exited: \(sentinel.log.suffix(600))") }
                    return (try? sentinel.cli("PING", timeout: 2)) == "PONG"
                }
                return sentinel
            } catch {
                lastError = error
                let taken = sentinel.log.contains("Address already in use")
                sentinel.stop()
                if !taken { throw error }
            }
        }
        throw RedisServer.Failure("Sentinel could not find a free port: \(lastError.map { "\($0)" } ?? "")")
    }

    public var log: String { (try? String(contentsOfFile: "\(directory)/sentinel.log", encoding: .utf8)) ?? "" }

    @discardableResult
    public func cli(_ args: String..., timeout: Double = 10) throws -> String {
        try RedisServer.run("redis-cli", ["-h", "127.0.0.1", "-p", "\(port)"] + args, timeout: timeout)
    }

    /// SIGTERM, then SIGKILL after 5 s; removes the directory.
    public func stop() {
        if let pid {
            kill(pid, SIGTERM)
            let exited = (try? eventuallyBlocking("Sentinel to exit", timeout: 5) { self.pid == nil }) != nil
            if !exited, let pid = self.pid {
                kill(pid, SIGKILL)
                _ = try? eventuallyBlocking("Sentinel to exit", timeout: 10) { self.pid == nil }
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A master, its replicas (`--replicaof`, one unless asked) and three Sentinels (quorum 2)
/// watching it under ``masterName``, with short timeouts so a failover takes a few seconds.
/// Waits until the replicas are in sync and every Sentinel knows them and the other two
/// Sentinels.
public final class RedisSentinelDeployment: Sendable {
    public let masterName: String
    public let master: RedisServer
    public let replicas: [RedisServer]
    public var replica: RedisServer { replicas[0] }
    public let sentinels: [RedisSentinelProcess]
    public let downAfterMillis: Int

    /// `127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`
    public var sentinelList: String { sentinels.map { "127.0.0.1:\($0.port)" }.joined(separator: ",") }

    public static func start(masterName: String = "parleymaster", replicas replicaCount: Int = 1, downAfterMillis: Int = 1_000,
                             failoverTimeoutMillis: Int = 3_000, timeout: Double = 30) throws -> RedisSentinelDeployment {
        let master = try RedisServer.start()
        var replicas: [RedisServer] = []
        var sentinels: [RedisSentinelProcess] = []
        do {
            for _ in 0..<replicaCount {
                replicas.append(try RedisServer.start(extraArguments: ["--replicaof", "127.0.0.1", "\(master.port)"]))
            }
            for replica in replicas {
                try eventuallyBlocking("the replica to sync", timeout: timeout, pollMillis: 50) {
                    (try replica.cli("INFO", "replication")).contains("master_link_status:up")
                }
            }
            for _ in 0..<3 {
                sentinels.append(try RedisSentinelProcess.start(masterName: masterName, masterPort: master.port, quorum: 2,
                                                                downAfterMillis: downAfterMillis, failoverTimeoutMillis: failoverTimeoutMillis))
            }
            for sentinel in sentinels {
                try eventuallyBlocking("Sentinel \(sentinel.port) to know the replica and the other Sentinels", timeout: timeout, pollMillis: 100) {
                    let fields = try sentinel.cli("SENTINEL", "master", masterName).split(separator: "\n").map(String.init)
                    func field(_ name: String) -> String? {
                        guard let index = fields.firstIndex(of: name), index + 1 < fields.count else { return nil }
                        return fields[index + 1]
                    }
                    return field("num-slaves") == "\(replicaCount)" && field("num-other-sentinels") == "2"
                }
            }
        } catch {
            for sentinel in sentinels { sentinel.stop() }
            for replica in replicas { replica.stop() }
            master.stop()
            throw error
        }
        return RedisSentinelDeployment(masterName: masterName, master: master, replicas: replicas, sentinels: sentinels,
                                       downAfterMillis: downAfterMillis)
    }

    init(masterName: String, master: RedisServer, replicas: [RedisServer], sentinels: [RedisSentinelProcess], downAfterMillis: Int) {
        self.masterName = masterName
        self.master = master
        self.replicas = replicas
        self.sentinels = sentinels
        self.downAfterMillis = downAfterMillis
    }

    /// The port the Sentinels name as the master now.
    public func masterPort() throws -> Int? {
        let reply = try sentinels[0].cli("SENTINEL", "get-master-addr-by-name", masterName).split(separator: "\n")
        return reply.count == 2 ? Int(reply[1]) : nil
    }

    /// Stops every process (Sentinels first, so none starts a failover meanwhile).
    public func stop() {
        for sentinel in sentinels { sentinel.stop() }
        for replica in replicas { replica.stop() }
        master.stop()
    }
}
