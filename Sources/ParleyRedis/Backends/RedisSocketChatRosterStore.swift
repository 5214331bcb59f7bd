import ParleyCore

/// SocketChat's departed users for a whole cluster, in Redis.
///
/// | key | type | holds |
/// | --- | --- | --- |
/// | `P:{socketchat}:d` | hash | nickname → `leftMillis\nid` |
/// | `P:{socketchat}:v` | string | the version: bumped by every change |
///
/// Both keys share the hash tag `{socketchat}`, so each change is one script on one slot.
public final class RedisSocketChatRosterStore: SocketChatRosterStore {
    private let redis: any RedisCommandExecutor
    private let keys: [RedisArgument]

    public init(redis: any RedisCommandExecutor, keyspace: RedisKeyspace) {
        self.redis = redis
        let base = "\(keyspace.prefix):{socketchat}:"
        keys = [.string(base + "d"), .string(base + "v")]
    }

    /// ARGV: nickname, leftMillis, id, maxDeparted. Keeps at most maxDeparted entries,
    /// dropping the oldest departures.
    static let departedScript = RedisScript("""
        redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. '\\n' .. ARGV[3])
        local max = tonumber(ARGV[4])
        local count = redis.call('HLEN', KEYS[1])
        if count > max then
            local all = redis.call('HGETALL', KEYS[1])
            local entries = {}
            for i = 1, #all, 2 do
                entries[#entries + 1] = {all[i], tonumber(string.match(all[i + 1], '^(%d+)\\n')) or 0}
            end
            table.sort(entries, function(a, b) return a[2] < b[2] end)
            for i = 1, count - max do redis.call('HDEL', KEYS[1], entries[i][1]) end
        end
        redis.call('INCR', KEYS[2])
        return 1
        """)

    static let returnedScript = RedisScript("""
        if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
            redis.call('INCR', KEYS[2])
            return 1
        end
        return 0
        """)

    /// ARGV: cutoff (departures at or before it are dropped). Returns {version, flat hash}.
    static let loadScript = RedisScript("""
        local all = redis.call('HGETALL', KEYS[1])
        local kept = {}
        for i = 1, #all, 2 do
            local left = tonumber(string.match(all[i + 1], '^(%d+)\\n'))
            if left and left <= tonumber(ARGV[1]) then
                redis.call('HDEL', KEYS[1], all[i])
            else
                kept[#kept + 1] = all[i]
                kept[#kept + 1] = all[i + 1]
            end
        end
        return {tonumber(redis.call('GET', KEYS[2]) or '0'), kept}
        """)

    public func departed(_ user: SocketChatUser, leftMillis: Int64, maxDeparted: Int) async throws(ParleyError) {
        do {
            _ = try await redis.evaluate(Self.departedScript, keys: keys, arguments: [
                .string(user.nickname), .integer(leftMillis), .string(user.id), .integer(Int64(max(0, maxDeparted)))])
        } catch {
            throw RedisRouting.error(error, "keeping a departed SocketChat user")
        }
    }

    public func returned(nickname: String) async throws(ParleyError) {
        do {
            _ = try await redis.evaluate(Self.returnedScript, keys: keys, arguments: [.string(nickname)])
        } catch {
            throw RedisRouting.error(error, "forgetting a departed SocketChat user")
        }
    }

    public func load(nowMillis: Int64, lifetimeMillis: Int64) async throws(ParleyError) -> (entries: [DepartedUser], version: Int64) {
        let reply: RedisValue
        do {
            reply = try await redis.evaluate(Self.loadScript, keys: keys, arguments: [.integer(nowMillis - lifetimeMillis)])
        } catch {
            throw RedisRouting.error(error, "reading the SocketChat roster")
        }
        guard let parts = reply.array, parts.count == 2, let version = parts[0].int, let flat = parts[1].array else {
            throw ParleyError(.internalError, "Redis answered the SocketChat roster with \(reply)")
        }
        var entries: [DepartedUser] = []
        var index = 0
        while index + 1 < flat.count {
            if let nickname = flat[index].string, let record = flat[index + 1].string {
                let parts = record.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
                if parts.count == 2, let left = Int64(parts[0]) {
                    entries.append(DepartedUser(user: SocketChatUser(id: String(parts[1]), nickname: nickname, isConnected: false),
                                                leftMillis: left))
                }
            }
            index += 2
        }
        entries.sort { ($0.leftMillis, $0.user.nickname) < ($1.leftMillis, $1.user.nickname) }
        return (entries, version)
    }

    public func version() async throws(ParleyError) -> Int64 {
        do {
            let reply = try await redis.send(RedisCommand("GET", keys[1]))
            return reply.isNull ? 0 : reply.int ?? 0
        } catch {
            throw RedisRouting.error(error, "reading the SocketChat roster's version")
        }
    }
}
