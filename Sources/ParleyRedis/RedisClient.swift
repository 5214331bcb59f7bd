import ParleyIO
import Synchronization

/// A client of one Redis server for a whole event loop group: one pipelined
/// ``RedisConnection`` per loop, so a command sent on a loop goes out on that loop's
/// connection with no thread hop, and its completion runs on the same loop. Commands sent
/// from other threads are spread over the loops.
///
/// Connections open at once and reconnect by themselves (see ``RedisConnection``);
/// ``status`` tells how they are, and `eventHandler` hears every change.
public final class RedisClient: RedisCommandExecutor {
    public let endpoint: RedisEndpoint
    public let configuration: RedisConfiguration
    public let group: EventLoopGroup
    private let connections: [LoopBound<RedisConnection>]
    private let board = StatusBoard()
    private let nextConnection = Atomic<Int>(0)
    private let isClosed = Atomic<Bool>(false)

    /// Connects to `endpoint` from every loop of `group`. `eventHandler` runs on the loop of
    /// the connection the event is about, with that loop's index.
    public init(endpoint: RedisEndpoint, group: EventLoopGroup, configuration: RedisConfiguration = RedisConfiguration(),
                eventHandler: (@Sendable (_ loopIndex: Int, _ event: RedisConnectionEvent) -> Void)? = nil) {
        self.endpoint = endpoint
        self.configuration = configuration
        self.group = group
        connections = group.loops.map { loop in
            LoopBound(RedisConnection(endpoint: endpoint, configuration: configuration, loop: loop), on: loop)
        }
        for (index, connection) in connections.enumerated() {
            let board = self.board
            let key = "\(index)"
            board.add(key)
            connection.run { connection in
                connection.eventHandler = { event in
                    board.update(key, event)
                    eventHandler?(index, event)
                }
                connection.start()
            }
        }
    }

    /// The connection for the calling thread: its own loop's, else the next one round robin.
    private func connectionForCaller() -> LoopBound<RedisConnection> {
        for connection in connections where connection.loop.inEventLoop { return connection }
        return connections[nextConnection.wrappingAdd(1, ordering: .relaxed).oldValue % connections.count]
    }

    public func send(_ command: RedisCommand, completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) {
        // A loop that stopped drops what it is given: the command is answered here instead,
        // so nobody awaiting it waits forever (a node's tasks still talking while it stops).
        guard connectionForCaller().tryRun({ $0.send(command, completion: completion) }) else {
            return completion(.failure(Self.stopped))
        }
    }

    public func send(batch commands: [RedisCommand], completion: @escaping @Sendable ([Result<RedisValue, RedisError>]) -> Void) {
        guard connectionForCaller().tryRun({ $0.send(batch: commands, completion: completion) }) else {
            return completion(commands.map { _ in .failure(Self.stopped) })
        }
    }

    static let stopped = RedisError(.closed, "the Redis client's event loop has stopped")

    public func broadcast(_ command: RedisCommand, completion: @escaping @Sendable (Result<[RedisValue], RedisError>) -> Void) {
        send(command) { result in completion(result.map { [$0] }) }
    }

    public func makeSubscriber(on loop: EventLoop, handler: @escaping @Sendable (RedisSubscriberEvent) -> Void) -> RedisSubscriber {
        RedisSubscriber(router: SingleNodeRouter(endpoint: endpoint), loop: loop, configuration: configuration, handler: handler)
    }

    public var status: RedisStatus { board.status }

    // The connections must be closed on their loops, not wherever the last reference goes.
    deinit { close() }

    public func close() {
        guard !isClosed.exchange(true, ordering: .relaxed) else { return }
        board.markClosed()
        for connection in connections { connection.run { $0.close() } }
    }
}

/// Routes every channel to the one server.
final class SingleNodeRouter: SubscriptionRouting {
    let endpoint: RedisEndpoint
    init(endpoint: RedisEndpoint) { self.endpoint = endpoint }
    func endpoint(for channel: RedisChannel) -> RedisEndpoint? { endpoint }
    func refreshRoutes(after error: RedisError?) {}
    var addresses: Set<String> { [endpoint.address] }
    func observeRouteChanges(_ callback: @escaping @Sendable () -> Void) -> Int { 0 }
    func stopObserving(_ token: Int) {}
}
