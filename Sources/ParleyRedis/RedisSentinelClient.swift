import ParleyIO
import Synchronization

/// A client of the master a set of Redis Sentinels watch, following failovers without a
/// restart. Everything above it (store, broker, presence) sees one ``RedisCommandExecutor``.
///
/// - The master is found by asking the Sentinels in turn `SENTINEL get-master-addr-by-name`,
///   then checked with `ROLE` (it must say `master`) before any command goes to it.
/// - It is asked again when a Sentinel publishes `+switch-master` for the name (every Sentinel
///   is subscribed), when a command gets `READONLY` (the node was demoted), and every
///   ``checkIntervalMillis`` while the master's connections are down.
/// - A new master gets a new ``RedisClient``; the old one is closed (its unanswered commands
///   fail as after a lost connection). Subscribers move their channels to the new master
///   and report ``RedisSubscriberEvent/resubscribed(_:)``.
/// - Commands sent before the first master is known wait (bounded by
///   ``RedisConfiguration/maxPendingCommands``, each for at most its command timeout).
public final class RedisSentinelClient: RedisCommandExecutor {
    public let sentinels: [RedisEndpoint]
    public let masterName: String
    public let configuration: RedisConfiguration
    public let group: EventLoopGroup
    /// How often the master is asked for again while its connections are down.
    public let checkIntervalMillis: Int

    struct Shared {
        var client: RedisClient?
        var pending: [PendingSend] = []
        var observers: [Int: @Sendable () -> Void] = [:]
        var nextObserver = 1
        var closed = false
        var failovers = 0
        var lastProblem: String?
    }
    enum PendingSend {
        case one(RedisCommand, @Sendable (Result<RedisValue, RedisError>) -> Void, deadline: UInt64)
        case batch([RedisCommand], @Sendable ([Result<RedisValue, RedisError>]) -> Void, deadline: UInt64)
    }

    let shared = Mutex(Shared())
    private let core: LoopBound<SentinelCore>
    /// Credentials, database and TLS of the master (its host and port come from Sentinel).
    let masterTemplate: RedisEndpoint

    /// - Parameters:
    ///   - sentinels: the Sentinels to ask (each may carry its own password).
    ///   - masterName: the name the Sentinels monitor the master under.
    ///   - master: credentials, database and TLS for the master; its host and port are ignored.
    public init(sentinels: [RedisEndpoint], masterName: String, master: RedisEndpoint = RedisEndpoint(),
                group: EventLoopGroup, configuration: RedisConfiguration = RedisConfiguration(), checkIntervalMillis: Int = 500) {
        precondition(!sentinels.isEmpty, "no Sentinels")
        self.sentinels = sentinels
        self.masterName = masterName
        self.masterTemplate = master
        self.group = group
        self.configuration = configuration
        self.checkIntervalMillis = max(50, checkIntervalMillis)
        let loop = group.loops[0]
        core = LoopBound(SentinelCore(loop: loop), on: loop)
        let core = self.core
        core.run { [weak self] core in
            guard let self else { return }
            core.start(owner: self)
        }
    }

    /// The master commands go to now (nil until one is found).
    public var master: RedisEndpoint? { shared.withLock { $0.client?.endpoint } }

    /// Times the client moved to another master.
    public var failovers: Int { shared.withLock { $0.failovers } }

    /// Asks the Sentinels for the master again (e.g. after `READONLY`).
    public func rediscover() {
        core.run { $0.discover() }
    }

    public func send(_ command: RedisCommand, completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) {
        let wrapped: @Sendable (Result<RedisValue, RedisError>) -> Void = { [weak self] result in
            if case .failure(let error) = result, error.serverCode == "READONLY" { self?.rediscover() }
            completion(result)
        }
        guard let client = clientOrQueue(.one(command, wrapped, deadline: deadline(command))) else { return }
        client.send(command, completion: wrapped)
    }

    public func send(batch commands: [RedisCommand], completion: @escaping @Sendable ([Result<RedisValue, RedisError>]) -> Void) {
        let wrapped: @Sendable ([Result<RedisValue, RedisError>]) -> Void = { [weak self] results in
            if results.contains(where: { if case .failure(let error) = $0 { error.serverCode == "READONLY" } else { false } }) {
                self?.rediscover()
            }
            completion(results)
        }
        let timeout = commands.map { deadline($0) }.max() ?? 0
        guard let client = clientOrQueue(.batch(commands, wrapped, deadline: timeout)) else { return }
        client.send(batch: commands, completion: wrapped)
    }

    public func broadcast(_ command: RedisCommand, completion: @escaping @Sendable (Result<[RedisValue], RedisError>) -> Void) {
        send(command) { result in completion(result.map { [$0] }) }
    }

    public func makeSubscriber(on loop: EventLoop, handler: @escaping @Sendable (RedisSubscriberEvent) -> Void) -> RedisSubscriber {
        RedisSubscriber(router: SentinelRouter(owner: self), loop: loop, configuration: configuration, handler: handler)
    }

    public var status: RedisStatus {
        let (client, closed, problem) = shared.withLock { ($0.client, $0.closed, $0.lastProblem) }
        if closed { return RedisStatus(state: .closed, connections: 0, readyConnections: 0, reconnects: 0) }
        guard let client else {
            return RedisStatus(state: problem == nil ? .connecting : .down,
                               message: problem.map { "no Redis master from Sentinel: \($0)" },
                               connections: 0, readyConnections: 0, reconnects: 0)
        }
        return client.status
    }

    deinit { close() }

    public func close() {
        let (client, pending) = shared.withLock { shared -> (RedisClient?, [PendingSend]) in
            guard !shared.closed else { return (nil, []) }
            shared.closed = true
            defer { shared.client = nil; shared.pending = [] }
            return (shared.client, shared.pending)
        }
        client?.close()
        Self.fail(pending, RedisError(.closed, "the Redis Sentinel client is closed"))
        core.run { $0.close() }
    }

    // MARK: internals

    private func deadline(_ command: RedisCommand) -> UInt64 {
        monotonicMillis() + UInt64(max(1, command.timeoutMillis ?? configuration.commandTimeoutMillis))
    }

    /// The current client, or nil after queueing (or refusing) `send` while there is none.
    private func clientOrQueue(_ send: PendingSend) -> RedisClient? {
        let outcome = shared.withLock { shared -> (RedisClient?, RedisError?) in
            if shared.closed { return (nil, RedisError(.closed, "the Redis Sentinel client is closed")) }
            if let client = shared.client { return (client, nil) }
            guard shared.pending.count < configuration.maxPendingCommands else {
                return (nil, RedisError(.queueFull, "more than \(configuration.maxPendingCommands) Redis commands waiting for a master from Sentinel"))
            }
            shared.pending.append(send)
            return (nil, nil)
        }
        if let error = outcome.1 { Self.fail([send], error) }
        return outcome.0
    }

    static func fail(_ sends: [PendingSend], _ error: RedisError) {
        for send in sends {
            switch send {
            case .one(_, let completion, _): completion(.failure(error))
            case .batch(let commands, let completion, _): completion(Array(repeating: .failure(error), count: commands.count))
            }
        }
    }

    /// Fails waiting commands whose time is up (no master was found for them in time).
    func expirePending(problem: String?) {
        let now = monotonicMillis()
        let expired = shared.withLock { shared -> [PendingSend] in
            var expired: [PendingSend] = []
            shared.pending.removeAll { send in
                let deadline: UInt64
                switch send {
                case .one(_, _, let value), .batch(_, _, let value): deadline = value
                }
                if deadline <= now { expired.append(send); return true }
                return false
            }
            return expired
        }
        Self.fail(expired, RedisError(.connection, "no Redis master known from Sentinel in time" + (problem.map { ": \($0)" } ?? "")))
    }

    /// The Sentinels named `endpoint` as the master and it said so itself: send there from now on.
    func adopt(_ endpoint: RedisEndpoint) {
        let existing = shared.withLock { $0.client }
        if let existing, existing.endpoint == endpoint { return }
        let client = RedisClient(endpoint: endpoint, group: group, configuration: configuration) { [weak self] _, event in
            if case .down = event { self?.rediscover() }
        }
        let outcome = shared.withLock { shared -> (old: RedisClient?, pending: [PendingSend], observers: [@Sendable () -> Void])? in
            guard !shared.closed else { return nil }
            let old = shared.client
            shared.client = client
            shared.lastProblem = nil
            if old != nil { shared.failovers += 1 }
            defer { shared.pending = [] }
            return (old, shared.pending, Array(shared.observers.values))
        }
        guard let outcome else {
            client.close()
            return
        }
        outcome.old?.close()
        for send in outcome.pending {
            switch send {
            case .one(let command, let completion, _): client.send(command, completion: completion)
            case .batch(let commands, let completion, _): client.send(batch: commands, completion: completion)
            }
        }
        for observer in outcome.observers { observer() }
    }

    func noMaster(_ problem: String) {
        shared.withLock { $0.lastProblem = problem }
    }

    func observe(_ callback: @escaping @Sendable () -> Void) -> Int {
        shared.withLock { shared in
            let token = shared.nextObserver
            shared.nextObserver += 1
            shared.observers[token] = callback
            return token
        }
    }

    func stopObserving(_ token: Int) {
        _ = shared.withLock { $0.observers.removeValue(forKey: token) }
    }

    /// Parses a `+switch-master` message: `NAME OLD-IP OLD-PORT NEW-IP NEW-PORT`.
    static func switchedMaster(_ payload: [UInt8], name: String) -> Bool {
        let words = String(decoding: payload, as: UTF8.self).split(separator: " ")
        return words.count == 5 && words[0] == name
    }

    /// The reply to `SENTINEL get-master-addr-by-name`: `[IP, PORT]`, or null when unknown.
    static func masterAddress(_ reply: RedisValue) -> (host: String, port: Int)? {
        guard let items = reply.array, items.count == 2, let host = items[0].string, !host.isEmpty,
              let portText = items[1].string, let port = Int(portText), port > 0, port < 65536 else { return nil }
        return (host, port)
    }

    /// True when a `ROLE` reply says `master`.
    static func saysMaster(_ reply: RedisValue) -> Bool {
        reply.array?.first?.string == "master"
    }
}

/// Discovery, on the client's first loop only.
final class SentinelCore {
    let loop: EventLoop
    private weak var owner: RedisSentinelClient?
    private var subscribers: [RedisSubscriber] = []
    private var ticker: LoopTimer?
    private var discovering = false
    private var again = false
    private var probes: [RedisConnection] = []
    private var isClosed = false

    init(loop: EventLoop) { self.loop = loop }

    func start(owner: RedisSentinelClient) {
        guard !isClosed else { return }
        self.owner = owner
        var watch = RedisConfiguration()
        watch.protocolPreference = .resp2
        watch.connectTimeoutMillis = 1_000
        watch.commandTimeoutMillis = 1_000
        watch.reconnectMaxDelayMillis = 1_000
        watch.pingIntervalMillis = 1_000
        watch.clientName = owner.configuration.clientName
        watch.tls = owner.configuration.tls
        probeConfiguration.tls = owner.configuration.tls
        let name = owner.masterName
        let box = LoopBound(self, on: loop)
        for sentinel in owner.sentinels {
            let subscriber = RedisSubscriber(router: SingleNodeRouter(endpoint: sentinel), loop: loop, configuration: watch) { event in
                switch event {
                case .message(_, let payload) where RedisSentinelClient.switchedMaster(payload, name: name):
                    box.run { $0.discover() }
                case .resubscribed:
                    // The Sentinel was away: a switch may have been missed.
                    box.run { $0.discover() }
                default:
                    break
                }
            }
            subscriber.subscribe(.plain("+switch-master"))
            subscribers.append(subscriber)
        }
        let interval = UInt64(owner.checkIntervalMillis)
        ticker = LoopTimer(loop: loop)
        ticker?.start(after: interval, repeating: interval) { [weak self] in self?.tick() }
        discover()
    }

    private func tick() {
        guard let owner, !isClosed else { return }
        owner.expirePending(problem: owner.shared.withLock { $0.lastProblem })
        let client = owner.shared.withLock { $0.client }
        switch client?.status.state {
        case nil, .down?: discover()
        default: break
        }
    }

    func discover() {
        guard !isClosed, owner != nil else { return }
        if discovering {
            again = true
            return
        }
        discovering = true
        ask(0, problems: [])
    }

    /// Short-lived connections that ask one question (a Sentinel, or a master's `ROLE`).
    private var probeConfiguration: RedisConfiguration = {
        var probe = RedisConfiguration()
        probe.protocolPreference = .resp2
        probe.connectTimeoutMillis = 1_000
        probe.commandTimeoutMillis = 1_000
        probe.pingIntervalMillis = 0
        return probe
    }()

    /// One request on a short-lived connection.
    private func request(_ endpoint: RedisEndpoint, _ command: RedisCommand, completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        let connection = RedisConnection(endpoint: endpoint, configuration: probeConfiguration, loop: loop)
        probes.append(connection)
        connection.start()
        connection.send(command) { [weak self, weak connection] result in
            if let self, let connection {
                connection.close()
                self.probes.removeAll { $0 === connection }
            }
            completion(result)
        }
    }

    private func ask(_ index: Int, problems: [String]) {
        guard let owner, !isClosed else { return finish() }
        guard index < owner.sentinels.count else {
            owner.noMaster(problems.joined(separator: "; "))
            return finish()
        }
        let sentinel = owner.sentinels[index]
        let template = owner.masterTemplate
        request(sentinel, RedisCommand("SENTINEL", "get-master-addr-by-name", .string(owner.masterName))) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let reply):
                guard let (host, port) = RedisSentinelClient.masterAddress(reply) else {
                    return self.ask(index + 1, problems: problems + ["\(sentinel.address) knows no master \(owner.masterName)"])
                }
                let master = template.moved(to: host, port: port)
                self.request(master, RedisCommand("ROLE")) { [weak self] result in
                    guard let self else { return }
                    switch result {
                    case .success(let role) where RedisSentinelClient.saysMaster(role):
                        self.owner?.adopt(master)
                        self.finish()
                    case .success(let role):
                        self.ask(index + 1, problems: problems + ["\(master.address) (from \(sentinel.address)) is not a master: \(role)"])
                    case .failure(let error):
                        self.ask(index + 1, problems: problems + ["\(master.address) (from \(sentinel.address)): \(error.message)"])
                    }
                }
            case .failure(let error):
                self.ask(index + 1, problems: problems + ["Sentinel \(sentinel.address): \(error.message)"])
            }
        }
    }

    private func finish() {
        discovering = false
        if again && !isClosed {
            again = false
            // Not at once: a failing Sentinel would otherwise be asked in a tight loop.
            loop.schedule(after: 50) { [weak self] in self?.discover() }
        }
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        ticker?.stop()
        for subscriber in subscribers { subscriber.close() }
        subscribers = []
        for probe in probes { probe.close() }
        probes = []
    }
}

/// Routes every channel to the current master; tells subscribers when it changes.
final class SentinelRouter: SubscriptionRouting {
    private weak let owner: RedisSentinelClient?
    init(owner: RedisSentinelClient) { self.owner = owner }
    func endpoint(for channel: RedisChannel) -> RedisEndpoint? { owner?.master }
    func refreshRoutes(after error: RedisError?) { owner?.rediscover() }
    var addresses: Set<String> { owner?.master.map { [$0.address] } ?? [] }
    func observeRouteChanges(_ callback: @escaping @Sendable () -> Void) -> Int { owner?.observe(callback) ?? 0 }
    func stopObserving(_ token: Int) { owner?.stopObserving(token) }
}
