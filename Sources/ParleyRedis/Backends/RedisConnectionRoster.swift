import ParleyCore

/// The cluster's connections in Redis (``ConnectionRoster``): each node's bounded list, and
/// the disconnect requests waiting for each node.
///
/// | key | type | holds |
/// | --- | --- | --- |
/// | `P:{conns}:h` | hash | node → `expires\npublished\ncount\n` + a JSON array of its listed connections |
/// | `P:{conns}:r` | hash | node → the disconnect requests waiting for it, a JSON array of `[id, reason]` |
///
/// Both keys share the hash tag `{conns}`, so each change is one script on one Redis
/// Cluster slot. An entry past its expiry is skipped and dropped by the next read: a node
/// that died stops being listed within the lifetime it published with.
public final class RedisConnectionRoster: ConnectionRoster {
    private let redis: any RedisCommandExecutor
    private let keys: [RedisArgument]

    public init(redis: any RedisCommandExecutor, keyspace: RedisKeyspace) {
        self.redis = redis
        let base = "\(keyspace.prefix):{conns}:"
        keys = [.string(base + "h"), .string(base + "r")]
    }

    /// Returns the entries alive at ARGV[1], after dropping the expired ones.
    static let readScript = RedisScript("""
        local all = redis.call('HGETALL', KEYS[1])
        local kept = {}
        for i = 1, #all, 2 do
            local expires = tonumber(string.match(all[i + 1], '^(%d+)\\n'))
            if expires and expires <= tonumber(ARGV[1]) then
                redis.call('HDEL', KEYS[1], all[i])
                redis.call('HDEL', KEYS[2], all[i])
            else
                kept[#kept + 1] = all[i]
                kept[#kept + 1] = all[i + 1]
            end
        end
        return kept
        """)

    /// Appends [ARGV[2], ARGV[3]] to node ARGV[1]'s requests, keeping the newest ARGV[4].
    static let requestScript = RedisScript("""
        local waiting = redis.call('HGET', KEYS[2], ARGV[1])
        local list = waiting and cjson.decode(waiting) or {}
        list[#list + 1] = {ARGV[2], ARGV[3]}
        local keep = tonumber(ARGV[4])
        while #list > keep do table.remove(list, 1) end
        redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(list))
        return #list
        """)

    /// Takes node ARGV[1]'s requests.
    static let takeScript = RedisScript("""
        local waiting = redis.call('HGET', KEYS[2], ARGV[1])
        if waiting then redis.call('HDEL', KEYS[2], ARGV[1]) end
        return waiting
        """)

    public func publish(node: String, count: Int, clients: [ConnectionSummary], nowMillis: Int64,
                        expiresMillis: Int64) async throws(ParleyError) {
        var w = JSONWriter(capacity: 128 * clients.count + 16)
        w.beginArray()
        for client in clients {
            w.beginObject()
            client.writeFields(&w)
            w.endObject()
        }
        w.endArray()
        let record = Array("\(expiresMillis)\n\(nowMillis)\n\(count)\n".utf8) + w.bytes
        do {
            _ = try await redis.send(RedisCommand("HSET", keys[0], .string(node), .bytes(record)))
        } catch {
            throw RedisRouting.error(error, "publishing this node's connections")
        }
    }

    public func nodes(nowMillis: Int64) async throws(ParleyError) -> [NodeConnections] {
        let reply: RedisValue
        do {
            reply = try await redis.evaluate(Self.readScript, keys: keys, arguments: [.integer(nowMillis)])
        } catch {
            throw RedisRouting.error(error, "reading the cluster's connections")
        }
        guard let flat = reply.array else { throw ParleyError(.internalError, "Redis answered the connections with \(reply)") }
        var entries: [NodeConnections] = []
        var index = 0
        while index + 1 < flat.count {
            if let node = flat[index].string, let record = flat[index + 1].string, let entry = Self.entry(node: node, record: record) {
                entries.append(entry)
            }
            index += 2
        }
        return entries.sorted { $0.node < $1.node }
    }

    public func withdraw(node: String) async throws(ParleyError) {
        do {
            _ = try await redis.send(RedisCommand("HDEL", keys[0], .string(node)))
        } catch {
            throw RedisRouting.error(error, "withdrawing this node's connections")
        }
    }

    public func requestDisconnect(_ request: DisconnectRequest, node: String) async throws(ParleyError) {
        do {
            _ = try await redis.evaluate(Self.requestScript, keys: keys, arguments: [
                .string(node), .string(request.id), .string(request.reason), .integer(Int64(ConnectionRosterLimits.maxPendingRequests))])
        } catch {
            throw RedisRouting.error(error, "asking node \(node) to disconnect \(request.id)")
        }
    }

    public func takeRequests(node: String) async throws(ParleyError) -> [DisconnectRequest] {
        let reply: RedisValue
        do {
            reply = try await redis.evaluate(Self.takeScript, keys: keys, arguments: [.string(node)])
        } catch {
            throw RedisRouting.error(error, "reading this node's disconnect requests")
        }
        guard let text = reply.string, let list = (try? JSONParser.parse(text))?.arrayValue else { return [] }
        return list.compactMap { pair in
            guard let items = pair.arrayValue, items.count == 2, let id = items[0].stringValue, let reason = items[1].stringValue else {
                return nil
            }
            return DisconnectRequest(id: id, reason: reason)
        }
    }

    /// A node's entry back from its record; nil for anything malformed.
    static func entry(node: String, record: String) -> NodeConnections? {
        let parts = record.split(separator: "\n", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, let published = Int64(parts[1]), let count = Int(parts[2]),
              let list = (try? JSONParser.parse(String(parts[3])))?.arrayValue else { return nil }
        let clients = list.compactMap(ConnectionSummary.init(fields:))
        return NodeConnections(node: node, count: count, clients: clients, publishedMillis: published)
    }
}
