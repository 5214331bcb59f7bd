import ParleyIO

/// A client of a Redis Cluster: learns the slot map from the seed nodes (`CLUSTER SLOTS`),
/// keeps one pipelined connection per master per loop, and sends each command to the master
/// of its key's slot (``RedisCommand/keyIndex``; `EVALSHA`/`EVAL` by their first key).
///
/// - `MOVED`: the slot map entry is updated at once, a full reload follows, and the command
///   is retried on the new master.
/// - `ASK` (a slot being migrated): the command is retried once on the target, preceded by
///   `ASKING` on the same connection.
/// - `TRYAGAIN`: retried after a short pause. At most
///   ``RedisConfiguration/maxRedirections`` redirections per command.
/// - A connection failure to a master reloads the map (a failover may have moved its slots).
///
/// Subscribers made by ``makeSubscriber(on:handler:)`` subscribe each sharded channel on
/// the master of its slot and follow the slot when it moves.
public final class RedisClusterClient: RedisCommandExecutor {
    public let group: EventLoopGroup
    public let configuration: RedisConfiguration
    let topology: ClusterTopology

    /// Starts loading the slot map from `seeds` (any reachable node will do; the list is
    /// also the fallback when every known master is down). `eventHandler` hears every
    /// connection's state changes, with the node and the loop index.
    public init(seeds: [RedisEndpoint], group: EventLoopGroup, configuration: RedisConfiguration = RedisConfiguration(),
                eventHandler: (@Sendable (_ node: RedisEndpoint, _ loopIndex: Int, _ event: RedisConnectionEvent) -> Void)? = nil) {
        self.group = group
        self.configuration = configuration
        topology = ClusterTopology(seeds: seeds, group: group, configuration: configuration, eventHandler: eventHandler)
        topology.start()
    }

    /// The masters of the current slot map (empty before the first load).
    public var masters: [RedisEndpoint] { topology.map?.nodes ?? [] }

    /// The master serving `slot` in the current map.
    public func master(forSlot slot: Int) -> RedisEndpoint? { topology.map?.endpoint(forSlot: slot) }

    /// Reloads the slot map now; `completion` runs after the reload (or the one in progress).
    public func refreshSlotMap(completion: (@Sendable (Result<Void, RedisError>) -> Void)? = nil) {
        if let completion { topology.refresh(completion: completion) } else { topology.refresh() }
    }

    deinit { topology.close() }

    public func send(_ command: RedisCommand, completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) {
        let slot = command.routingKey.map { RedisKeySlot.slot(for: $0) }
        execute(command, slot: slot, redirections: 0, target: nil, completion: completion)
    }

    public func send(batch commands: [RedisCommand], completion: @escaping @Sendable ([Result<RedisValue, RedisError>]) -> Void) {
        guard !commands.isEmpty else { return completion([]) }
        let slot = commands.lazy.compactMap(\.routingKey).first.map { RedisKeySlot.slot(for: $0) }
        executeBatch(commands, slot: slot, redirections: 0, target: nil, asking: false, completion: completion)
    }

    public func broadcast(_ command: RedisCommand, completion: @escaping @Sendable (Result<[RedisValue], RedisError>) -> Void) {
        topology.withMap { [topology] result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let map):
                let collector = BroadcastCollector(count: map.nodes.count, completion: completion)
                for (index, node) in map.nodes.enumerated() {
                    topology.client(for: node).send(command) { collector.set(index, $0) }
                }
            }
        }
    }

    public func makeSubscriber(on loop: EventLoop, handler: @escaping @Sendable (RedisSubscriberEvent) -> Void) -> RedisSubscriber {
        RedisSubscriber(router: topology, loop: loop, configuration: configuration, handler: handler)
    }

    /// Down when no slot map could be loaded or any master's connection is down.
    public var status: RedisStatus {
        let nodes = RedisStatus.combined(topology.clients.map(\.status))
        guard topology.map != nil else {
            if let error = topology.lastError {
                return RedisStatus(state: .down, message: error.message, connections: nodes.connections,
                                   readyConnections: nodes.readyConnections, reconnects: nodes.reconnects)
            }
            return RedisStatus(state: .connecting, connections: nodes.connections,
                               readyConnections: nodes.readyConnections, reconnects: nodes.reconnects)
        }
        return nodes
    }

    public func close() {
        topology.close()
    }

    // MARK: routing

    /// Picks the node (the slot's master, an `ASK` target, or any master for keyless
    /// commands) and calls `body` with its client.
    private func withNode(slot: Int?, target: RedisEndpoint?,
                          _ body: @escaping @Sendable (Result<(RedisClient, RedisEndpoint), RedisError>) -> Void) {
        if let target {
            body(.success((topology.client(for: target), target)))
            return
        }
        topology.withMap { [topology] result in
            switch result {
            case .failure(let error):
                body(.failure(error))
            case .success(let map):
                let node = slot.map { map.endpoint(forSlot: $0) } ?? map.nodes.randomElement()
                guard let node else {
                    topology.refresh()
                    body(.failure(RedisError(.cluster, "no Redis Cluster master serves slot \(slot ?? -1)")))
                    return
                }
                body(.success((topology.client(for: node), node)))
            }
        }
    }

    private func execute(_ command: RedisCommand, slot: Int?, redirections: Int, target: RedisEndpoint?,
                         completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) {
        withNode(slot: slot, target: target) { [self] picked in
            switch picked {
            case .failure(let error):
                completion(.failure(error))
            case .success(let (client, node)):
                let handle: @Sendable (Result<RedisValue, RedisError>) -> Void = { result in
                    self.handle(result, from: node, command: command, slot: slot, redirections: redirections, completion: completion)
                }
                if target != nil {
                    // ASK: the target accepts the key only right after ASKING, on the same connection.
                    client.send(batch: [RedisCommand("ASKING"), command]) { results in handle(results[1]) }
                } else {
                    client.send(command, completion: handle)
                }
            }
        }
    }

    private func handle(_ result: Result<RedisValue, RedisError>, from node: RedisEndpoint, command: RedisCommand, slot: Int?,
                        redirections: Int, completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) {
        guard case .failure(let error) = result else { return completion(result) }
        if error.code == .connection {
            topology.refresh()
            return completion(result)
        }
        if error.serverCode == "CLUSTERDOWN" { topology.refresh() }
        guard let redirection = ClusterRedirection(error, from: node) else { return completion(result) }
        guard redirections < configuration.maxRedirections else {
            return completion(.failure(RedisError(.cluster, "gave up after \(redirections) Redis Cluster redirections: \(error.message)")))
        }
        switch redirection {
        case .moved(let movedSlot, let target):
            topology.noteMoved(slot: movedSlot, to: target)
            execute(command, slot: slot ?? movedSlot, redirections: redirections + 1, target: nil, completion: completion)
        case .ask(_, let target):
            execute(command, slot: slot, redirections: redirections + 1, target: target, completion: completion)
        case .tryAgain:
            retryLater(attempt: redirections) {
                self.execute(command, slot: slot, redirections: redirections + 1, target: nil, completion: completion)
            }
        }
    }

    private func executeBatch(_ commands: [RedisCommand], slot: Int?, redirections: Int, target: RedisEndpoint?, asking: Bool,
                              completion: @escaping @Sendable ([Result<RedisValue, RedisError>]) -> Void) {
        withNode(slot: slot, target: target) { [self] picked in
            switch picked {
            case .failure(let error):
                completion(Array(repeating: .failure(error), count: commands.count))
            case .success(let (client, node)):
                // After ASK every command needs its own ASKING in front.
                let sent = asking ? commands.flatMap { [RedisCommand("ASKING"), $0] } : commands
                client.send(batch: sent) { raw in
                    let results = asking ? stride(from: 1, to: raw.count, by: 2).map { raw[$0] } : raw
                    self.handleBatch(results, from: node, commands: commands, slot: slot, redirections: redirections, completion: completion)
                }
            }
        }
    }

    private func handleBatch(_ results: [Result<RedisValue, RedisError>], from node: RedisEndpoint, commands: [RedisCommand],
                             slot: Int?, redirections: Int,
                             completion: @escaping @Sendable ([Result<RedisValue, RedisError>]) -> Void) {
        let errors = results.compactMap { result -> RedisError? in
            if case .failure(let error) = result { return error }
            return nil
        }
        if errors.contains(where: { $0.code == .connection }) { topology.refresh() }
        guard let redirection = errors.lazy.compactMap({ ClusterRedirection($0, from: node) }).first,
              redirections < configuration.maxRedirections, Self.nothingRan(results, commands) else {
            return completion(results)
        }
        switch redirection {
        case .moved(let movedSlot, let target):
            topology.noteMoved(slot: movedSlot, to: target)
            executeBatch(commands, slot: slot ?? movedSlot, redirections: redirections + 1, target: nil, asking: false, completion: completion)
        case .ask(_, let target):
            executeBatch(commands, slot: slot, redirections: redirections + 1, target: target, asking: true, completion: completion)
        case .tryAgain:
            retryLater(attempt: redirections) {
                self.executeBatch(commands, slot: slot, redirections: redirections + 1, target: nil, asking: false, completion: completion)
            }
        }
    }

    /// A batch may be sent again only if none of it took effect: every reply is an error, or
    /// it is a `MULTI` … `EXEC` whose `EXEC` was aborted.
    private static func nothingRan(_ results: [Result<RedisValue, RedisError>], _ commands: [RedisCommand]) -> Bool {
        let allFailed = results.allSatisfy { if case .failure = $0 { return true } else { return false } }
        if allFailed { return true }
        guard commands.first?.name == "MULTI", commands.last?.name == "EXEC",
              case .failure(let error)? = results.last else { return false }
        return error.serverCode == "EXECABORT"
    }

    private func retryLater(attempt: Int, _ body: @escaping @Sendable () -> Void) {
        let delay = UInt64(min(500, 20 << min(attempt, 5)))
        let loop = group.currentLoop ?? group.next()
        loop.executeNowOrSoon { loop.schedule(after: delay, body) }
    }
}
