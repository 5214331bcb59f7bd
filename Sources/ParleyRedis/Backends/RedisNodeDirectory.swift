import ParleyCore
import Synchronization

/// Where each node of a cluster can be reached by the others, and the secret they prove
/// themselves with, for requests one node hands on to another (an Engine.IO request for a
/// session another node holds: no sticky sessions).
///
/// Keys: `PREFIX:relay:node:ID` (the node's `host:port`, with a lease the node renews) and
/// `PREFIX:relay:secret` (made by the first node, `SET NX`, kept).
public final class RedisNodeDirectory: Sendable {
    private let redis: any RedisCommandExecutor
    private let prefix: String
    /// Addresses read recently: node id → (address, when read).
    private let cache = Mutex<[String: (address: String, readMillis: Int64)]>([:])
    private let secretValue = Mutex<String?>(nil)
    /// How long a looked-up address is used before it is read again.
    public static let cacheMillis: Int64 = 5_000
    /// Most addresses cached (node ids come from clients' sids: bounded).
    static let maxCached = 256

    public init(redis: any RedisCommandExecutor, keyspace: RedisKeyspace) {
        self.redis = redis
        prefix = keyspace.prefix + ":relay:"
    }

    /// The shared secret, once read (nil before).
    public var secret: String? { secretValue.withLock { $0 } }

    /// Makes the cluster's secret if there is none (`candidate`), then reads it.
    public func loadSecret(candidate: String, completion: @escaping @Sendable (Result<String, RedisError>) -> Void) {
        let key = RedisArgument.string(prefix + "secret")
        redis.send(RedisCommand("SET", key, .string(candidate), "NX")) { [self] first in
            if case .failure(let error) = first { return completion(.failure(error)) }
            redis.send(RedisCommand("GET", key)) { [self] result in
                switch result {
                case .success(let value):
                    guard let bytes = value.bytes, !bytes.isEmpty else {
                        return completion(.failure(RedisError(.protocolViolation, "the relay secret is missing")))
                    }
                    let text = String(decoding: bytes, as: UTF8.self)
                    adopt(secret: text)
                    completion(.success(text))
                case .failure(let error):
                    completion(.failure(error))
                }
            }
        }
    }

    /// Takes `secret` as the cluster's (what ``loadSecret(candidate:completion:)`` read).
    func adopt(secret: String) { secretValue.withLock { $0 = secret } }

    /// Puts the known secret back if Redis lost it (a failover to a replica that had not
    /// received it, a flushed database), so a node that starts later adopts the same one.
    public func reassertSecret() {
        guard let secret else { return }
        redis.send(RedisCommand("SET", .string(prefix + "secret"), .string(secret), "NX")) { _ in }
    }

    /// Says where `node` is, for `leaseMillis` (renew well before it ends).
    public func register(node: String, address: String, leaseMillis: Int64, completion: @escaping @Sendable (RedisError?) -> Void) {
        redis.send(RedisCommand("SET", .string(prefix + "node:" + node), .string(address), "PX", .integer(leaseMillis))) { result in
            if case .failure(let error) = result { completion(error) } else { completion(nil) }
        }
    }

    /// Takes this node out (at shutdown).
    public func unregister(node: String) {
        redis.send(RedisCommand("DEL", .string(prefix + "node:" + node))) { _ in }
    }

    /// Where `node` is (`host:port`), or nil when no such node is registered.
    public func address(of node: String, nowMillis: Int64, completion: @escaping @Sendable (String?) -> Void) {
        if let cached = cache.withLock({ $0[node] }), nowMillis - cached.readMillis < Self.cacheMillis { return completion(cached.address) }
        redis.send(RedisCommand("GET", .string(prefix + "node:" + node))) { [self] result in
            guard case .success(let value) = result, let bytes = value.bytes else { return completion(nil) }
            let address = String(decoding: bytes, as: UTF8.self)
            cache.withLock { cache in
                if cache.count >= Self.maxCached { cache.removeAll() }
                cache[node] = (address, nowMillis)
            }
            completion(address)
        }
    }
}
