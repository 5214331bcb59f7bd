import Dispatch
import ParleyCore
import ParleyIO
import Synchronization

/// Options of ``RedisMessageStore``.
public struct RedisStoreOptions: Sendable, Equatable {
    /// How long stored messages are kept (count per room, age; per channel).
    public var retention: StoreRetention = .keepEverything
    /// How long a client message id is remembered (a retry within it gets the original).
    public var idempotencyWindowMillis: Int64 = 24 * 3_600_000
    /// How often one node of the cluster drops messages past their age (rooms that get no
    /// publishes; a publish trims its own room); 0 never does.
    public var retentionIntervalMillis: Int = 60_000
    /// Most client message ids a room keeps (each append with one past it forgets the
    /// room's oldest) and one ``RedisMessageStore/loadRoom(_:clientMessageIDsSince:completion:)`` returns.
    public var maxClientIDsPerRoom: Int = SingleNodeBroker.maxRememberedPerRoom
    /// Most rooms whose key names are cached.
    public var maxCachedRooms: Int = 100_000
    /// A stored message (or message action) is acknowledged only once this many replicas
    /// have it (`WAIT` after the append script); 0 acknowledges as soon as the master has it.
    public var replicasToAcknowledge: Int = 0
    /// How long `WAIT` waits for ``replicasToAcknowledge`` replicas; fewer in time fail the
    /// append as unavailable (it is on the master; a retry with the same client message id
    /// is answered from it).
    public var replicasTimeoutMillis: Int = 1_000

    public init() {}
}

/// Room history in Redis: one stream per room (entry id = offset), next to the room's offset
/// counter and its recent client message ids, all under the room's hash tag (see
/// ``RedisKeyspace``). Works over one Redis or a Redis Cluster; the sibling of the SQLite and
/// memory stores, held to the same contract.
///
/// - An append is one script (``RedisBackendScripts/append``): the offset must follow the
///   room's last one, the stream is trimmed to the retention count, old messages at its head
///   are dropped by age. ``RedisBroker`` publishes through the same script, which also takes
///   the offset and publishes the message.
/// - A room's calls from one thread go out on one connection, so appends are applied, and
///   complete, in call order.
/// - Durability is Redis's: see the README (`appendonly` / `appendfsync`).
public final class RedisMessageStore: MessageStore {
    public let options: RedisStoreOptions
    public let keyspace: RedisKeyspace
    let routing: RedisRouting
    let rooms: RoomKeyCache
    let clock: any WallClock
    private let retentionTimer: Mutex<LoopBound<TimerBox>?> = Mutex(nil)

    public var redis: any RedisCommandExecutor { routing.redis }

    public init(redis: any RedisCommandExecutor, keyspace: RedisKeyspace, options: RedisStoreOptions = RedisStoreOptions(),
                clock: any WallClock = SystemWallClock()) {
        self.options = options
        self.keyspace = keyspace
        self.clock = clock
        routing = RedisRouting(redis: redis, keyspace: keyspace)
        rooms = RoomKeyCache(keyspace: keyspace, maxRooms: options.maxCachedRooms)
        startBackgroundRetention()
    }

    /// Commands of this store (and of a broker over it) waiting for Redis.
    public var pendingCommands: Int { routing.pending.load(ordering: .relaxed) }

    deinit { close() }

    /// Stops the background retention pass (the Redis client is the caller's to close).
    public func close() {
        guard let box = retentionTimer.withLock({ value -> LoopBound<TimerBox>? in
            defer { value = nil }
            return value
        }) else { return }
        box.run { $0.timer?.stop(); $0.timer = nil }
    }

    // MARK: writing

    /// The arguments of the append script for `message`.
    func appendArguments(_ message: Message, clientMessageID: String?, channel: String, expectedOffset: Int64) -> [RedisArgument] {
        let policy = options.retention.policy(for: message.room.channel)
        let action = message.action
        return [.bytes(RedisRecords.record(message)), .integer(message.timestampMillis), .string(clientMessageID ?? ""),
                .string(message.id), .integer(max(1, options.idempotencyWindowMillis)),
                .integer(Int64(policy.maxMessagesPerRoom ?? 0)), .integer(policy.maxAgeMillis ?? 0),
                .string(channel), .integer(expectedOffset),
                .string(action?.kind.rawValue ?? ""), .integer(action?.target.offset ?? 0), .string(action?.emoji ?? ""),
                .string(message.sender?.id ?? ""), .string(message.sender?.displayName ?? ""),
                .bytes(action?.kind == .edit ? message.body.serialized() : []),
                .integer(Int64(max(1, options.maxClientIDsPerRoom)))]
    }

    static func appendKeys(_ keys: RoomKeys) -> [String] {
        [keys.offset, keys.stream, keys.clientIDs, keys.clientIDTimes, keys.state, keys.deleted]
    }

    /// On the room's connection: lists the room among those with history when this process
    /// has not yet (pipelined before the write that follows).
    func indexIfNeeded(_ room: RoomKey, _ addToIndex: Bool) {
        guard addToIndex else { return }
        let rooms = self.rooms
        routing.send(RedisCommand("SADD", .string(keyspace.streams), .string(RedisKeyspace.roomName(room)))) { result in
            if case .failure = result { rooms.unindexed(room) }
        }
    }

    public func append(_ message: Message, clientMessageID: String?,
                       completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        let (keys, addToIndex) = rooms.use(message.room, nowMillis: clock.nowMillis(), indexing: true)
        let arguments = appendArguments(message, clientMessageID: clientMessageID, channel: "", expectedOffset: message.offset)
        routing.onLoop(for: message.room) { [self] in
            indexIfNeeded(message.room, addToIndex)
            routing.evaluate(RedisBackendScripts.append, keys: Self.appendKeys(keys), arguments: arguments,
                             replicas: options.replicasToAcknowledge, timeoutMillis: options.replicasTimeoutMillis) { result in
                switch result {
                case .failure(let error):
                    completion(.failure(RedisRouting.error(error, "storing a message of \(message.room)")))
                case .success(let reply):
                    let parts = reply.array ?? []
                    switch parts.first?.int {
                    case 1:
                        completion(.success(()))
                    case -1:
                        let last = parts.count > 1 ? parts[1].int ?? 0 : 0
                        completion(.failure(ParleyError(.conflict, "offset \(message.offset) does not follow \(last) in \(message.room)")))
                    case -2:
                        completion(.failure(ParleyError(.unavailable, "Redis refused a message of \(message.room): \(parts.count > 1 ? parts[1].string ?? "" : "")")))
                    default:
                        completion(.failure(RedisRouting.unexpected(reply, "storing a message of \(message.room)")))
                    }
                }
            }
        }
    }

    // MARK: reading

    public func messages(in room: RoomKey, after offset: Int64, limit: Int,
                         completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        messages(in: room, after: offset, limit: limit, maxBytes: .max, completion: completion)
    }

    public func messages(in room: RoomKey, after offset: Int64, limit: Int, maxBytes: Int,
                         completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        guard limit > 0 else { return completion(.success([])) }
        let keys = rooms.use(room, nowMillis: clock.nowMillis()).keys
        readRange(keys, room: room, "XRANGE", .integer(max(0, offset) + 1), "+", count: limit, maxBytes: maxBytes) { result in
            completion(Self.decodeRange(result, room: room, reversed: false))
        }
    }

    public func messages(in room: RoomKey, before: Int64?, limit: Int,
                         completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        messages(in: room, before: before, limit: limit, maxBytes: .max, completion: completion)
    }

    /// The script stops at the byte budget, so what is left out never leaves Redis.
    public func messages(in room: RoomKey, before: Int64?, limit: Int, maxBytes: Int,
                         completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        if limit <= 0 || (before.map { $0 <= 1 } ?? false) {
            return completion(.success(MessagePage(messages: [], hasMore: false)))
        }
        let keys = rooms.use(room, nowMillis: clock.nowMillis()).keys
        let end: RedisArgument = before.map { .integer($0 - 1) } ?? "+"
        let budget = maxBytes == .max ? 0 : Int64(max(1, maxBytes))
        routing.onLoop(for: room) { [routing] in
            // One more than asked for: it says whether older ones exist.
            routing.evaluate(RedisBackendScripts.readHistory, keys: [keys.stream, keys.deleted, keys.state],
                             arguments: [end, .integer(Int64(limit + 1)), .integer(budget)]) { result in
                switch result {
                case .failure(let error):
                    completion(.failure(RedisRouting.error(error, "reading the history of \(room)")))
                case .success(let reply):
                    guard let parts = reply.array, parts.count == 2, let items = parts[0].array else {
                        return completion(.failure(RedisRouting.unexpected(reply, "reading the history of \(room)")))
                    }
                    // Newest first; an entry that cannot be decoded is skipped, as in a range.
                    let messages = items.compactMap { RedisRecords.currentMessage($0, room: room) }
                    let page = Array(messages.prefix(limit).reversed())
                    completion(.success(MessagePage(messages: page, hasMore: items.count > limit || parts[1].int == 1)))
                }
            }
        }
    }

    /// A range of the room's stream with its deleted messages as tombstones, in one script.
    private func readRange(_ keys: RoomKeys, room: RoomKey, _ command: String, _ start: RedisArgument, _ end: RedisArgument,
                           count: Int, maxBytes: Int = .max,
                           completion: @escaping @Sendable (Result<RedisValue, RedisError>) -> Void) {
        let budget = maxBytes == .max ? 0 : Int64(max(1, maxBytes))
        routing.onLoop(for: room) { [routing] in
            routing.evaluate(RedisBackendScripts.readRange, keys: [keys.stream, keys.deleted],
                                      arguments: [.string(command), start, end, .integer(Int64(count)), .integer(budget)],
                                      completion: completion)
        }
    }

    /// One script: the id index gives the offset, the stream the entry, the state hash the rest.
    public func message(withID id: String, in room: RoomKey, completion: @escaping @Sendable (Result<Message?, ParleyError>) -> Void) {
        let keys = rooms.use(room, nowMillis: clock.nowMillis()).keys
        routing.onLoop(for: room) { [routing] in
            routing.evaluate(RedisBackendScripts.findMessage, keys: [keys.stream, keys.deleted, keys.state],
                             arguments: [.string(id)]) { result in
                switch result {
                case .failure(let error):
                    completion(.failure(RedisRouting.error(error, "looking up a message of \(room)")))
                case .success(let reply):
                    guard let items = reply.array else {
                        return completion(.failure(RedisRouting.unexpected(reply, "looking up a message of \(room)")))
                    }
                    completion(.success(items.first.flatMap { RedisRecords.currentMessage($0, room: room) }))
                }
            }
        }
    }

    /// Marks the message at `offset` deleted: from then on it reads as a tombstone (same id,
    /// offset, time and sender; no body).
    public func deleteMessage(in room: RoomKey, offset: Int64, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        guard offset > 0 else { return completion(.success(false)) }
        let keys = rooms.use(room, nowMillis: clock.nowMillis()).keys
        routing.onLoop(for: room) { [routing] in
            routing.evaluate(RedisBackendScripts.deleteMessage, keys: [keys.stream, keys.deleted, keys.state],
                                      arguments: [.integer(offset)]) { result in
                switch result {
                case .success(let reply): completion(.success(reply.int == 1))
                case .failure(let error): completion(.failure(RedisRouting.error(error, "deleting a message of \(room)")))
                }
            }
        }
    }

    static func decodeRange(_ result: Result<RedisValue, RedisError>, room: RoomKey, reversed: Bool) -> Result<[Message], ParleyError> {
        switch result {
        case .failure(let error):
            return .failure(RedisRouting.error(error, "reading the history of \(room)"))
        case .success(let reply):
            do {
                return .success(try RedisRecords.messages(fromReadRange: reply, room: room))
            } catch {
                return .failure(ParleyError(.internalError, error.message))
            }
        }
    }

    public func loadRoom(_ room: RoomKey, clientMessageIDsSince: Int64,
                         completion: @escaping @Sendable (Result<RoomRecovery, ParleyError>) -> Void) {
        let keys = rooms.use(room, nowMillis: clock.nowMillis()).keys
        let arguments: [RedisArgument] = [.integer(clientMessageIDsSince), .integer(Int64(max(0, options.maxClientIDsPerRoom)))]
        routing.onLoop(for: room) { [routing] in
            routing.evaluate(RedisBackendScripts.loadRoom, keys: [keys.offset, keys.clientIDs, keys.clientIDTimes],
                             arguments: arguments) { result in
                switch result {
                case .failure(let error):
                    completion(.failure(RedisRouting.error(error, "reading where \(room) stands")))
                case .success(let reply):
                    guard let parts = reply.array, let last = parts.first?.int, parts.count % 2 == 1 else {
                        return completion(.failure(RedisRouting.unexpected(reply, "reading where \(room) stands")))
                    }
                    var recovery = RoomRecovery(lastOffset: last)
                    for index in stride(from: 1, to: parts.count, by: 2) {
                        guard let clientID = parts[index].string, let remembered = parts[index + 1].string,
                              let publish = Self.remembered(remembered, clientMessageID: clientID, room: room) else { continue }
                        recovery.recentPublishes.append(publish)
                    }
                    recovery.recentPublishes.sort { $0.offset < $1.offset }
                    completion(.success(recovery))
                }
            }
        }
    }

    /// `offset timestamp id` as the append script remembers a client message id.
    static func remembered(_ text: String, clientMessageID: String, room: RoomKey) -> RememberedPublish? {
        let parts = text.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let offset = Int64(parts[0]), let timestamp = Int64(parts[1]) else { return nil }
        return RememberedPublish(room: room, clientMessageID: clientMessageID, id: String(parts[2]), offset: offset,
                                 timestampMillis: timestamp)
    }

    // MARK: every room

    /// Calls `body` with each page of the rooms that have history, then `done`.
    func forEachRoomPage(_ body: @escaping @Sendable ([RoomKey], @escaping @Sendable (ParleyError?) -> Void) -> Void,
                         done: @escaping @Sendable (ParleyError?) -> Void) {
        let streams = keyspace.streams, routing = self.routing
        @Sendable func page(_ cursor: String) {
            routing.send(RedisCommand(["SSCAN", .string(streams), .string(cursor), "COUNT", "500"], keyIndex: 1)) { result in
                switch result {
                case .failure(let error):
                    done(RedisRouting.error(error, "listing the rooms with history"))
                case .success(let reply):
                    guard let parts = reply.array, parts.count == 2, let next = parts[0].string, let names = parts[1].array else {
                        return done(RedisRouting.unexpected(reply, "listing the rooms with history"))
                    }
                    let rooms = names.compactMap { $0.string.flatMap(RedisKeyspace.room(named:)) }
                    body(rooms) { error in
                        if let error { return done(error) }
                        if next == "0" { done(nil) } else { page(next) }
                    }
                }
            }
        }
        routing.loops[0].execute { page("0") }
    }

    public func enforceRetention(nowMillis: Int64, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        guard !options.retention.keepsEverything else { return completion(.success(())) }
        let retention = options.retention, keyspace = self.keyspace, routing = self.routing
        forEachRoomPage({ rooms, next in
            let work = rooms.compactMap { room -> (RoomKey, StoreRetention.ChannelRetention)? in
                let policy = retention.policy(for: room.channel)
                return policy.maxMessagesPerRoom == nil && policy.maxAgeMillis == nil ? nil : (room, policy)
            }
            let remaining = Atomic<Int>(work.count)
            let failure = Mutex<ParleyError?>(nil)
            if work.isEmpty { return next(nil) }
            for (room, policy) in work {
                let roomKeys = keyspace.room(room)
                let (stream, state) = (roomKeys.stream, roomKeys.state)
                @Sendable func trim() {
                    routing.evaluate(RedisBackendScripts.trim, keys: [stream, state],
                                     arguments: [.integer(Int64(policy.maxMessagesPerRoom ?? 0)), .integer(policy.maxAgeMillis ?? 0),
                                                 .integer(nowMillis)]) { result in
                        switch result {
                        case .success(let more) where more.int == 1:
                            trim()
                            return
                        case .success:
                            break
                        case .failure(let error):
                            failure.withLock { $0 = $0 ?? RedisRouting.error(error, "trimming the history of \(room)") }
                        }
                        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                            next(failure.withLock { $0 })
                        }
                    }
                }
                trim()
            }
        }, done: { error in
            completion(error.map { .failure($0) } ?? .success(()))
        })
    }

    /// Blocking; reads every room. Never call it on one of the Redis client's loops.
    public func recover(clientMessageIDsSince: Int64) throws(ParleyError) -> StoreRecovery {
        guard !routing.loops.contains(where: \.inEventLoop) else {
            throw ParleyError(.internalError, "RedisMessageStore.recover must not run on an event loop")
        }
        let recovery = Mutex(StoreRecovery())
        let finished = DispatchSemaphore(value: 0)
        let outcome = Mutex<ParleyError?>(nil)
        forEachRoomPage({ [self] rooms, next in
            if rooms.isEmpty { return next(nil) }
            let remaining = Atomic<Int>(rooms.count)
            let failure = Mutex<ParleyError?>(nil)
            for room in rooms {
                loadRoom(room, clientMessageIDsSince: clientMessageIDsSince) { result in
                    switch result {
                    case .success(let loaded):
                        recovery.withLock { recovery in
                            recovery.lastOffsets[room] = loaded.lastOffset
                            recovery.recentPublishes += loaded.recentPublishes
                        }
                    case .failure(let error):
                        failure.withLock { $0 = $0 ?? error }
                    }
                    if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                        next(failure.withLock { $0 })
                    }
                }
            }
        }, done: { error in
            outcome.withLock { $0 = error }
            finished.signal()
        })
        finished.wait()
        if let error = outcome.withLock({ $0 }) { throw error }
        return recovery.withLock { $0 }
    }

    // MARK: background retention

    /// Every ``RedisStoreOptions/retentionIntervalMillis``, the node that takes the
    /// retention lock drops what retention no longer keeps in every room.
    private func startBackgroundRetention() {
        let interval = options.retentionIntervalMillis
        guard interval > 0, !options.retention.keepsEverything else { return }
        let loop = routing.loops[0]
        let box = LoopBound(TimerBox(), on: loop)
        retentionTimer.withLock { $0 = box }
        let lock = keyspace.retentionLock, routing = self.routing, clock = self.clock
        let token = "\(UInt64.random(in: 0...UInt64.max))"
        box.run { holder in
            let timer = LoopTimer(loop: loop)
            holder.timer = timer
            timer.start(after: UInt64(interval), repeating: UInt64(interval)) { [weak self] in
                guard let store = self else { return }
                routing.send(RedisCommand("SET", .string(lock), .string(token), "NX", "PX", .integer(Int64(interval)))) { result in
                    guard case .success(let reply) = result, !reply.isNull else { return }
                    store.enforceRetention(nowMillis: clock.nowMillis()) { _ in }
                }
            }
        }
    }
}

/// A timer kept on its loop.
final class TimerBox {
    var timer: LoopTimer?
}
