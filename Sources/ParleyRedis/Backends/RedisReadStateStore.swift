import ParleyCore

/// Users' read marks in Redis (``ReadStateStore``), one set for the whole cluster.
///
/// | key | type | holds |
/// | --- | --- | --- |
/// | `P:user:{c/u}:r` | hash | room → `offset\tshares\tupdated\tname` (a user's marks in a channel) |
/// | `P:user:{c/u}:t` | sorted set | room → time touched (for the order and the bound) |
/// | `P:{c/r}:rd` | sorted set | user → offset, of the marks that share receipts |
/// | `P:{c/r}:rn` | hash | user → name shown in receipts |
/// | `P:{c/r}:ru` | set | every user who has the room among their conversations |
/// | `P:reads:all` | sorted set | `channel NUL user NUL room` → time touched, every mark (for the store's bound) |
///
/// A user's keys share one hash tag and change in one script (atomic: the offset never moves
/// back, the bound holds); the room's receipt keys carry the room's tag and follow with
/// `ZADD GT` (so they never move back either, whatever order two nodes' writes land in).
public final class RedisReadStateStore: ReadStateStore {
    public let maxRoomsPerUser: Int
    public let maxMarks: Int
    private let redis: any RedisCommandExecutor
    private let keyspace: RedisKeyspace
    private let timeoutMillis: Int

    public init(redis: any RedisCommandExecutor, keyspace: RedisKeyspace, maxRoomsPerUser: Int = 500,
                maxMarks: Int = ReadMark.maxStored, timeoutMillis: Int = 2_000) {
        self.redis = redis
        self.keyspace = keyspace
        self.maxRoomsPerUser = maxRoomsPerUser
        self.maxMarks = max(1, maxMarks)
        self.timeoutMillis = timeoutMillis
    }

    private func userKeys(_ user: String, in channel: String) -> (marks: String, times: String) {
        let base = "\(keyspace.prefix):user:{\(RedisKeyspace.encode(channel, slash: true))/\(user)}:"
        return (base + "r", base + "t")
    }

    /// KEYS: marks, times. ARGV: room, offset, name, shares (0/1), now, bound, evicting (0/1).
    /// Returns {offset, updated, added (0/1), old offset, {evicted rooms}, name}; offset -1
    /// when nothing was recorded (a full list and no eviction).
    static let recordScript = RedisScript("""
        local offset, updated = tonumber(ARGV[2]), tonumber(ARGV[5])
        local old = redis.call('HGET', KEYS[1], ARGV[1])
        if not old and ARGV[7] == '0' and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then
            return {-1, 0, 0, 0, {}, ARGV[3]}
        end
        local added, oldOffset, name = 1, 0, ARGV[3]
        if old then
            added = 0
            local o, u, n = string.match(old, '^(%d+)\\t%d\\t(%d+)\\t(.*)$')
            oldOffset = tonumber(o) or 0
            if oldOffset > offset then offset = oldOffset end
            if (tonumber(u) or 0) > updated then updated = tonumber(u) end
            if name == '' and n then name = n end
        end
        redis.call('HSET', KEYS[1], ARGV[1], string.format('%d\\t%s\\t%d\\t', offset, ARGV[4], updated) .. name)
        redis.call('ZADD', KEYS[2], updated, ARGV[1])
        local evicted = {}
        if added == 1 then
            local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[6])
            if excess > 0 then
                for _, room in ipairs(redis.call('ZRANGE', KEYS[2], 0, excess)) do
                    if room ~= ARGV[1] and #evicted < excess then
                        redis.call('ZREM', KEYS[2], room)
                        redis.call('HDEL', KEYS[1], room)
                        evicted[#evicted + 1] = room
                    end
                end
            end
        end
        return {offset, updated, added, oldOffset, evicted, name}
        """)

    /// KEYS: every mark. ARGV: this mark's member, its time, the bound, then members the
    /// user's own bound dropped (taken out only if not touched since: their time is at most
    /// this mark's). Returns {member, time, …} of the marks to drop for the store's bound
    /// (the least recently touched, never this one), at most 100 at a time; they stay in the
    /// set until they are forgotten (``forgetScript``), so a failure leaves them counted.
    static let allMarksScript = RedisScript("""
        for i = 4, #ARGV do
            local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
            if score and tonumber(score) <= tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[i]) end
        end
        -- GT: a record that lands late never moves a mark back in time (it would stay at
        -- the head, picked again and again and never forgotten).
        redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])
        local excess = math.min(redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3]), 100)
        local dropped = {}
        if excess > 0 then
            local oldest = redis.call('ZRANGE', KEYS[1], 0, excess, 'WITHSCORES')
            for i = 1, #oldest, 2 do
                if oldest[i] ~= ARGV[1] and #dropped < 2 * excess then
                    dropped[#dropped + 1] = oldest[i]
                    dropped[#dropped + 1] = oldest[i + 1]
                end
            end
        end
        return dropped
        """)

    /// KEYS: marks, times. ARGV: room, the time it was picked at. Drops a mark the store's
    /// bound picked, unless it was touched since: then {0, its time} (someone just read the
    /// room; the count learns the newer time, so the mark is not picked again for it), else {1}.
    static let forgetScript = RedisScript("""
        local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
        if score and tonumber(score) > tonumber(ARGV[2]) then return {0, score} end
        redis.call('HDEL', KEYS[1], ARGV[1])
        redis.call('ZREM', KEYS[2], ARGV[1])
        return {1}
        """)

    /// KEYS: every mark. ARGV: member, time. Takes a dropped mark out of the count, unless
    /// it was counted again since with a later time.
    static let uncountScript = RedisScript("""
        local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
        if score and tonumber(score) <= tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
        return 1
        """)

    private var allMarksKey: String { keyspace.prefix + ":reads:all" }

    private static func member(_ channel: String, _ user: String, _ room: String) -> String {
        channel + "\u{0}" + user + "\u{0}" + room
    }

    /// Drops one mark the store's bound picked (`member`, touched at `time`): from the
    /// user's keys if not touched since, then from the room's keys and the count.
    private func forget(_ member: String, time: String, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        let parts = member.split(separator: "\u{0}", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        let (redis, timeout, allMarks) = (self.redis, timeoutMillis, allMarksKey)
        guard parts.count == 3 else {
            // Not a mark's name: only take it out of the count.
            return redis.evaluate(Self.uncountScript, keys: [.string(allMarks)], arguments: [.string(member), .string(time)],
                                  timeoutMillis: timeout) { result in completion(result.map { _ in true }.mapError { RedisRouting.error($0, "dropping a read mark") }) }
        }
        let (channel, user, room) = (parts[0], parts[1], parts[2])
        let keys = userKeys(user, in: channel)
        let roomKeys = keyspace.room(RoomKey(channel: channel, room: room))
        redis.evaluate(Self.forgetScript, keys: [.string(keys.marks), .string(keys.times)], arguments: [.string(room), .string(time)],
                       timeoutMillis: timeout) { result in
            switch result {
            case .failure(let error): return completion(.failure(RedisRouting.error(error, "dropping a read mark")))
            case .success(let reply) where reply.array?.first?.int == 0:
                // Read meanwhile: kept, and counted at its newer time.
                let newer = reply.array?.dropFirst().first?.string ?? "0"
                return redis.send(RedisCommand("ZADD", .string(allMarks), "GT", .string(newer), .string(member))) { _ in
                    completion(.success(false))
                }
            case .success: break
            }
            redis.send(batch: [RedisCommand("ZREM", .string(roomKeys.base + "rd"), .string(user)),
                               RedisCommand("HDEL", .string(roomKeys.base + "rn"), .string(user)),
                               RedisCommand("SREM", .string(roomKeys.base + "ru"), .string(user))]) { results in
                for case .failure(let error) in results { return completion(.failure(RedisRouting.error(error, "dropping a read receipt"))) }
                redis.evaluate(Self.uncountScript, keys: [.string(allMarks)], arguments: [.string(member), .string(time)],
                               timeoutMillis: timeout) { result in
                    completion(result.map { _ in true }.mapError { RedisRouting.error($0, "dropping a read mark") })
                }
            }
        }
    }

    /// Counts `mark` among every mark (and takes out `droppedRooms`, which the user's bound
    /// dropped); past the store's bound, drops the least recently touched marks of anyone.
    /// A pick the forget script refused (read since, at a time the count learns only then)
    /// drops nothing: the pick is made again, a few rounds at most.
    private func keepBound(_ mark: ReadMark, droppedRooms: [String], rounds: Int = 4,
                           completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        let arguments: [RedisArgument] = [.string(Self.member(mark.room.channel, mark.user, mark.room.room)), .integer(mark.updatedMillis),
                                          .integer(Int64(maxMarks))]
            + droppedRooms.map { .string(Self.member(mark.room.channel, mark.user, $0)) }
        redis.evaluate(Self.allMarksScript, keys: [.string(allMarksKey)], arguments: arguments, timeoutMillis: timeoutMillis) { [self] result in
            var picked: [(member: String, time: String)] = []
            switch result {
            case .failure(let error): return completion(.failure(RedisRouting.error(error, "counting read marks")))
            case .success(let reply):
                let flat = (reply.array ?? []).map { $0.string ?? $0.int.map(String.init) ?? "" }
                var index = 0
                while index + 1 < flat.count {
                    picked.append((flat[index], flat[index + 1]))
                    index += 2
                }
            }
            gather(picked, { (pick, done: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) in
                forget(pick.member, time: pick.time, completion: done)
            }) { [self] result in
                if case .success(let forgotten) = result, forgotten.contains(false), rounds > 1 {
                    return keepBound(mark, droppedRooms: [], rounds: rounds - 1, completion: completion)
                }
                completion(result.map { _ in () })
            }
        }
    }

    public func record(_ mark: ReadMark, evicting: Bool, completion: @escaping @Sendable (Result<ReadUpdate, ParleyError>) -> Void) {
        let keys = userKeys(mark.user, in: mark.room.channel)
        let (redis, keyspace, timeout) = (self.redis, self.keyspace, timeoutMillis)
        redis.evaluate(Self.recordScript, keys: [.string(keys.marks), .string(keys.times)], arguments: [
            .string(mark.room.room), .integer(mark.offset), .string(mark.name), .string(mark.sharesReceipts ? "1" : "0"),
            .integer(mark.updatedMillis), .integer(Int64(maxRoomsPerUser)), .string(evicting ? "1" : "0"),
        ], timeoutMillis: timeout) { result in
            let reply: RedisValue
            switch result {
            case .failure(let error): return completion(.failure(RedisRouting.error(error, "recording a read mark")))
            case .success(let value): reply = value
            }
            guard let parts = reply.array, parts.count == 6, let offset = parts[0].int, let updated = parts[1].int,
                  let added = parts[2].int, let oldOffset = parts[3].int else {
                return completion(.failure(ParleyError(.internalError, "Redis answered a read mark with \(reply)")))
            }
            if offset < 0 { return completion(.success(ReadUpdate(mark: mark, moved: false, added: false))) }
            var stored = mark
            stored.offset = offset
            stored.updatedMillis = updated
            stored.name = parts[5].string ?? mark.name
            let room = keyspace.room(mark.room)
            // One batch per room (one slot each in a Redis Cluster).
            var batches: [[RedisCommand]] = []
            let member = RedisCommand("SADD", .string(room.base + "ru"), .string(mark.user))
            if stored.sharesReceipts && offset > 0 {
                batches.append([RedisCommand("ZADD", .string(room.base + "rd"), "GT", .integer(offset), .string(mark.user)),
                                RedisCommand("HSET", .string(room.base + "rn"), .string(mark.user), .string(stored.name)), member])
            } else {
                batches.append([RedisCommand("ZREM", .string(room.base + "rd"), .string(mark.user)), member])
            }
            for evicted in parts[4].array ?? [] {
                guard let name = evicted.string else { continue }
                let gone = keyspace.room(RoomKey(channel: mark.room.channel, room: name))
                batches.append([RedisCommand("ZREM", .string(gone.base + "rd"), .string(mark.user)),
                                RedisCommand("HDEL", .string(gone.base + "rn"), .string(mark.user)),
                                RedisCommand("SREM", .string(gone.base + "ru"), .string(mark.user))])
            }
            let update = ReadUpdate(mark: stored, moved: offset > oldOffset, added: added == 1)
            let droppedRooms = (parts[4].array ?? []).compactMap(\.string), recorded = stored
            gather(batches, { (batch: [RedisCommand], done: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) in
                redis.send(batch: batch) { results in
                    for case .failure(let error) in results { return done(.failure(RedisRouting.error(error, "recording a read receipt"))) }
                    done(.success(true))
                }
            }) { [self] result in
                // A mark read again keeps its old time in the count: the one key every read
                // would write is written only for a new mark (or one the user's bound
                // dropped); the forget script finds the newer time if the old one is picked.
                guard update.added || !droppedRooms.isEmpty else { return completion(result.map { _ in update }) }
                // Counted whatever the room's keys answered: a mark recorded is never left
                // out of the bound.
                keepBound(recorded, droppedRooms: droppedRooms) { bound in
                    if case .failure = result { return completion(result.map { _ in update }) }
                    completion(bound.map { _ in update })
                }
            }
        }
    }

    public func mark(of user: String, in room: RoomKey, completion: @escaping @Sendable (Result<ReadMark?, ParleyError>) -> Void) {
        let keys = userKeys(user, in: room.channel)
        redis.send(RedisCommand("HGET", .string(keys.marks), .string(room.room))) { result in
            switch result {
            case .failure(let error): completion(.failure(RedisRouting.error(error, "reading a read mark")))
            case .success(let reply):
                completion(.success(reply.string.flatMap { Self.mark(record: $0, user: user, room: room) }))
            }
        }
    }

    public func marks(of user: String, in channel: String, limit: Int,
                      completion: @escaping @Sendable (Result<[ReadMark], ParleyError>) -> Void) {
        guard limit > 0 else { return completion(.success([])) }
        let keys = userKeys(user, in: channel)
        let redis = self.redis
        redis.send(RedisCommand("ZREVRANGE", .string(keys.times), .integer(0), .integer(Int64(limit - 1)))) { result in
            let rooms: [String]
            switch result {
            case .failure(let error): return completion(.failure(RedisRouting.error(error, "listing read marks")))
            case .success(let reply): rooms = (reply.array ?? []).compactMap(\.string)
            }
            guard !rooms.isEmpty else { return completion(.success([])) }
            redis.send(RedisCommand([.string("HMGET"), .string(keys.marks)] + rooms.map { .string($0) })) { result in
                switch result {
                case .failure(let error): completion(.failure(RedisRouting.error(error, "reading read marks")))
                case .success(let reply):
                    let records = reply.array ?? []
                    completion(.success(zip(rooms, records).compactMap { room, record in
                        record.string.flatMap { Self.mark(record: $0, user: user, room: RoomKey(channel: channel, room: room)) }
                    }))
                }
            }
        }
    }

    public func readers(of room: RoomKey, limit: Int, completion: @escaping @Sendable (Result<[ReadReceipt], ParleyError>) -> Void) {
        guard limit > 0 else { return completion(.success([])) }
        let keys = keyspace.room(room)
        let redis = self.redis
        redis.send(RedisCommand("ZREVRANGE", .string(keys.base + "rd"), .integer(0), .integer(Int64(limit - 1)), "WITHSCORES")) { result in
            var readers: [(user: String, offset: Int64)] = []
            switch result {
            case .failure(let error): return completion(.failure(RedisRouting.error(error, "listing read receipts")))
            case .success(let reply):
                // RESP3 answers [[member, score], …]; RESP2 a flat [member, score, …].
                var flat: [RedisValue] = []
                for item in reply.array ?? [] {
                    if let pair = item.array { flat.append(contentsOf: pair) } else { flat.append(item) }
                }
                var index = 0
                while index + 1 < flat.count {
                    if let user = flat[index].string, let offset = flat[index + 1].string.flatMap({ Double($0) }) {
                        readers.append((user, Int64(offset)))
                    }
                    index += 2
                }
            }
            guard !readers.isEmpty else { return completion(.success([])) }
            let found = readers
            redis.send(RedisCommand([.string("HMGET"), .string(keys.base + "rn")] + readers.map { .string($0.user) })) { result in
                switch result {
                case .failure(let error): completion(.failure(RedisRouting.error(error, "reading receipt names")))
                case .success(let reply):
                    let names = reply.array ?? []
                    completion(.success(found.enumerated().map { index, reader in
                        ReadReceipt(user: reader.user, name: index < names.count ? names[index].string ?? reader.user : reader.user,
                                    offset: reader.offset)
                    }))
                }
            }
        }
    }

    public func users(of room: RoomKey, limit: Int, completion: @escaping @Sendable (Result<[String], ParleyError>) -> Void) {
        guard limit > 0 else { return completion(.success([])) }
        // SRANDMEMBER with a positive count: up to `limit` distinct members, without reading all.
        redis.send(RedisCommand("SRANDMEMBER", .string(keyspace.room(room).base + "ru"), .integer(Int64(limit)))) { result in
            switch result {
            case .failure(let error): completion(.failure(RedisRouting.error(error, "listing a room's users")))
            case .success(let reply): completion(.success((reply.array ?? []).compactMap(\.string).sorted()))
            }
        }
    }

    /// A mark from its record; nil for anything malformed.
    static func mark(record: String, user: String, room: RoomKey) -> ReadMark? {
        let parts = record.split(separator: "\t", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, let offset = Int64(parts[0]), let updated = Int64(parts[2]) else { return nil }
        return ReadMark(user: user, room: room, offset: offset, name: String(parts[3]), sharesReceipts: parts[1] == "1",
                        updatedMillis: updated)
    }
}
