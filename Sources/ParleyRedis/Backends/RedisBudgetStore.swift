import Dispatch
import ParleyCore
import Synchronization

/// Budgets (``BudgetStore``) in Redis, one for the whole cluster: each key is a hash
/// `P:budget:{key}` with its tokens and the time of its last change, refilled and taken in one
/// script (atomic), and expiring a period after its last use (then it is full again anyway).
public final class RedisBudgetStore: BudgetStore {
    private let redis: any RedisCommandExecutor
    private let prefix: String
    private let timeoutMillis: Int

    public init(redis: any RedisCommandExecutor, keyspace: RedisKeyspace, timeoutMillis: Int = 2_000) {
        self.redis = redis
        prefix = "\(keyspace.prefix):budget:"
        self.timeoutMillis = timeoutMillis
    }

    /// Lua both scripts share: a bucket read and refilled (`full` tokens at most, `perMilli`
    /// a millisecond), and written back with its time to live.
    static let bucketFunctions = """
        local function refilled(key, full, perMilli, now)
          local state = redis.call('HMGET', key, 't', 'l')
          local tokens = tonumber(state[1]) or full
          local last = tonumber(state[2]) or now
          if now > last then
            tokens = tokens + (now - last) * perMilli
            last = now
          end
          return math.min(full, tokens), last
        end
        local function store(key, tokens, last, ttl)
          redis.call('HSET', key, 't', string.format('%.3f', tokens), 'l', string.format('%d', last))
          redis.call('PEXPIRE', key, ttl)
        end
        """

    /// ARGV: amount, allowance, period (ms), now (ms). 1 when taken (always for a refund).
    static let takeScript = RedisScript(bucketFunctions + "\n" + """
        local amount, allowance = tonumber(ARGV[1]), tonumber(ARGV[2])
        local period, now = tonumber(ARGV[3]), tonumber(ARGV[4])
        local tokens, last = refilled(KEYS[1], allowance, allowance / period, now)
        local taken = 0
        if amount < 0 then
            tokens = math.min(allowance, tokens - amount)
            taken = 1
        elseif tokens >= amount then
            tokens = tokens - amount
            taken = 1
        end
        store(KEYS[1], tokens, last, period)
        return taken
        """)

    /// ARGV: amount, rate (per second), burst, now (ms). Spends `amount` whether or not it is
    /// there (down to one burst below empty, as ``TokenBucket/charge(_:nowMillis:)``) and
    /// returns what is left, as a string. Expires once a burst has had time to refill twice.
    static let chargeScript = RedisScript(bucketFunctions + "\n" + """
        local amount, rate = tonumber(ARGV[1]), tonumber(ARGV[2])
        local burst, now = tonumber(ARGV[3]), tonumber(ARGV[4])
        local tokens, last = refilled(KEYS[1], burst, rate / 1000, now)
        tokens = math.max(-burst, tokens - amount)
        store(KEYS[1], tokens, last, math.ceil(2000 * burst / rate) + 1000)
        return string.format('%.3f', tokens)
        """)

    /// Spends `amount` of `key`'s bucket (`ratePerSecond`, `burst`) shared by every node, into
    /// debt if need be, and completes with what the cluster has left, on any thread: how a
    /// node learns what the others spent of a per-address budget (``ClusterBudgetSync`` in the
    /// server). Never blocks.
    public func charge(_ amount: Double, key: String, ratePerSecond: Double, burst: Double, nowMillis: Int64,
                       completion: @escaping @Sendable (Result<Double, ParleyError>) -> Void) {
        redis.evaluate(Self.chargeScript, keys: [.string(prefix + "{" + key + "}")], arguments: [
            .string(String(amount)), .string(String(ratePerSecond)), .string(String(burst)), .integer(nowMillis),
        ], timeoutMillis: timeoutMillis) { result in
            switch result {
            case .success(let reply):
                guard let tokens = reply.string.flatMap(Double.init) else {
                    return completion(.failure(ParleyError(.internalError, "Redis answered a budget charge with \(reply)")))
                }
                completion(.success(tokens))
            case .failure(let error):
                completion(.failure(RedisRouting.error(error, "charging a budget")))
            }
        }
    }

    public func take(_ amount: Double, key: String, allowance: Int, periodMillis: Int64, nowMillis: Int64) throws(ParleyError) -> Bool {
        let outcome = Mutex<Result<RedisValue, RedisError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        redis.evaluate(Self.takeScript, keys: [.string(prefix + "{" + key + "}")], arguments: [
            .string(String(amount)), .integer(Int64(allowance)), .integer(max(1, periodMillis)), .integer(nowMillis),
        ], timeoutMillis: timeoutMillis) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + .milliseconds(timeoutMillis + 100)) == .success, let result = outcome.withLock({ $0 }) else {
            throw ParleyError(.unavailable, "Redis did not answer the budget within \(timeoutMillis) ms")
        }
        switch result {
        case .success(let reply): return reply.int == 1
        case .failure(let error): throw RedisRouting.error(error, "charging a budget")
        }
    }
}
