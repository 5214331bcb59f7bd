import Dispatch
import ParleyCore
import Synchronization

/// The bans of a cluster, in Redis: every node reads the same list, and polls its version to
/// learn of a ban added or lifted through another node.
///
/// | key | type | holds |
/// | --- | --- | --- |
/// | `P:{bans}:h` | hash | `kind:value` (a normalized name or an IP) → `id\ncreated\nuntil\nreason` |
/// | `P:{bans}:n` | string | the last ban id given out |
/// | `P:{bans}:v` | string | the version: bumped by every add and remove |
///
/// The three keys share the hash tag `{bans}` (under the prefix), so each change is one
/// script on one Redis Cluster slot, atomic.
public final class RedisBanStore: BanStore {
    private let redis: any RedisCommandExecutor
    private let keys: [RedisArgument]

    public init(redis: any RedisCommandExecutor, keyspace: RedisKeyspace) {
        self.redis = redis
        let base = "\(keyspace.prefix):{bans}:"
        keys = [.string(base + "h"), .string(base + "n"), .string(base + "v")]
    }

    static let addScript = RedisScript("""
        local id = redis.call('INCR', KEYS[2])
        redis.call('HSET', KEYS[1], ARGV[1], id .. '\\n' .. ARGV[2] .. '\\n' .. ARGV[3] .. '\\n' .. ARGV[4])
        redis.call('INCR', KEYS[3])
        return id
        """)

    static let removeScript = RedisScript("""
        local all = redis.call('HGETALL', KEYS[1])
        for i = 1, #all, 2 do
            local id = string.match(all[i + 1], '^(%d+)\\n')
            if id == ARGV[1] then
                redis.call('HDEL', KEYS[1], all[i])
                redis.call('INCR', KEYS[3])
                return 1
            end
        end
        return 0
        """)

    /// Returns the version and the hash, after dropping the bans expired at ARGV[1].
    static let loadScript = RedisScript("""
        local all = redis.call('HGETALL', KEYS[1])
        local kept = {}
        for i = 1, #all, 2 do
            local untilMillis = tonumber(string.match(all[i + 1], '^%d+\\n%d+\\n(%d+)\\n'))
            if untilMillis and untilMillis <= tonumber(ARGV[1]) then
                redis.call('HDEL', KEYS[1], all[i])
            else
                kept[#kept + 1] = all[i]
                kept[#kept + 1] = all[i + 1]
            end
        end
        return {tonumber(redis.call('GET', KEYS[3]) or '0'), kept}
        """)

    public func add(_ target: Ban.Target, reason: String, createdMillis: Int64, untilMillis: Int64) async throws(ParleyError) -> Ban {
        let target = Ban.target(target)
        let reply: RedisValue
        do {
            reply = try await redis.evaluate(Self.addScript, keys: keys, arguments: [
                .string(Self.field(target)), .integer(createdMillis), .integer(untilMillis), .string(reason)])
        } catch {
            throw RedisRouting.error(error, "storing a ban")
        }
        guard let id = reply.int else { throw ParleyError(.internalError, "Redis answered a ban with \(reply)") }
        return Ban(id: Int(id), target: target, reason: reason, createdMillis: createdMillis, untilMillis: untilMillis)
    }

    public func remove(id: Int) async throws(ParleyError) -> Bool {
        do {
            return try await redis.evaluate(Self.removeScript, keys: keys, arguments: [.string(String(id))]).int == 1
        } catch {
            throw RedisRouting.error(error, "lifting a ban")
        }
    }

    public func load(nowMillis: Int64) async throws(ParleyError) -> BanSet {
        let reply: RedisValue
        do {
            reply = try await redis.evaluate(Self.loadScript, keys: keys, arguments: [.integer(nowMillis)])
        } catch {
            throw RedisRouting.error(error, "reading the bans")
        }
        return try Self.banSet(reply)
    }

    /// Waits on the Redis client's own loops (not on Swift concurrency's threads).
    public func loadNow(nowMillis: Int64, timeoutMillis: Int) throws(ParleyError) -> BanSet {
        let outcome = Mutex<Result<RedisValue, RedisError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        redis.evaluate(Self.loadScript, keys: keys, arguments: [.integer(nowMillis)], timeoutMillis: timeoutMillis) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + .milliseconds(timeoutMillis + 100)) == .success, let result = outcome.withLock({ $0 }) else {
            throw ParleyError(.unavailable, "Redis did not answer the bans within \(timeoutMillis) ms")
        }
        switch result {
        case .success(let reply): return try Self.banSet(reply)
        case .failure(let error): throw RedisRouting.error(error, "reading the bans")
        }
    }

    private static func banSet(_ reply: RedisValue) throws(ParleyError) -> BanSet {
        guard let parts = reply.array, parts.count == 2, let version = parts[0].int, let flat = parts[1].array else {
            throw ParleyError(.internalError, "Redis answered the bans with \(reply)")
        }
        var bans: [Ban] = []
        var index = 0
        while index + 1 < flat.count {
            if let field = flat[index].string, let record = flat[index + 1].string, let ban = Self.ban(field: field, record: record) {
                bans.append(ban)
            }
            index += 2
        }
        bans.sort { $0.id < $1.id }
        return BanSet(bans: bans, version: version)
    }

    public func version() async throws(ParleyError) -> Int64 {
        do {
            let reply = try await redis.send(RedisCommand("GET", keys[2]))
            return reply.isNull ? 0 : reply.int ?? 0
        } catch {
            throw RedisRouting.error(error, "reading the bans' version")
        }
    }

    static func field(_ target: Ban.Target) -> String { target.kind + ":" + target.value }

    /// A stored ban back from its field and record; nil for anything malformed.
    static func ban(field: String, record: String) -> Ban? {
        guard let colon = field.firstIndex(of: ":") else { return nil }
        let kind = field[..<colon], value = String(field[field.index(after: colon)...])
        let target: Ban.Target
        switch kind {
        case "ip": target = .ip(value)
        case "name": target = .name(value)
        default: return nil
        }
        let parts = record.split(separator: "\n", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, let id = Int(parts[0]), let created = Int64(parts[1]), let until = Int64(parts[2]) else { return nil }
        return Ban(id: id, target: target, reason: String(parts[3]), createdMillis: created, untilMillis: until)
    }
}
