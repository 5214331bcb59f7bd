import ParleyCore
import ParleyIO
import Synchronization

/// How the Redis backends send: a room's commands from one thread go out on one connection
/// in call order, and failures become ``ParleyError``s that name Redis.
///
/// A caller on one of the client's loops sends on that loop's connection (no thread hop:
/// a session's publish, typing and joins go out in the order it made them). A caller on any
/// other thread (REST handlers, tools, tests) is moved to the room's loop, picked by a hash
/// of the room, so its calls for one room keep their order too.
final class RedisRouting: Sendable {
    let redis: any RedisCommandExecutor
    let keyspace: RedisKeyspace
    /// Commands sent by the backends and not answered yet.
    let pending = Atomic<Int>(0)

    init(redis: any RedisCommandExecutor, keyspace: RedisKeyspace) {
        self.redis = redis
        self.keyspace = keyspace
    }

    var loops: [EventLoop] { redis.group.loops }

    /// The loop that owns `room` (its subscription, and calls from outside the loops).
    func loop(for room: RoomKey) -> EventLoop {
        let loops = self.loops
        return loops[Int(Self.hash(room) % UInt64(loops.count))]
    }

    /// FNV-1a of `channel/room`: stable, cheap, spreads rooms over loops.
    static func hash(_ room: RoomKey) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in room.channel.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        hash = (hash ^ 0x2f) &* 0x100_0000_01b3
        for byte in room.room.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }

    /// Runs `body` on the caller's loop when it is one of the client's, else on `room`'s.
    func onLoop(for room: RoomKey, _ body: @escaping @Sendable () -> Void) {
        for loop in loops where loop.inEventLoop {
            body()
            return
        }
        loop(for: room).execute(body)
    }

    /// Sends `command` (on the current thread's connection: call it inside ``onLoop(for:_:)``).
    func send(_ command: RedisCommand, completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) {
        pending.add(1, ordering: .relaxed)
        redis.send(command) { [self] result in
            pending.subtract(1, ordering: .relaxed)
            completion(result)
        }
    }

    func evaluate(_ script: RedisScript, keys: [String], arguments: [RedisArgument],
                  completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) {
        pending.add(1, ordering: .relaxed)
        redis.evaluate(script, keys: keys.map { .string($0) }, arguments: arguments) { [self] result in
            pending.subtract(1, ordering: .relaxed)
            completion(result)
        }
    }

    /// Runs `script` and, when `replicas` > 0, `WAIT replicas timeoutMillis` right behind it on
    /// the same connection: the reply only counts once that many replicas have the script's
    /// writes. Fewer replicas in time fail with ``RedisError/Code/timeout`` (the writes are on
    /// the master, and may be on some replicas).
    func evaluate(_ script: RedisScript, keys: [String], arguments: [RedisArgument], replicas: Int, timeoutMillis: Int,
                  completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) {
        guard replicas > 0 else { return evaluate(script, keys: keys, arguments: arguments, completion: completion) }
        let tail: [RedisArgument] = [.integer(Int64(keys.count))] + keys.map { .string($0) } + arguments
        let wait = RedisCommand(["WAIT", .integer(Int64(replicas)), .integer(Int64(timeoutMillis))], keyIndex: nil,
                                timeoutMillis: timeoutMillis + 5_000)
        pending.add(1, ordering: .relaxed)
        @Sendable func run(_ name: String, _ body: String, fallback: Bool) {
            let command = RedisCommand([.string(name), .string(body)] + tail, keyIndex: 3)
            redis.send(batch: [command, wait]) { [self] results in
                if fallback, case .failure(let error) = results[0], error.serverCode == "NOSCRIPT" {
                    return run("EVAL", script.source, fallback: false)
                }
                pending.subtract(1, ordering: .relaxed)
                completion(Self.acknowledged(results, replicas: replicas, timeoutMillis: timeoutMillis))
            }
        }
        run("EVALSHA", script.sha1, fallback: true)
    }

    /// The script's reply once `WAIT` says enough replicas have it.
    static func acknowledged(_ results: [Result<RedisValue, RedisError>], replicas: Int, timeoutMillis: Int) -> Result<RedisValue, RedisError> {
        guard case .success(let reply) = results[0] else { return results[0] }
        // A refused append wrote nothing and needs no replica. A repeated one (0) is held to
        // WAIT too: a retry after a WAIT timeout is acknowledged only once replicas caught up.
        if let code = reply.array?.first?.int, code < 0 { return results[0] }
        switch results[1] {
        case .failure(let error):
            return .failure(error)
        case .success(let count):
            guard let count = count.int else {
                return .failure(RedisError(.unexpectedReply, "WAIT answered \(count)"))
            }
            guard count >= Int64(replicas) else {
                return .failure(RedisError(.timeout, "stored on the Redis master but on \(count) of \(replicas) replicas within \(timeoutMillis) ms"))
            }
            return .success(reply)
        }
    }

    /// A Redis failure as Parley reports it: `.unavailable`, naming Redis and what failed.
    static func error(_ error: RedisError, _ doing: String) -> ParleyError {
        switch error.code {
        case .timeout:
            return ParleyError(.unavailable, "Redis did not answer in time while \(doing) (it may still have happened): \(error.message)")
        case .queueFull:
            return ParleyError(.unavailable, "too many commands are waiting for Redis while \(doing): \(error.message)")
        case .connection, .closed, .cluster:
            return ParleyError(.unavailable, "Redis is unavailable while \(doing): \(error.message)")
        default:
            return ParleyError(.unavailable, "Redis failed while \(doing): \(error.message)")
        }
    }

    static func unexpected(_ reply: RedisValue, _ doing: String) -> ParleyError {
        ParleyError(.unavailable, "Redis gave an unexpected reply while \(doing): \(reply)")
    }
}

/// Per-room facts the backends keep between calls (the room's key names, and whether this
/// process has already listed it among the rooms with history), forgotten when idle.
final class RoomKeyCache: Sendable {
    struct Entry {
        let keys: RoomKeys
        var indexed = false
        var lastUsedMillis: Int64
    }
    private let keyspace: RedisKeyspace
    private let maxRooms: Int
    private let rooms = Mutex<[RoomKey: Entry]>([:])

    init(keyspace: RedisKeyspace, maxRooms: Int) {
        self.keyspace = keyspace
        self.maxRooms = max(1, maxRooms)
    }

    /// The room's keys, and true when the room must still be added to the history index
    /// (the caller does it; ``unindexed(_:)`` undoes the mark when that fails).
    func use(_ room: RoomKey, nowMillis: Int64, indexing: Bool = false) -> (keys: RoomKeys, addToIndex: Bool) {
        rooms.withLock { rooms in
            if var entry = rooms[room] {
                entry.lastUsedMillis = nowMillis
                let add = indexing && !entry.indexed
                if add { entry.indexed = true }
                rooms[room] = entry
                return (entry.keys, add)
            }
            // A bound, not a policy: past it, start over (the cache only saves work).
            if rooms.count >= maxRooms { rooms.removeAll(keepingCapacity: true) }
            let entry = Entry(keys: keyspace.room(room), indexed: indexing, lastUsedMillis: nowMillis)
            rooms[room] = entry
            return (entry.keys, indexing)
        }
    }

    func unindexed(_ room: RoomKey) {
        rooms.withLock { $0[room]?.indexed = false }
    }

    /// Forgets rooms unused since `before`; returns how many.
    func evict(before millis: Int64) -> Int {
        rooms.withLock { rooms in
            let idle = rooms.filter { $0.value.lastUsedMillis < millis }.map(\.key)
            for key in idle { rooms.removeValue(forKey: key) }
            return idle.count
        }
    }

    var count: Int { rooms.withLock { $0.count } }
}
