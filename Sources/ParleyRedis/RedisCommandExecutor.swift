import ParleyIO
import Synchronization

/// What Parley's Redis backends need from Redis, whether it is one server (``RedisClient``)
/// or a Redis Cluster (``RedisClusterClient``). Every method may be called from any thread;
/// completions run on an event loop of the client's group (the caller's own loop when the
/// caller is on one), sometimes before the method returns.
public protocol RedisCommandExecutor: AnyObject, Sendable {
    /// The loops the client's connections live on (completions run on them).
    var group: EventLoopGroup { get }

    /// Sends one command (pipelined with everything else on its connection). In a cluster it
    /// goes to the master of its key's slot, following `MOVED`/`ASK`.
    func send(_ command: RedisCommand, completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void)

    /// Sends `commands` back to back on one connection (for `MULTI`…`EXEC`); one result per
    /// command. In a cluster every key of the batch must be in one slot (routing uses the
    /// first command that has a key).
    func send(batch commands: [RedisCommand], completion: @escaping @Sendable ([Result<RedisValue, RedisError>]) -> Void)

    /// Sends `command` to every master (one server: to it), e.g. `SCRIPT LOAD`; one reply
    /// per node, or the first failure.
    func broadcast(_ command: RedisCommand, completion: @escaping @Sendable (Result<[RedisValue], RedisError>) -> Void)

    /// A pub/sub subscriber whose connections live on `loop` and whose `handler` runs there.
    /// In a cluster, sharded channels are subscribed on the master of their slot.
    func makeSubscriber(on loop: EventLoop, handler: @escaping @Sendable (RedisSubscriberEvent) -> Void) -> RedisSubscriber

    /// The connections' state, for `/metrics` and `/readyz`.
    var status: RedisStatus { get }

    /// Closes every connection; later commands fail with ``RedisError/Code/closed``. Call it
    /// before shutting down the event loop group.
    func close()
}

extension RedisCommandExecutor {
    /// Sends one command and waits for the reply.
    public func send(_ command: RedisCommand) async throws(RedisError) -> RedisValue {
        let result = await withCheckedContinuation { continuation in
            send(command) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// `try await redis.send("SET", "k", "v")`
    @discardableResult
    public func send(_ name: String, _ arguments: RedisArgument...) async throws(RedisError) -> RedisValue {
        try await send(RedisCommand([.string(name)] + arguments))
    }

    /// Sends commands back to back on one connection and waits for every reply.
    public func send(batch commands: [RedisCommand]) async -> [Result<RedisValue, RedisError>] {
        await withCheckedContinuation { continuation in
            send(batch: commands) { continuation.resume(returning: $0) }
        }
    }

    /// Sends `command` to every master and waits.
    public func broadcast(_ command: RedisCommand) async throws(RedisError) -> [RedisValue] {
        let result = await withCheckedContinuation { continuation in
            broadcast(command) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }
}

/// Completes once every part has answered: with all values in order, or the first failure.
final class BroadcastCollector: Sendable {
    private let state: Mutex<(results: [Result<RedisValue, RedisError>?], remaining: Int)>
    private let completion: @Sendable (Result<[RedisValue], RedisError>) -> Void

    init(count: Int, completion: @escaping @Sendable (Result<[RedisValue], RedisError>) -> Void) {
        state = Mutex((Array(repeating: nil, count: count), count))
        self.completion = completion
        if count == 0 { completion(.success([])) }
    }

    func set(_ index: Int, _ result: Result<RedisValue, RedisError>) {
        let done = state.withLock { state -> [Result<RedisValue, RedisError>]? in
            guard state.results[index] == nil else { return nil }
            state.results[index] = result
            state.remaining -= 1
            return state.remaining == 0 ? state.results.map { $0! } : nil
        }
        guard let done else { return }
        var values: [RedisValue] = []
        for result in done {
            switch result {
            case .success(let value): values.append(value)
            case .failure(let error): completion(.failure(error)); return
            }
        }
        completion(.success(values))
    }
}
