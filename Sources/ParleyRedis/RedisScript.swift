import ParleyIO

/// A Lua script, named by its SHA-1 the way Redis's script cache names it.
///
/// ``RedisCommandExecutor/evaluate(_:keys:arguments:timeoutMillis:completion:)`` sends
/// `EVALSHA` (the script travels once per node, not with every call) and, when the node does
/// not have it (`NOSCRIPT`: never loaded, restarted, `SCRIPT FLUSH`ed, or a new cluster
/// master), sends `EVAL` with the source, which also caches it there. In a cluster the call is
/// routed by the first key, so every key a script touches must be passed in `keys` and share
/// one slot (one `{hash tag}`).
public struct RedisScript: Sendable, Hashable {
    public let source: String
    /// Lowercase hex SHA-1 of ``source``: what `SCRIPT LOAD` returns and `EVALSHA` takes.
    public let sha1: String

    public init(_ source: String) {
        self.source = source
        sha1 = SHA1Digest.hex(of: Array(source.utf8))
    }
}

extension RedisCommandExecutor {
    /// Runs `script` with `keys` (`KEYS[1…]`) and `arguments` (`ARGV[1…]`).
    public func evaluate(_ script: RedisScript, keys: [RedisArgument] = [], arguments: [RedisArgument] = [],
                         timeoutMillis: Int? = nil,
                         completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) {
        let tail: [RedisArgument] = [.integer(Int64(keys.count))] + keys + arguments
        let keyIndex = keys.isEmpty ? nil : 3
        let bySHA = RedisCommand(["EVALSHA", .string(script.sha1)] + tail, keyIndex: keyIndex, timeoutMillis: timeoutMillis)
        send(bySHA) { result in
            guard case .failure(let error) = result, error.serverCode == "NOSCRIPT" else { return completion(result) }
            let bySource = RedisCommand(["EVAL", .string(script.source)] + tail, keyIndex: keyIndex, timeoutMillis: timeoutMillis)
            self.send(bySource, completion: completion)
        }
    }

    /// Runs `script` and waits for its reply.
    public func evaluate(_ script: RedisScript, keys: [RedisArgument] = [], arguments: [RedisArgument] = [],
                         timeoutMillis: Int? = nil) async throws(RedisError) -> RedisValue {
        let result = await withCheckedContinuation { continuation in
            evaluate(script, keys: keys, arguments: arguments, timeoutMillis: timeoutMillis) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Loads `script` into the script cache of every master (`SCRIPT LOAD`), so the first
    /// calls need no fallback. Optional: ``evaluate(_:keys:arguments:timeoutMillis:completion:)``
    /// loads on demand.
    public func load(_ script: RedisScript, completion: @escaping @Sendable (Result<Void, RedisError>) -> Void) {
        broadcast(RedisCommand("SCRIPT", "LOAD", .string(script.source))) { result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let digests):
                if let wrong = digests.first(where: { $0.string != script.sha1 }) {
                    completion(.failure(RedisError(.unexpectedReply, "SCRIPT LOAD returned \(wrong), expected \(script.sha1)")))
                } else {
                    completion(.success(()))
                }
            }
        }
    }

    /// Loads `script` on every master and waits.
    public func load(_ script: RedisScript) async throws(RedisError) {
        let result = await withCheckedContinuation { continuation in
            load(script) { continuation.resume(returning: $0) }
        }
        try result.get()
    }
}
