import ParleyIO
import Synchronization

/// A Redis Cluster's slot map and one ``RedisClient`` per master (one connection per master
/// per loop). Reloads the map with `CLUSTER SLOTS` on demand (redirections, lost nodes), on a
/// timer, and until the first load succeeds; tells observers (subscribers) after each change.
final class ClusterTopology: SubscriptionRouting {
    let seeds: [RedisEndpoint]
    let group: EventLoopGroup
    let configuration: RedisConfiguration
    private let eventHandler: (@Sendable (RedisEndpoint, Int, RedisConnectionEvent) -> Void)?

    private struct State {
        var map: ClusterSlotMap?
        var clients: [String: RedisClient] = [:]
        var refreshing = false
        var refreshAgain = false
        /// A reload waits for its turn (reloads are at least `minimumReloadGap` apart).
        var delayedReload = false
        var lastReloadFinished: UInt64 = 0
        var lastError: RedisError?
        /// Work waiting for the first slot map, bounded by `maxPendingCommands`.
        var waiters: [@Sendable (Result<ClusterSlotMap, RedisError>) -> Void] = []
        /// Callers of `refresh(completion:)`, told when the next reload ends.
        var reloadWaiters: [@Sendable (Result<Void, RedisError>) -> Void] = []
        var observers: [Int: @Sendable () -> Void] = [:]
        var nextToken = 1
        var closed = false
    }
    private let state = Mutex(State())

    init(seeds: [RedisEndpoint], group: EventLoopGroup, configuration: RedisConfiguration,
         eventHandler: (@Sendable (RedisEndpoint, Int, RedisConnectionEvent) -> Void)?) {
        precondition(!seeds.isEmpty, "a Redis Cluster client needs at least one seed node")
        self.seeds = seeds.map { var seed = $0; seed.database = 0; return seed }
        self.group = group
        self.configuration = configuration
        self.eventHandler = eventHandler
    }

    /// Loads the first map and starts the periodic reload.
    func start() {
        refresh()
        schedulePeriodicRefresh()
    }

    var map: ClusterSlotMap? { state.withLock { $0.map } }

    /// Runs `body` with the slot map: at once when one is known, else after the next load
    /// (or with its failure).
    func withMap(_ body: @escaping @Sendable (Result<ClusterSlotMap, RedisError>) -> Void) {
        enum Outcome { case now(ClusterSlotMap), waiting, refused(RedisError) }
        let outcome = state.withLock { state -> Outcome in
            if state.closed { return .refused(RedisError(.closed, "the Redis Cluster client is closed")) }
            if let map = state.map { return .now(map) }
            guard state.waiters.count < configuration.maxPendingCommands else {
                return .refused(RedisError(.queueFull, "more than \(configuration.maxPendingCommands) commands wait for the cluster slot map"))
            }
            state.waiters.append(body)
            return .waiting
        }
        switch outcome {
        case .now(let map): body(.success(map))
        case .refused(let error): body(.failure(error))
        case .waiting: refresh()
        }
    }

    /// The client for a node, created (and connecting) on first use.
    func client(for endpoint: RedisEndpoint) -> RedisClient {
        let key = endpoint.address
        if let existing = state.withLock({ $0.clients[key] }) { return existing }
        let handler = eventHandler
        let created = RedisClient(endpoint: endpoint, group: group, configuration: configuration) { loopIndex, event in
            handler?(endpoint, loopIndex, event)
        }
        let (winner, closed) = state.withLock { state -> (RedisClient, Bool) in
            if let existing = state.clients[key] { return (existing, state.closed) }
            state.clients[key] = created
            return (created, state.closed)
        }
        if winner !== created || closed { created.close() }
        return winner
    }

    /// Every node client, for status.
    var clients: [RedisClient] { state.withLock { Array($0.clients.values) } }

    var lastError: RedisError? { state.withLock { $0.lastError } }

    // MARK: reloading

    /// Reloads are at least this far apart, so a storm of redirections or failures costs one
    /// `CLUSTER SLOTS` per gap, not one per command.
    static let minimumReloadGapMillis: UInt64 = 100

    /// Reloads the map (coalesced: a request during a reload runs one more after it, and
    /// reloads keep ``minimumReloadGapMillis`` apart).
    func refresh() {
        enum Decision { case none, start([RedisEndpoint]), delay(UInt64) }
        let decision = state.withLock { state -> Decision in
            if state.closed { return .none }
            if state.refreshing {
                state.refreshAgain = true
                return .none
            }
            let now = monotonicMillis()
            let earliest = state.lastReloadFinished + Self.minimumReloadGapMillis
            if state.lastReloadFinished > 0 && now < earliest {
                if state.delayedReload { return .none }
                state.delayedReload = true
                return .delay(earliest - now)
            }
            state.refreshing = true
            var seen = Set<String>()
            return .start(((state.map?.nodes ?? []) + seeds).filter { seen.insert($0.address).inserted })
        }
        switch decision {
        case .none: break
        case .start(let candidates): load(from: candidates, index: 0, lastError: nil)
        case .delay(let millis): reload(after: millis)
        }
    }

    /// Reloads the map and calls `completion` when that reload has ended.
    func refresh(completion: @escaping @Sendable (Result<Void, RedisError>) -> Void) {
        let refused = state.withLock { state -> RedisError? in
            if state.closed { return RedisError(.closed, "the Redis Cluster client is closed") }
            guard state.reloadWaiters.count < configuration.maxPendingCommands else {
                return RedisError(.queueFull, "too many callers wait for a slot map reload")
            }
            state.reloadWaiters.append(completion)
            return nil
        }
        if let refused { return completion(.failure(refused)) }
        refresh()
    }

    /// One reload later (the `delayedReload` flag is set by the caller).
    private func reload(after millis: UInt64) {
        let loop = group.loops[0]
        loop.execute { [weak self] in
            loop.schedule(after: millis) {
                guard let self else { return }
                self.state.withLock { $0.delayedReload = false }
                self.refresh()
            }
        }
    }

    private func load(from candidates: [RedisEndpoint], index: Int, lastError: RedisError?) {
        guard index < candidates.count else {
            finish(.failure(RedisError(.cluster, "cannot load the Redis Cluster slot map: \(lastError?.message ?? "no node answered")")))
            return
        }
        let endpoint = candidates[index]
        let template = seeds[0]
        client(for: endpoint).send(RedisCommand("CLUSTER", "SLOTS")) { result in
            switch result {
            case .success(let reply):
                do throws(RedisError) {
                    let map = try ClusterSlotMap(slotsReply: reply, template: template, queried: endpoint)
                    guard !map.nodes.isEmpty else { throw RedisError(.cluster, "\(endpoint.address) serves no slots") }
                    self.finish(.success(map))
                } catch {
                    self.load(from: candidates, index: index + 1, lastError: error)
                }
            case .failure(let error):
                self.load(from: candidates, index: index + 1, lastError: error)
            }
        }
    }

    private func finish(_ result: Result<ClusterSlotMap, RedisError>) {
        let (observers, waiters, reloadWaiters, removed, again, retryAfter) = state.withLock { state in
            state.refreshing = false
            state.lastReloadFinished = monotonicMillis()
            var removed: [RedisClient] = []
            var changed = false
            switch result {
            case .success(let map):
                changed = state.map != map
                state.map = map
                state.lastError = nil
                let keep = Set(map.nodes.map(\.address)).union(seeds.map(\.address))
                for (address, client) in state.clients where !keep.contains(address) {
                    removed.append(client)
                    state.clients[address] = nil
                }
            case .failure(let error):
                state.lastError = error
            }
            let waiters = state.waiters
            state.waiters = []
            let reloadWaiters = state.reloadWaiters
            state.reloadWaiters = []
            let again = state.refreshAgain && !state.closed
            state.refreshAgain = false
            // Without any map nothing works: keep trying (with the reconnect backoff's cap).
            var retryAfter: UInt64?
            if !again, state.map == nil, !state.closed, !state.delayedReload {
                state.delayedReload = true
                retryAfter = UInt64(max(Int(Self.minimumReloadGapMillis), min(1_000, configuration.reconnectMaxDelayMillis)))
            }
            return (changed ? Array(state.observers.values) : [], waiters, reloadWaiters, removed, again, retryAfter)
        }
        for client in removed { client.close() }
        for observer in observers { observer() }
        for waiter in waiters { waiter(result) }
        for waiter in reloadWaiters { waiter(result.map { _ in () }) }
        if again {
            refresh()
        } else if let retryAfter {
            reload(after: retryAfter)
        }
    }

    private func schedulePeriodicRefresh() {
        let interval = configuration.slotMapRefreshIntervalMillis
        guard interval > 0 else { return }
        let loop = group.loops[0]
        loop.execute { [weak self] in
            loop.schedule(after: UInt64(interval)) {
                guard let self, !self.state.withLock({ $0.closed }) else { return }
                self.refresh()
                self.schedulePeriodicRefresh()
            }
        }
    }

    /// Applies a `MOVED` at once (the full reload follows) so retries go to the right node.
    func noteMoved(slot: Int, to node: RedisEndpoint) {
        let observers = state.withLock { state -> [@Sendable () -> Void] in
            guard var map = state.map, map.endpoint(forSlot: slot)?.address != node.address else { return [] }
            map.assign(slot...slot, to: node)
            state.map = map
            return Array(state.observers.values)
        }
        for observer in observers { observer() }
        refresh()
    }

    func close() {
        let clients = state.withLock { state -> [RedisClient] in
            state.closed = true
            state.observers = [:]
            let clients = Array(state.clients.values)
            state.clients = [:]
            return clients
        }
        for client in clients { client.close() }
        let (waiters, reloadWaiters) = state.withLock { state in
            let taken = (state.waiters, state.reloadWaiters)
            state.waiters = []
            state.reloadWaiters = []
            return taken
        }
        let error = RedisError(.closed, "the Redis Cluster client is closed")
        for waiter in waiters { waiter(.failure(error)) }
        for waiter in reloadWaiters { waiter(.failure(error)) }
    }

    // MARK: SubscriptionRouting

    func endpoint(for channel: RedisChannel) -> RedisEndpoint? {
        map?.endpoint(forSlot: RedisKeySlot.slot(for: channel.name))
    }

    func refreshRoutes(after error: RedisError?) {
        if let error, let first = map?.nodes.first, case .moved(let slot, let node)? = ClusterRedirection(error, from: first) {
            noteMoved(slot: slot, to: node)
        } else {
            refresh()
        }
    }

    var addresses: Set<String> { Set(map?.nodes.map(\.address) ?? []) }

    func observeRouteChanges(_ callback: @escaping @Sendable () -> Void) -> Int {
        state.withLock { state in
            let token = state.nextToken
            state.nextToken += 1
            state.observers[token] = callback
            return token
        }
    }

    func stopObserving(_ token: Int) {
        _ = state.withLock { $0.observers.removeValue(forKey: token) }
    }
}
