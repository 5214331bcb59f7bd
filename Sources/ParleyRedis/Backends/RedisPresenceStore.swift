import ParleyCore
import ParleyIO
import Synchronization

/// Options of ``RedisPresenceStore``.
public struct RedisPresenceOptions: Sendable, Equatable {
    /// This node's name in Redis (letters, digits, `.`, `_`, `-`; 1-64 bytes): unique per
    /// running node. Each lease period of good health is an *incarnation* of it
    /// (`NODE.xxxxxxxx`), renewed while the node can reach Redis.
    public var nodeID: String
    /// How long a node's members outlive its last lease renewal. A dead node's members leave
    /// everywhere within about this plus ``reapIntervalMillis``.
    public var leaseMillis: Int = 10_000
    /// How often the lease is renewed (default a third of the lease). Keep it plus the Redis
    /// command timeout below the lease.
    public var renewIntervalMillis: Int?
    /// How often each node looks for expired leases.
    public var reapIntervalMillis: Int = 1_000
    /// Members removed per reap script (a dead node's members in a large room go in batches).
    public var reapBatch: Int = 500
    /// Rooms, names per page, read while reaping a node.
    public var reapRoomPage: Int = 200

    /// Options for a node named `nodeID` (a random name when nil).
    public init(nodeID: String? = nil) {
        self.nodeID = nodeID ?? RedisPresenceOptions.randomNodeID()
    }

    public static func isValidNodeID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64 && id.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): true
            default: false
            }
        }
    }

    /// Eight random letters and digits.
    public static func randomNodeID() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<8).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }

    var effectiveRenewIntervalMillis: Int { max(100, renewIntervalMillis ?? leaseMillis / 3) }
}

/// Who is in which room, across every node, in Redis: the cluster sibling of
/// ``MemoryPresenceStore``, held to the same contract.
///
/// Per room (one hash tag): the members in join order (sorted set by a join sequence), each
/// member's data and the node incarnation that holds it (hash), and one set per incarnation
/// of the members it holds. Across rooms: the incarnations' leases (sorted set, Redis time),
/// each incarnation's rooms, and each channel's occupied rooms (for `rooms(in:)`).
///
/// - Every node renews its lease every few seconds. Every node's reaper removes the members
///   of incarnations whose lease expired, room by room, with a script that also announces
///   each leave on the room's channel; two reapers at once remove and announce each member
///   once.
/// - A node that cannot reach Redis (a failed renewal or a failed presence write) starts a
///   new incarnation as soon as Redis answers again: it moves every member it holds to it
///   (announcing a join only for members that had been reaped meanwhile) and reaps its old
///   incarnation itself (announcing the leaves of members that left while Redis was away).
///   Its reaper waits a whole lease period of good health before reaping others, so after
///   a Redis pause longer than the lease nobody's members are reaped while their node is
///   still reconnecting: no leave/join storm.
/// - All calls for a room run on the room's loop, in call order, on one connection.
public final class RedisPresenceStore: PresenceStore {
    public let options: RedisPresenceOptions
    public var nodeID: String { options.nodeID }
    let routing: RedisRouting
    let keyspace: RedisKeyspace
    private let state: Mutex<State>
    private let timers: LoopBound<PresenceTimers>

    private struct State {
        var incarnation: String
        /// Members this node added and has not removed, per room.
        var local: [RoomKey: [String: Member]] = [:]
        /// A presence write or a renewal failed: start a new incarnation when Redis answers.
        var dirty = false
        var reasserting = false
        /// When renewals started succeeding again (monotonic ms); nil while they fail.
        var healthySince: UInt64?
        var registered = false
        var reaping = false
        var closed = false
        /// Waiting for this node's members to be back in presence after an outage.
        var afterRestore: [@Sendable () -> Void] = []
        var reconnects = 0
        var reapPasses = 0
    }

    public init(redis: any RedisCommandExecutor, keyspace: RedisKeyspace, options: RedisPresenceOptions = RedisPresenceOptions()) {
        precondition(RedisPresenceOptions.isValidNodeID(options.nodeID), "invalid node id \(options.nodeID)")
        self.options = options
        self.keyspace = keyspace
        routing = RedisRouting(redis: redis, keyspace: keyspace)
        state = Mutex(State(incarnation: Self.incarnation(of: options.nodeID)))
        let loop = routing.loops[0]
        timers = LoopBound(PresenceTimers(), on: loop)
        timers.run { [weak self] timers in
            guard let self else { return }
            let renew = LoopTimer(loop: loop), reap = LoopTimer(loop: loop)
            timers.renew = renew
            timers.reap = reap
            let interval = UInt64(options.effectiveRenewIntervalMillis)
            renew.start(after: interval, repeating: interval) { [weak self] in self?.renewTick() }
            let reapInterval = UInt64(max(10, options.reapIntervalMillis))
            reap.start(after: reapInterval, repeating: reapInterval) { [weak self] in self?.reapTick() }
            self.renewTick()
        }
    }

    // The timers must go on their own loop.
    deinit {
        timers.run { timers in
            timers.renew?.stop()
            timers.reap?.stop()
            timers.renew = nil
            timers.reap = nil
        }
    }

    static func incarnation(of node: String) -> String {
        "\(node).\(RedisPresenceOptions.randomNodeID())"
    }

    /// The incarnation this node's members are held under now.
    public var incarnation: String { state.withLock { $0.incarnation } }

    /// True once a lease renewal has succeeded and nothing has failed since.
    public var isHealthy: Bool { state.withLock { $0.healthySince != nil && !$0.dirty } }

    /// Members this node holds.
    public var localMemberCount: Int { state.withLock { $0.local.values.reduce(0) { $0 + $1.count } } }

    /// Commands of this store waiting for Redis.
    public var pendingCommands: Int { routing.pending.load(ordering: .relaxed) }

    /// Times this node started a new incarnation after trouble with Redis.
    public var reassertions: Int { state.withLock { $0.reconnects } }

    /// True while the reaper may run: Redis has answered every renewal for a whole lease.
    public var reaperReady: Bool {
        state.withLock { state in
            guard !state.dirty, let since = state.healthySince else { return false }
            return monotonicMillis() >= since + UInt64(options.leaseMillis)
        }
    }

    /// Times the reaper has looked for expired leases (and reaped what it found).
    public var reapPasses: Int { state.withLock { $0.reapPasses } }

    // MARK: PresenceStore

    private func onRoomLoop(_ room: RoomKey, _ body: @escaping @Sendable () -> Void) {
        routing.loop(for: room).executeNowOrSoon(body)
    }

    private func markDirty() {
        state.withLock { $0.dirty = true }
    }

    public func add(_ member: Member, to room: RoomKey, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        onRoomLoop(room) { [self] in
            let (incarnation, firstInRoom, closed) = state.withLock { state -> (String, Bool, Bool) in
                let first = state.local[room]?.isEmpty ?? true
                if !state.closed { state.local[room, default: [:]][member.id] = member }
                return (state.incarnation, first, state.closed)
            }
            guard !closed else { return completion(.failure(ParleyError(.unavailable, "the Redis presence store is closed"))) }
            let write: @Sendable () -> Void = { [self] in
                writeMember(member, in: room, incarnation: incarnation, announce: false) { [self] result in
                    switch result {
                    case .failure(let error):
                        markDirty()
                        completion(.failure(RedisRouting.error(error, "adding a member to \(room)")))
                    case .success(let isNew):
                        // The node changed incarnation meanwhile: the member goes to the new one.
                        let moved = state.withLock { $0.incarnation != incarnation && $0.local[room]?[member.id] != nil }
                        if moved { restore(member, in: room) }
                        completion(.success(isNew))
                    }
                }
            }
            guard firstInRoom else { return write() }
            // The room goes on this incarnation's list first, so a reaper finds the member
            // even if this node dies right after adding it.
            routing.send(RedisCommand("SADD", .string(keyspace.nodeRooms(incarnation)), .string(RedisKeyspace.roomName(room)))) { [self] result in
                if case .failure(let error) = result {
                    markDirty()
                    return completion(.failure(RedisRouting.error(error, "adding a member to \(room)")))
                }
                write()
            }
        }
    }

    /// The add script for `member` under `incarnation`; with `announce`, a new member's join
    /// is published on the room's channel. Completes with whether it was new. Room loop only.
    private func writeMember(_ member: Member, in room: RoomKey, incarnation: String, announce: Bool,
                             completion: @escaping @Sendable (Result<Bool, RedisError>) -> Void) {
        let keys = keyspace.room(room)
        let arguments: [RedisArgument] = [.string(member.id), .string(incarnation), .bytes(RedisRecords.memberBytes(member)),
                                          .string(keys.nodeMembersPrefix), .string(announce ? keys.channel : "")]
        routing.evaluate(RedisBackendScripts.addMember, keys: [keys.joinSequence, keys.memberOrder, keys.memberData],
                         arguments: arguments) { [self] result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let reply):
                guard let parts = reply.array, parts.count == 2, let isNew = parts[0].int else {
                    return completion(.failure(RedisError(.unexpectedReply, "the add script answered \(reply)")))
                }
                if isNew == 1 {
                    routing.send(RedisCommand("ZADD", .string(keyspace.occupiedRooms(room.channel)), "0", .string(room.room))) { _ in }
                }
                completion(.success(isNew == 1))
            }
        }
    }

    public func remove(_ member: Member, from room: RoomKey, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        onRoomLoop(room) { [self] in
            state.withLock { state in
                state.local[room]?[member.id] = nil
                if state.local[room]?.isEmpty == true { state.local[room] = nil }
            }
            deleteMember(member.id, from: room, announce: false) { [self] result in
                switch result {
                case .failure(let error):
                    markDirty()
                    completion(.failure(RedisRouting.error(error, "removing a member from \(room)")))
                case .success(let removed):
                    completion(.success(removed))
                }
            }
        }
    }

    /// The remove script; then the room leaves its channel's list when empty, and this
    /// incarnation's list when it holds nobody there any more. Room loop only.
    private func deleteMember(_ id: String, from room: RoomKey, announce: Bool,
                              completion: @escaping @Sendable (Result<Bool, RedisError>) -> Void) {
        let keys = keyspace.room(room)
        routing.evaluate(RedisBackendScripts.removeMember, keys: [keys.memberOrder, keys.memberData],
                         arguments: [.string(id), .string(keys.nodeMembersPrefix), .string(announce ? keys.channel : "")]) { [self] result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let reply):
                guard let parts = reply.array, parts.count == 4, let removed = parts[0].int, let total = parts[1].int,
                      let nodeLeft = parts[2].int, let node = parts[3].string else {
                    return completion(.failure(RedisError(.unexpectedReply, "the remove script answered \(reply)")))
                }
                if removed == 1 && total == 0 { roomEmptied(room) }
                let holdsNone = state.withLock { $0.local[room] == nil }
                if removed == 1 && nodeLeft == 0 && holdsNone {
                    routing.send(RedisCommand("SREM", .string(keyspace.nodeRooms(node)), .string(RedisKeyspace.roomName(room)))) { _ in }
                }
                completion(.success(removed == 1))
            }
        }
    }

    /// A room's last member left: take it off its channel's list, then put it back if a
    /// member joined meanwhile (the two lists live on different slots).
    private func roomEmptied(_ room: RoomKey) {
        let occupied = keyspace.occupiedRooms(room.channel), order = keyspace.room(room).memberOrder
        routing.send(RedisCommand("ZREM", .string(occupied), .string(room.room))) { [routing] _ in
            routing.send(RedisCommand("ZCARD", .string(order))) { result in
                guard case .success(let count) = result, (count.int ?? 0) > 0 else { return }
                routing.send(RedisCommand("ZADD", .string(occupied), "0", .string(room.room))) { _ in }
            }
        }
    }

    public func members(of room: RoomKey, limit: Int,
                        completion: @escaping @Sendable (Result<(members: [Member], total: Int), ParleyError>) -> Void) {
        let keys = keyspace.room(room)
        onRoomLoop(room) { [routing] in
            routing.evaluate(RedisBackendScripts.listMembers, keys: [keys.memberOrder, keys.memberData],
                             arguments: [.integer(Int64(max(0, limit)))]) { result in
                switch result {
                case .failure(let error):
                    completion(.failure(RedisRouting.error(error, "listing the members of \(room)")))
                case .success(let reply):
                    guard let parts = reply.array, let total = parts.first?.int else {
                        return completion(.failure(RedisRouting.unexpected(reply, "listing the members of \(room)")))
                    }
                    let members = parts.dropFirst().compactMap { $0.bytes.flatMap(RedisRecords.member(bytes:)) }
                    completion(.success((members, Int(total))))
                }
            }
        }
    }

    public func rooms(in channel: String, after cursor: String?, limit: Int,
                      completion: @escaping @Sendable (Result<[String], ParleyError>) -> Void) {
        guard limit > 0 else { return completion(.success([])) }
        let start: RedisArgument = cursor.map { .string("(" + $0) } ?? "-"
        let command = RedisCommand(["ZRANGEBYLEX", .string(keyspace.occupiedRooms(channel)), start, "+", "LIMIT", "0",
                                    .integer(Int64(limit))], keyIndex: 1)
        routing.onLoop(for: RoomKey(channel: channel, room: "")) { [routing] in
            routing.send(command) { result in
                switch result {
                case .failure(let error):
                    completion(.failure(RedisRouting.error(error, "listing the rooms of \(channel)")))
                case .success(let reply):
                    completion(.success((reply.array ?? []).compactMap(\.string)))
                }
            }
        }
    }

    // MARK: after an outage

    /// Runs `body` once this node's members are all in presence: now, or after the new
    /// incarnation that follows trouble with Redis has re-added them.
    public func afterMembersRestored(_ body: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.closed || (!state.dirty && !state.reasserting) || state.afterRestore.count >= 100_000 { return true }
            state.afterRestore.append(body)
            return false
        }
        if now { body() }
    }

    /// Re-adds one member under the current incarnation (it was added under an older one).
    private func restore(_ member: Member, in room: RoomKey) {
        onRoomLoop(room) { [self] in
            let incarnation = state.withLock { $0.incarnation }
            routing.send(RedisCommand("SADD", .string(keyspace.nodeRooms(incarnation)), .string(RedisKeyspace.roomName(room)))) { _ in }
            writeMember(member, in: room, incarnation: incarnation, announce: true) { [self] result in
                if case .failure = result { markDirty() }
            }
        }
    }

    // MARK: the lease

    /// Loop 0, every renew interval: renews the lease, or after trouble starts a new incarnation.
    private func renewTick() {
        let (incarnation, dirty, busy) = state.withLock { ($0.incarnation, $0.dirty, $0.reasserting || $0.closed) }
        guard !busy else { return }
        if dirty {
            reassert()
            return
        }
        renew(incarnation) { [self] result in
            switch result {
            case .failure:
                state.withLock { state in
                    state.healthySince = nil
                    state.dirty = true
                }
            case .success(let lapsed):
                let restart = state.withLock { state -> Bool in
                    if state.healthySince == nil { state.healthySince = monotonicMillis() }
                    let first = !state.registered
                    state.registered = true
                    // A lapsed lease means a reaper may have removed this node's members.
                    if lapsed && !first && state.incarnation == incarnation { state.dirty = true }
                    return state.dirty
                }
                if restart { reassert() }
            }
        }
    }

    /// Renews `incarnation`'s lease; completes with whether it had lapsed.
    private func renew(_ incarnation: String, completion: @escaping @Sendable (Result<Bool, RedisError>) -> Void) {
        routing.evaluate(RedisBackendScripts.renewLease, keys: [keyspace.nodes],
                         arguments: [.string(incarnation), .integer(Int64(options.leaseMillis))]) { result in
            switch result {
            case .failure(let error): completion(.failure(error))
            case .success(let reply):
                guard let parts = reply.array, parts.count == 2, let lapsed = parts[1].int else {
                    return completion(.failure(RedisError(.unexpectedReply, "the lease script answered \(reply)")))
                }
                completion(.success(lapsed == 1))
            }
        }
    }

    /// A new incarnation: its lease, then every member this node holds moved to it (joins are
    /// announced only for members no longer in presence), then the old incarnation reaped
    /// here (announcing the leaves of members that left while Redis was away).
    private func reassert() {
        let fresh = Self.incarnation(of: options.nodeID)
        let proceed = state.withLock { state -> Bool in
            guard !state.reasserting, !state.closed else { return false }
            state.reasserting = true
            return true
        }
        guard proceed else { return }
        renew(fresh) { [self] result in
            if case .failure = result {
                state.withLock { state in
                    state.reasserting = false
                    state.healthySince = nil
                }
                return
            }
            let (old, snapshot) = state.withLock { state -> (String, [RoomKey: [String: Member]]) in
                let old = state.incarnation
                state.incarnation = fresh
                state.dirty = false
                state.registered = true
                state.reconnects += 1
                if state.healthySince == nil { state.healthySince = monotonicMillis() }
                return (old, state.local)
            }
            let remaining = Atomic<Int>(snapshot.count + 1)
            let failed = Atomic<Bool>(false)
            let finish: @Sendable () -> Void = { [self] in
                guard remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
                let waiters = state.withLock { state -> [@Sendable () -> Void] in
                    state.reasserting = false
                    if failed.load(ordering: .acquiring) { state.dirty = true }
                    guard !state.dirty else { return [] }
                    defer { state.afterRestore = [] }
                    return state.afterRestore
                }
                for waiter in waiters { waiter() }
                // What is still under the old incarnation left while Redis was away.
                reapNode(old, own: true) { _ in }
            }
            for (room, members) in snapshot {
                onRoomLoop(room) { [self] in
                    routing.send(RedisCommand("SADD", .string(keyspace.nodeRooms(fresh)), .string(RedisKeyspace.roomName(room)))) { result in
                        if case .failure = result { failed.store(true, ordering: .releasing) }
                    }
                    let count = Atomic<Int>(members.count)
                    for member in members.values {
                        writeMember(member, in: room, incarnation: fresh, announce: true) { [self] result in
                            if case .failure = result { failed.store(true, ordering: .releasing) }
                            // Gone meanwhile: its remove may have run before this add.
                            let gone = state.withLock { $0.local[room]?[member.id] == nil }
                            if gone, case .success = result {
                                deleteMember(member.id, from: room, announce: true) { _ in }
                            }
                            if count.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { finish() }
                        }
                    }
                    if members.isEmpty { finish() }
                }
            }
            finish()
        }
    }

    // MARK: the reaper

    /// Loop 0, every reap interval: reaps the incarnations whose lease expired, once this
    /// node has been healthy for a whole lease (see the type's comment).
    private func reapTick() {
        let (allowed, current) = state.withLock { state -> (Bool, String) in
            guard !state.closed, !state.reaping, !state.dirty, let since = state.healthySince,
                  monotonicMillis() >= since + UInt64(options.leaseMillis) else { return (false, state.incarnation) }
            state.reaping = true
            return (true, state.incarnation)
        }
        guard allowed else { return }
        let done: @Sendable (Bool) -> Void = { [self] looked in
            state.withLock { state in
                state.reaping = false
                if looked { state.reapPasses += 1 }
            }
        }
        routing.evaluate(RedisBackendScripts.expiredLeases, keys: [keyspace.nodes], arguments: [64]) { [self] result in
            guard case .success(let reply) = result else { return done(false) }
            let expired = (reply.array ?? []).compactMap(\.string).filter { $0 != current }
            @Sendable func next(_ index: Int) {
                guard index < expired.count else { return done(true) }
                reapNode(expired[index], own: false) { _ in next(index + 1) }
            }
            next(0)
        }
    }

    /// Removes every member of `node` (an incarnation) from every room it held, announcing
    /// each leave, then forgets the incarnation.
    func reapNode(_ node: String, own: Bool, completion: @escaping @Sendable (Bool) -> Void) {
        let roomsKey = keyspace.nodeRooms(node), page = max(1, options.reapRoomPage)
        @Sendable func scan(_ cursor: String) {
            routing.send(RedisCommand(["SSCAN", .string(roomsKey), .string(cursor), "COUNT", .integer(Int64(page))], keyIndex: 1)) { [self] result in
                guard case .success(let reply) = result, let parts = reply.array, parts.count == 2,
                      let next = parts[0].string, let names = parts[1].array else { return completion(false) }
                let rooms = names.compactMap { $0.string.flatMap(RedisKeyspace.room(named:)) }
                let remaining = Atomic<Int>(rooms.count + 1)
                let ok = Atomic<Bool>(true)
                let roomDone: @Sendable (Bool) -> Void = { [self] success in
                    if !success { ok.store(false, ordering: .releasing) }
                    guard remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
                    guard ok.load(ordering: .acquiring) else { return completion(false) }
                    if next != "0" { return scan(next) }
                    // Every room is done: the incarnation is gone.
                    routing.send(RedisCommand("DEL", .string(roomsKey))) { [self] _ in
                        routing.send(RedisCommand("ZREM", .string(keyspace.nodes), .string(node))) { _ in completion(true) }
                    }
                }
                for room in rooms {
                    onRoomLoop(room) { [self] in
                        reapRoom(room, node: node) { [self] success in
                            guard success else { return roomDone(false) }
                            routing.send(RedisCommand("SREM", .string(roomsKey), .string(RedisKeyspace.roomName(room)))) { _ in roomDone(true) }
                        }
                    }
                }
                roomDone(true)
            }
        }
        scan("0")
    }

    /// Removes `node`'s members from `room` a batch at a time. Room loop only.
    private func reapRoom(_ room: RoomKey, node: String, completion: @escaping @Sendable (Bool) -> Void) {
        let keys = keyspace.room(room)
        routing.evaluate(RedisBackendScripts.reapMembers, keys: [keys.memberOrder, keys.memberData],
                         arguments: [.string(node), .string(keys.nodeMembersPrefix), .string(keys.channel),
                                     .integer(Int64(max(1, options.reapBatch)))]) { [self] result in
            guard case .success(let reply) = result, let parts = reply.array, parts.count == 3,
                  let left = parts[1].int, let total = parts[2].int else { return completion(false) }
            if left > 0 { return reapRoom(room, node: node, completion: completion) }
            if total == 0 { roomEmptied(room) }
            completion(true)
        }
    }

    // MARK: closing

    /// Leaves gracefully: stops the lease and the reaper, removes (and announces) whatever
    /// members this node still holds, and drops its lease. Completes with false when Redis
    /// could not be reached (the lease then expires and other nodes reap them).
    public func close(completion: @escaping @Sendable (Bool) -> Void) {
        let (incarnation, wasClosed) = state.withLock { state -> (String, Bool) in
            let was = state.closed
            state.closed = true
            return (state.incarnation, was)
        }
        guard !wasClosed else { return completion(true) }
        timers.run { timers in
            timers.renew?.stop()
            timers.reap?.stop()
            timers.renew = nil
            timers.reap = nil
        }
        let waiters = state.withLock { state -> [@Sendable () -> Void] in
            defer { state.afterRestore = [] }
            return state.afterRestore
        }
        for waiter in waiters { waiter() }
        routing.loops[0].executeNowOrSoon { [self] in reapNode(incarnation, own: true, completion: completion) }
    }
}

/// The presence store's timers, on loop 0.
final class PresenceTimers {
    var renew: LoopTimer?
    var reap: LoopTimer?
}
