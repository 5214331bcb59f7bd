import ParleyIO
import Synchronization

/// A pub/sub channel: plain (`SUBSCRIBE`/`PUBLISH`) or sharded (`SSUBSCRIBE`/`SPUBLISH`,
/// Redis 7: in a cluster it lives on the shard of its name's slot).
public struct RedisChannel: Sendable, Hashable, CustomStringConvertible {
    public var name: String
    public var isSharded: Bool

    public init(name: String, isSharded: Bool) {
        self.name = name
        self.isSharded = isSharded
    }

    public static func plain(_ name: String) -> RedisChannel { RedisChannel(name: name, isSharded: false) }
    public static func sharded(_ name: String) -> RedisChannel { RedisChannel(name: name, isSharded: true) }

    public var description: String { isSharded ? "sharded:\(name)" : name }
}

/// What a subscriber tells its owner, on the subscriber's loop.
public enum RedisSubscriberEvent: Sendable {
    /// A message published on a subscribed channel.
    case message(RedisChannel, [UInt8])
    /// A subscriber connection (to the node at the endpoint) changed state.
    case connection(RedisEndpoint, RedisConnectionEvent)
    /// These channels, subscribed before, are subscribed again after a lost connection or
    /// after their slot moved to another node. Messages published in between were missed:
    /// refill from the stream.
    case resubscribed([RedisChannel])
    /// Redis refused to subscribe a channel (not a redirection, which is followed). The
    /// channel stays wanted and is tried again on the next reconnect.
    case subscriptionFailed(RedisChannel, RedisError)
}

/// Where each channel's subscription lives: the one server, or the master of its slot.
protocol SubscriptionRouting: AnyObject, Sendable {
    /// The node serving `channel` now; nil while no slot map is known.
    func endpoint(for channel: RedisChannel) -> RedisEndpoint?
    /// Asks for a fresh route table (after a redirection error, which may say where the
    /// channel's slot is now, or after Redis dropped a subscription itself).
    func refreshRoutes(after error: RedisError?)
    /// The node addresses routes currently lead to.
    var addresses: Set<String> { get }
    /// `callback` runs, on any thread, after each route change; returns a token.
    func observeRouteChanges(_ callback: @escaping @Sendable () -> Void) -> Int
    func stopObserving(_ token: Int)
}

/// Pub/sub subscriptions on one event loop, counted by use: ``subscribe(_:completion:)``
/// adds one use of a channel and ``unsubscribe(_:)`` removes one; Redis is subscribed while
/// a channel has at least one use. Messages and events go to the handler on ``loop``.
///
/// Connections (one per node, subscriber mode) reconnect by themselves and re-subscribe every
/// channel in use, then report ``RedisSubscriberEvent/resubscribed(_:)``. In a Redis Cluster
/// a channel whose slot moves is subscribed again on its new master, with the same event.
/// Every method may be called from any thread.
public final class RedisSubscriber: Sendable {
    public let loop: EventLoop
    private let core: LoopBound<SubscriberCore>
    private let board: StatusBoard
    private let router: any SubscriptionRouting
    private let observerToken: Int

    init(router: any SubscriptionRouting, loop: EventLoop, configuration: RedisConfiguration,
         handler: @escaping @Sendable (RedisSubscriberEvent) -> Void) {
        self.loop = loop
        self.router = router
        let board = StatusBoard()
        self.board = board
        let core = LoopBound(SubscriberCore(router: router, loop: loop, configuration: configuration, board: board, handler: handler), on: loop)
        self.core = core
        observerToken = router.observeRouteChanges {
            core.run { $0.routesChanged() }
        }
    }

    /// Adds one use of `channel`, subscribing it in Redis if it is the first. `completion`
    /// (on ``loop``) runs once the subscription is confirmed (at once if it already is): from
    /// then on every message published on the channel is delivered, so a history read
    /// started then misses nothing.
    public func subscribe(_ channel: RedisChannel, completion: (@Sendable (Result<Void, RedisError>) -> Void)? = nil) {
        // A stopped loop drops what it is given: answer here, or the caller waits forever.
        guard core.tryRun({ $0.subscribe(channel, completion: completion) }) else {
            completion?(.failure(RedisError(.closed, "the Redis subscriber's event loop has stopped")))
            return
        }
    }

    /// Removes one use of `channel`, unsubscribing it in Redis with the last.
    public func unsubscribe(_ channel: RedisChannel) {
        core.run { $0.unsubscribe(channel) }
    }

    /// The state of the subscriber connections.
    public var status: RedisStatus { board.status }

    // The connections must be closed on their loop, not wherever the last reference goes.
    deinit { close() }

    /// Closes every subscriber connection; waiting subscriptions fail with
    /// ``RedisError/Code/closed``.
    public func close() {
        router.stopObserving(observerToken)
        board.markClosed()
        core.run { $0.close() }
    }
}

/// One node's subscriber-mode connection and the channels it carries.
final class NodeSubscription {
    let connection: RedisConnection
    /// Channels that should be subscribed on this node.
    var wanted: Set<RedisChannel> = []
    /// Channels this node has confirmed.
    var active: Set<RedisChannel> = []

    init(connection: RedisConnection) { self.connection = connection }

    var isReady: Bool {
        if case .ready = connection.state { return true }
        return false
    }
}

/// The subscriber's state, on its loop only.
final class SubscriberCore {
    let router: any SubscriptionRouting
    let loop: EventLoop
    let configuration: RedisConfiguration
    let board: StatusBoard
    let handler: @Sendable (RedisSubscriberEvent) -> Void

    private var uses: [RedisChannel: Int] = [:]
    private var waiters: [RedisChannel: [@Sendable (Result<Void, RedisError>) -> Void]] = [:]
    /// Channels confirmed at least once since their first use: a later confirmation is a
    /// re-subscription (messages may have been missed).
    private var confirmedOnce: Set<RedisChannel> = []
    /// Node address of each placed channel.
    private var placement: [RedisChannel: String] = [:]
    /// Channels waiting for a route (no slot map yet, or a redirection being resolved).
    private var unplaced: Set<RedisChannel> = []
    private var nodes: [String: NodeSubscription] = [:]
    private var isClosed = false

    init(router: any SubscriptionRouting, loop: EventLoop, configuration: RedisConfiguration, board: StatusBoard,
         handler: @escaping @Sendable (RedisSubscriberEvent) -> Void) {
        self.router = router
        self.loop = loop
        self.configuration = configuration
        self.board = board
        self.handler = handler
    }

    func subscribe(_ channel: RedisChannel, completion: (@Sendable (Result<Void, RedisError>) -> Void)?) {
        guard !isClosed else {
            completion?(.failure(RedisError(.closed, "the Redis subscriber is closed")))
            return
        }
        let count = uses[channel, default: 0]
        uses[channel] = count + 1
        if count > 0 {
            if isActive(channel) {
                completion?(.success(()))
            } else if let completion {
                waiters[channel, default: []].append(completion)
            }
            return
        }
        if let completion { waiters[channel, default: []].append(completion) }
        place(channel)
    }

    func unsubscribe(_ channel: RedisChannel) {
        guard let count = uses[channel] else { return }
        if count > 1 {
            uses[channel] = count - 1
            return
        }
        uses[channel] = nil
        confirmedOnce.remove(channel)
        unplaced.remove(channel)
        fireWaiters(channel, .failure(RedisError(.closed, "\(channel) was released before Redis confirmed the subscription")))
        if let address = placement.removeValue(forKey: channel), let node = nodes[address] {
            release(channel, on: node)
        }
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        for node in nodes.values { node.connection.close() }
        nodes = [:]
        let error = RedisError(.closed, "the Redis subscriber is closed")
        for channel in Array(waiters.keys) { fireWaiters(channel, .failure(error)) }
        uses = [:]
        placement = [:]
        unplaced = []
    }

    /// The slot map changed: move channels whose node changed, place the waiting ones, and
    /// close connections nothing leads to any more.
    func routesChanged() {
        guard !isClosed else { return }
        for (channel, address) in placement where router.endpoint(for: channel)?.address != address {
            placement[channel] = nil
            if let node = nodes[address] { release(channel, on: node) }
            unplaced.insert(channel)
        }
        let waiting = unplaced
        unplaced = []
        for channel in waiting { place(channel) }
        let current = router.addresses
        for (address, node) in nodes where node.wanted.isEmpty && !current.contains(address) {
            node.connection.close()
            nodes[address] = nil
            board.remove(address)
        }
    }

    // MARK: placing channels on nodes

    private func isActive(_ channel: RedisChannel) -> Bool {
        guard let address = placement[channel], let node = nodes[address] else { return false }
        return node.active.contains(channel)
    }

    private func place(_ channel: RedisChannel) {
        guard let endpoint = router.endpoint(for: channel) else {
            unplaced.insert(channel)
            router.refreshRoutes(after: nil)
            return
        }
        let node = self.node(for: endpoint)
        placement[channel] = endpoint.address
        node.wanted.insert(channel)
        if node.isReady { sendSubscribe(channel, on: node) }
        // Otherwise the node's session setup subscribes everything it wants once connected.
    }

    private func release(_ channel: RedisChannel, on node: NodeSubscription) {
        node.wanted.remove(channel)
        guard node.isReady else {
            node.active.remove(channel)
            return
        }
        let kind = channel.isSharded ? "sunsubscribe" : "unsubscribe"
        // Replies come in order, so a later re-subscription's confirmation lands after this.
        node.connection.submit(RedisCommand([.string(kind.uppercased()), .string(channel.name)], keyIndex: nil),
                               expectation: .confirmation(kind: kind, channel: Array(channel.name.utf8))) { [weak node] _ in
            node?.active.remove(channel)
        }
    }

    private func node(for endpoint: RedisEndpoint) -> NodeSubscription {
        if let node = nodes[endpoint.address] { return node }
        let connection = RedisConnection(endpoint: endpoint, configuration: configuration, loop: loop, mode: .subscriber)
        let node = NodeSubscription(connection: connection)
        nodes[endpoint.address] = node
        let key = endpoint.address
        board.add(key)
        let board = self.board, handler = self.handler
        connection.eventHandler = { event in
            board.update(key, event)
            handler(.connection(endpoint, event))
        }
        connection.pubSubHandler = { [weak self, weak node] event in
            guard let self, let node else { return }
            self.pubSub(event, on: node)
        }
        connection.sessionSetup = { [weak self, weak node] done in
            guard let self, let node else { return done(nil) }
            self.resubscribeAll(on: node, done: done)
        }
        connection.start()
        return node
    }

    private static func subscribeCommand(_ channel: RedisChannel) -> (RedisCommand, RedisConnection.Expectation) {
        let kind = channel.isSharded ? "ssubscribe" : "subscribe"
        return (RedisCommand([.string(kind.uppercased()), .string(channel.name)], keyIndex: nil),
                .confirmation(kind: kind, channel: Array(channel.name.utf8)))
    }

    private func sendSubscribe(_ channel: RedisChannel, on node: NodeSubscription) {
        let (command, expectation) = Self.subscribeCommand(channel)
        node.connection.submit(command, expectation: expectation) { [weak self, weak node] result in
            guard let self, let node else { return }
            var resubscribed: [RedisChannel] = []
            self.subscribed(channel, on: node, result, resubscribed: &resubscribed)
            if !resubscribed.isEmpty { self.handler(.resubscribed(resubscribed)) }
        }
    }

    /// On every (re)connect of a node, before it is ready: subscribe every channel it wants.
    private func resubscribeAll(on node: NodeSubscription, done: @escaping (RedisError?) -> Void) {
        node.active.removeAll()
        let channels = Array(node.wanted)
        guard !channels.isEmpty else { return done(nil) }
        var remaining = channels.count
        var resubscribed: [RedisChannel] = []
        for channel in channels {
            let (command, expectation) = Self.subscribeCommand(channel)
            node.connection.sendDuringSetup(command, expectation: expectation) { [weak self, weak node] result in
                guard let self, let node else { return }
                self.subscribed(channel, on: node, result, resubscribed: &resubscribed)
                remaining -= 1
                if remaining == 0 {
                    done(nil)
                    if !resubscribed.isEmpty { self.handler(.resubscribed(resubscribed)) }
                }
            }
        }
    }

    private func subscribed(_ channel: RedisChannel, on node: NodeSubscription, _ result: Result<RedisValue, RedisError>,
                            resubscribed: inout [RedisChannel]) {
        guard !isClosed else { return }
        guard node.wanted.contains(channel) else {
            // Released (or moved) while the subscription was on its way: undo it in Redis.
            if case .success = result, !isClosed { release(channel, on: node) }
            return
        }
        switch result {
        case .success:
            node.active.insert(channel)
            if confirmedOnce.insert(channel).inserted {
                fireWaiters(channel, .success(()))
            } else {
                resubscribed.append(channel)
            }
        case .failure(let error) where Self.isRedirection(error):
            // The node does not serve the channel's slot (any more): re-place it once the slot
            // map is fresh.
            node.wanted.remove(channel)
            placement[channel] = nil
            unplaced.insert(channel)
            router.refreshRoutes(after: error)
        case .failure(let error) where error.code == .server:
            fireWaiters(channel, .failure(error))
            handler(.subscriptionFailed(channel, error))
        case .failure(let error) where error.code == .timeout:
            if node.isReady { sendSubscribe(channel, on: node) }
        case .failure:
            break  // The connection broke: its next session subscribes everything it wants.
        }
    }

    static func isRedirection(_ error: RedisError) -> Bool {
        guard let code = error.serverCode else { return false }
        return code == "MOVED" || code == "ASK" || code == "TRYAGAIN" || code == "CLUSTERDOWN"
    }

    private func pubSub(_ event: RedisConnection.PubSubEvent, on node: NodeSubscription) {
        guard !isClosed else { return }
        switch event {
        case .message(let sharded, let channelBytes, let payload):
            let channel = RedisChannel(name: String(decoding: channelBytes, as: UTF8.self), isSharded: sharded)
            guard uses[channel] != nil else { return }
            handler(.message(channel, payload))
        case .unsolicited(let kind, let channelBytes):
            guard kind == "sunsubscribe" || kind == "unsubscribe" else { return }
            let channel = RedisChannel(name: String(decoding: channelBytes, as: UTF8.self), isSharded: kind == "sunsubscribe")
            node.active.remove(channel)
            // Redis dropped it itself (its slot moved away): follow the slot.
            guard node.wanted.remove(channel) != nil else { return }
            placement[channel] = nil
            unplaced.insert(channel)
            router.refreshRoutes(after: nil)
        }
    }

    private func fireWaiters(_ channel: RedisChannel, _ result: Result<Void, RedisError>) {
        guard let list = waiters.removeValue(forKey: channel) else { return }
        for waiter in list { waiter(result) }
    }
}
