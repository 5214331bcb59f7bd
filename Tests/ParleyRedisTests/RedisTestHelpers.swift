import Foundation
import ParleyIO
@testable import ParleyRedis
import ParleyTestSupport

/// Starts an operation that reports once through a callback and waits for the report.
func awaitCallback<T: Sendable>(_ what: String = "a reply", timeout: Double = 10,
                                _ start: (@escaping @Sendable (T) -> Void) -> Void) async throws -> T {
    let box = Locked<T?>(nil)
    start { value in box.withLock { if $0 == nil { $0 = value } } }
    try await eventually(what, timeout: timeout) { box.value != nil }
    return box.value!
}

extension RedisCommandExecutor {
    /// Sends a command and waits (with a timeout) for its result.
    func result(_ command: RedisCommand, timeout: Double = 10) async throws -> Result<RedisValue, RedisError> {
        try await awaitCallback("the reply to \(command.name)", timeout: timeout) { done in send(command, completion: done) }
    }

    /// Sends a command and returns its reply, throwing its error.
    @discardableResult
    func call(_ name: String, _ arguments: RedisArgument..., timeout: Double = 10) async throws -> RedisValue {
        try await result(RedisCommand([.string(name)] + arguments), timeout: timeout).get()
    }
}

/// Everything a subscriber reported, for assertions.
final class SubscriberLog: Sendable {
    private let events = Locked<[RedisSubscriberEvent]>([])

    var handler: @Sendable (RedisSubscriberEvent) -> Void {
        { [events] event in events.withLock { $0.append(event) } }
    }

    /// Every message, in arrival order.
    var messages: [(channel: RedisChannel, payload: [UInt8])] {
        events.value.compactMap { event in
            if case .message(let channel, let payload) = event { return (channel, payload) }
            return nil
        }
    }

    var resubscribed: [RedisChannel] {
        events.value.flatMap { event -> [RedisChannel] in
            if case .resubscribed(let channels) = event { return channels }
            return []
        }
    }

    var connectionEvents: [RedisConnectionEvent] {
        events.value.compactMap { event in
            if case .connection(_, let event) = event { return event }
            return nil
        }
    }

    /// The payloads (as text) of the messages on `channel`, in arrival order.
    func messages(on channel: RedisChannel) -> [String] {
        messages.filter { $0.channel == channel }.map { String(decoding: $0.payload, as: UTF8.self) }
    }
}

/// Subscribes and waits for Redis to confirm.
func subscribe(_ subscriber: RedisSubscriber, _ channel: RedisChannel, timeout: Double = 10) async throws {
    let result: Result<Void, RedisError> = try await awaitCallback("the subscription to \(channel)", timeout: timeout) { done in
        subscriber.subscribe(channel, completion: done)
    }
    try result.get()
}

/// A configuration that notices failures quickly in tests.
func fastConfiguration() -> RedisConfiguration {
    var configuration = RedisConfiguration()
    configuration.commandTimeoutMillis = 2_000
    configuration.connectTimeoutMillis = 1_000
    configuration.reconnectInitialDelayMillis = 20
    configuration.reconnectMaxDelayMillis = 200
    return configuration
}

/// A redis-server on a free port, an event loop group and a client of the server
/// (``fastConfiguration()``): what most tests here start with. `stop()` ends all three.
struct RedisFixture {
    let redis: RedisServer
    let group: EventLoopGroup
    let client: RedisClient

    static func start(loops: Int = 1) throws -> RedisFixture {
        let redis = try RedisServer.start()
        let group = EventLoopGroup(loopCount: loops)
        do {
            let client = RedisClient(endpoint: try RedisEndpoint(url: redis.url), group: group, configuration: fastConfiguration())
            return RedisFixture(redis: redis, group: group, client: client)
        } catch {
            group.shutdown()
            redis.stop()
            throw error
        }
    }

    func stop() {
        client.close()
        group.shutdown()
        redis.stop()
    }
}
