import Dispatch
import ParleyCore
import Synchronization

/// Devices, mutes and the push queue of a cluster (``PushStore``), in Redis, one set for every
/// node. Blocking like every push store: called on the push worker's thread only.
///
/// | key | type | holds |
/// | --- | --- | --- |
/// | `P:push:{c/u}:d` | hash | a user's devices: `platform token` → device JSON |
/// | `P:push:{c/u}:m` | hash | a user's mutes: room (`""`: every room) → until (ms) |
/// | `P:{push}:t` | hash | `platform token` → `c/u` (who has a token) |
/// | `P:{push}:j` | hash | job id → job JSON |
/// | `P:{push}:k` | hash | `c/u/room` → job id (the pending job, for coalescing) |
/// | `P:{push}:q` | sorted set | job id → due (ms) |
/// | `P:{push}:n` | string | the last job id |
/// | `P:{push}:r` | sorted set | `platform token` → when registered (the store's bound) |
///
/// The queue's keys share the tag `{push}`: each change is one script on one slot. A node takes
/// due jobs by moving them a lease ahead (``PushJob/leaseMillis``) in the same script, so two nodes
/// never send the same push; a node that dies with jobs taken leaves them due again after the
/// lease.
public final class RedisPushStore: PushStore {
    private let redis: any RedisCommandExecutor
    private let prefix: String
    private let queue: [RedisArgument]
    /// Every device by the time it was registered (for the store's bound).
    private let registered: RedisArgument
    private let timeoutMillis: Int
    public let maxDevices: Int

    public init(redis: any RedisCommandExecutor, keyspace: RedisKeyspace, maxDevices: Int = PushDevice.maxStored, timeoutMillis: Int = 2_000) {
        self.redis = redis
        prefix = keyspace.prefix
        let base = "\(keyspace.prefix):{push}:"
        queue = [.string(base + "t"), .string(base + "j"), .string(base + "k"), .string(base + "q"), .string(base + "n")]
        registered = .string(base + "r")
        self.timeoutMillis = timeoutMillis
        self.maxDevices = max(1, maxDevices)
    }

    private func userKey(_ channel: String, _ user: String, _ suffix: String) -> String {
        "\(prefix):push:{\(RedisKeyspace.encode(channel, slash: true))/\(user)}:\(suffix)"
    }

    private func call(_ what: String, _ start: (@escaping @Sendable (Result<RedisValue, RedisError>) -> Void) -> Void) throws(ParleyError) -> RedisValue {
        let box = Mutex<Result<RedisValue, RedisError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        start { result in
            box.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + .milliseconds(timeoutMillis + 200)) == .success, let result = box.withLock({ $0 }) else {
            throw ParleyError(.unavailable, "Redis did not answer \(what) within \(timeoutMillis) ms")
        }
        switch result {
        case .success(let value): return value
        case .failure(let error): throw RedisRouting.error(error, what)
        }
    }

    private func command(_ what: String, _ arguments: [RedisArgument]) throws(ParleyError) -> RedisValue {
        try call(what) { redis.send(RedisCommand(arguments, timeoutMillis: timeoutMillis), completion: $0) }
    }

    private func script(_ what: String, _ script: RedisScript, _ arguments: [RedisArgument]) throws(ParleyError) -> RedisValue {
        try call(what) { redis.evaluate(script, keys: queue, arguments: arguments, timeoutMillis: timeoutMillis, completion: $0) }
    }

    // MARK: devices

    static func record(_ device: PushDevice) -> String {
        var object: JSONObject = ["p": .string(device.platform.rawValue), "t": .string(device.token), "r": .number(JSONNumber(Int(device.registeredMillis)))]
        if let topic = device.topic { object.append(key: "o", value: .string(topic)) }
        if device.sandbox { object.append(key: "s", value: true) }
        if let p256dh = device.p256dh { object.append(key: "k", value: .string(Base64URL.encode(p256dh))) }
        if let auth = device.auth { object.append(key: "a", value: .string(Base64URL.encode(auth))) }
        return JSONValue.object(object).jsonString
    }

    static func device(_ text: String, channel: String, user: String) -> PushDevice? {
        guard let value = try? JSONParser.parse(text), let platform = value["p"]?.stringValue.flatMap(PushDevice.Platform.init(rawValue:)),
              let token = value["t"]?.stringValue else { return nil }
        return PushDevice(channel: channel, user: user, platform: platform, token: token, topic: value["o"]?.stringValue,
                          sandbox: value["s"]?.boolValue ?? false, p256dh: value["k"]?.stringValue.flatMap { Base64URL.decode($0) },
                          auth: value["a"]?.stringValue.flatMap { Base64URL.decode($0) },
                          registeredMillis: Int64(value["r"]?.intValue ?? 0))
    }

    /// KEYS: owners (`t`), registrations (`r`). ARGV: `platform token`, its owner, time.
    /// Records both at once (so the count and the owners never part); returns the previous
    /// owner, or false.
    static let claimScript = RedisScript("""
        local previous = redis.call('HGET', KEYS[1], ARGV[1])
        redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
        redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
        return previous
        """)

    /// KEYS: owners (`t`), registrations (`r`). ARGV: `platform token`, and a time (`""`:
    /// any). Forgets the device in both at once, unless it was registered after that time
    /// (registered again meanwhile: kept); returns its owner, or false.
    static let releaseScript = RedisScript("""
        if ARGV[2] ~= '' then
            local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
            if score and tonumber(score) > tonumber(ARGV[2]) then return false end
        end
        local owner = redis.call('HGET', KEYS[1], ARGV[1])
        redis.call('HDEL', KEYS[1], ARGV[1])
        redis.call('ZREM', KEYS[2], ARGV[1])
        return owner
        """)

    private func ownerKey(_ owner: String) -> String? {
        guard let slash = owner.firstIndex(of: "/") else { return nil }
        return userKey(RedisKeyspace.decode(owner[..<slash]), String(owner[owner.index(after: slash)...]), "d")
    }

    private func script(_ what: String, _ script: RedisScript, keys: [RedisArgument], _ arguments: [RedisArgument]) throws(ParleyError) -> RedisValue {
        try call(what) { redis.evaluate(script, keys: keys, arguments: arguments, timeoutMillis: timeoutMillis, completion: $0) }
    }

    public func register(_ device: PushDevice) throws(ParleyError) {
        let field = device.platform.rawValue + " " + device.token
        let me = RedisKeyspace.encode(device.channel, slash: true) + "/" + device.user
        let previous = try script("registering a device", Self.claimScript, keys: [queue[0], registered],
                                  [.string(field), .string(me), .integer(device.registeredMillis)])
        // A token registered by another user moves: take it from them.
        if let owner = previous.string, owner != me, let key = ownerKey(owner) {
            _ = try command("moving a device", [.string("HDEL"), .string(key), .string(field)])
        }
        _ = try command("registering a device", [.string("HSET"), .string(userKey(device.channel, device.user, "d")), .string(field),
                                                 .string(Self.record(device))])
        let all = try devices(of: device.user, in: device.channel)
        if all.count > PushDevice.maxPerUser {
            for old in all.sorted(by: { $0.registeredMillis != $1.registeredMillis ? $0.registeredMillis > $1.registeredMillis : $0.token > $1.token })
                .dropFirst(PushDevice.maxPerUser) {
                _ = try unregister(platform: old.platform, token: old.token)
            }
        }
        // The store's bound: the devices registered longest ago go, a hundred at most; one
        // registered again since it was picked (on another node, say) stays.
        let held = Int(try command("counting devices", [.string("ZCARD"), registered]).int ?? 0)
        let excess = min(held - maxDevices, 100)
        guard excess > 0 else { return }
        let oldest = try command("listing old devices", [.string("ZRANGE"), registered, .integer(0), .integer(Int64(excess)), .string("WITHSCORES")])
        var flat: [String] = []
        for item in oldest.array ?? [] {
            if let pair = item.array { flat += pair.compactMap(\.string) } else if let text = item.string { flat.append(text) }
        }
        var dropped = 0
        for index in stride(from: 0, to: flat.count - 1, by: 2) where flat[index] != field && dropped < excess {
            dropped += 1
            let owner = try script("removing a device", Self.releaseScript, keys: [queue[0], registered], [.string(flat[index]), .string(flat[index + 1])])
            if let owner = owner.string, let key = ownerKey(owner) {
                _ = try command("removing a device", [.string("HDEL"), .string(key), .string(flat[index])])
            }
        }
    }

    public func unregister(platform: PushDevice.Platform, token: String) throws(ParleyError) -> Bool {
        let field = platform.rawValue + " " + token
        let owner = try script("removing a device", Self.releaseScript, keys: [queue[0], registered], [.string(field), .string("")])
        guard let owner = owner.string, let key = ownerKey(owner) else { return false }
        _ = try command("removing a device", [.string("HDEL"), .string(key), .string(field)])
        return true
    }

    public func devices(of user: String, in channel: String) throws(ParleyError) -> [PushDevice] {
        let reply = try command("listing devices", [.string("HGETALL"), .string(userKey(channel, user, "d"))])
        var values: [String] = []
        if let pairs = reply.pairs { values = pairs.compactMap(\.value.string) } else if let flat = reply.array {
            values = stride(from: 1, to: flat.count, by: 2).compactMap { flat[$0].string }
        }
        return values.compactMap { Self.device($0, channel: channel, user: user) }
            .sorted { $0.registeredMillis != $1.registeredMillis ? $0.registeredMillis < $1.registeredMillis : $0.token < $1.token }
    }

    public func usersWithDevices(_ users: [String], in channel: String) throws(ParleyError) -> Set<String> {
        var found = Set<String>()
        for user in Set(users) where (try command("counting devices", [.string("HLEN"), .string(userKey(channel, user, "d"))]).int ?? 0) > 0 {
            found.insert(user)
        }
        return found
    }

    // MARK: mutes

    /// KEYS: the user's mutes. ARGV: room (`""`: every room), until, now, most per user.
    /// Removes the mutes that ended (and this one when its time is not after now); 1 done,
    /// 0 refused (one more room than the bound).
    static let muteScript = RedisScript("""
        local now, live, held = tonumber(ARGV[3]), 0, false
        local all = redis.call('HGETALL', KEYS[1])
        for i = 1, #all, 2 do
            if tonumber(all[i + 1]) <= now then
                redis.call('HDEL', KEYS[1], all[i])
            else
                live = live + 1
                if all[i] == ARGV[1] then held = true end
            end
        end
        if tonumber(ARGV[2]) <= now then
            redis.call('HDEL', KEYS[1], ARGV[1])
            return 1
        end
        if not held and live >= tonumber(ARGV[4]) then return 0 end
        redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
        return 1
        """)

    public func setMute(_ mute: PushMute, user: String, channel: String, nowMillis: Int64) throws(ParleyError) {
        let key = userKey(channel, user, "m")
        let done = try script("setting a mute", Self.muteScript, keys: [.string(key)], [
            .string(mute.room ?? ""), .integer(mute.untilMillis), .integer(nowMillis), .integer(Int64(PushMute.maxPerUser)),
        ])
        if done.int == 0 { throw PushMute.tooMany }
    }

    public func mutes(of user: String, in channel: String, nowMillis: Int64) throws(ParleyError) -> [PushMute] {
        let reply = try command("listing mutes", [.string("HGETALL"), .string(userKey(channel, user, "m"))])
        var pairs: [(String, Int64)] = []
        if let list = reply.pairs {
            pairs = list.compactMap { pair in pair.key.string.flatMap { room in pair.value.int.map { (room, $0) } } }
        } else if let flat = reply.array {
            pairs = stride(from: 0, to: flat.count - 1, by: 2).compactMap { i in flat[i].string.flatMap { room in flat[i + 1].int.map { (room, $0) } } }
        }
        return pairs.filter { $0.1 > nowMillis }.map { PushMute(room: $0.0.isEmpty ? nil : $0.0, untilMillis: $0.1) }
            .sorted { ($0.room ?? "") < ($1.room ?? "") }
    }

    // MARK: the queue

    /// ARGV: pending key, job JSON (without id), count, last offset, due, max queued. 1 queued, 0 full.
    static let enqueueScript = RedisScript("""
        local id = redis.call('HGET', KEYS[3], ARGV[1])
        if id then
            local job = cjson.decode(redis.call('HGET', KEYS[2], id))
            job.c = job.c + tonumber(ARGV[3])
            if tonumber(ARGV[4]) > job.o then job.o = tonumber(ARGV[4]) end
            redis.call('HSET', KEYS[2], id, cjson.encode(job))
            return 1
        end
        if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[6]) then return 0 end
        id = redis.call('INCR', KEYS[5])
        redis.call('HSET', KEYS[2], id, ARGV[2])
        redis.call('HSET', KEYS[3], ARGV[1], id)
        redis.call('ZADD', KEYS[4], ARGV[5], id)
        return 1
        """)

    /// ARGV: now, limit, lease. Takes the due jobs (moving them a lease ahead); returns
    /// {id, job JSON, due, …}.
    static let takeScript = RedisScript("""
        local ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
        local out = {}
        for i = 1, #ids, 2 do
            local job = redis.call('HGET', KEYS[2], ids[i])
            if job then
                redis.call('ZADD', KEYS[4], tonumber(ARGV[1]) + tonumber(ARGV[3]), ids[i])
                out[#out + 1] = ids[i]
                out[#out + 1] = job
                out[#out + 1] = ids[i + 1]
            else
                redis.call('ZREM', KEYS[4], ids[i])
            end
        end
        return out
        """)

    /// ARGV: id, the lease the taker holds, the new lease. Moves the job to the new lease if it
    /// is still at the held one; 1 then, else 0.
    static let renewScript = RedisScript("""
        if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then return 0 end
        local score = redis.call('ZSCORE', KEYS[4], ARGV[1])
        if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
        redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
        return 1
        """)

    /// ARGV: id, the sent job's last offset and count. Removes the job and its pending entry,
    /// unless messages came meanwhile: those stay, due at once.
    static let completeScript = RedisScript("""
        local job = redis.call('HGET', KEYS[2], ARGV[1])
        if not job then
            redis.call('ZREM', KEYS[4], ARGV[1])
            return 0
        end
        local decoded = cjson.decode(job)
        if decoded.o > tonumber(ARGV[2]) then
            decoded.c = math.max(1, decoded.c - tonumber(ARGV[3]))
            decoded.a = 0
            redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(decoded))
            redis.call('ZADD', KEYS[4], 0, ARGV[1])
            return 2
        end
        local key = decoded.ch .. '/' .. decoded.u .. '/' .. decoded.r
        if redis.call('HGET', KEYS[3], key) == ARGV[1] then redis.call('HDEL', KEYS[3], key) end
        redis.call('HDEL', KEYS[2], ARGV[1])
        redis.call('ZREM', KEYS[4], ARGV[1])
        return 1
        """)

    /// ARGV: id, due, attempts.
    static let rescheduleScript = RedisScript("""
        local job = redis.call('HGET', KEYS[2], ARGV[1])
        if not job then return 0 end
        local decoded = cjson.decode(job)
        decoded.a = tonumber(ARGV[3])
        redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(decoded))
        redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
        return 1
        """)

    private static func pendingKey(_ job: PushJob) -> String { job.channel + "/" + job.user + "/" + job.room }

    public func enqueue(_ job: PushJob, maxQueued: Int) throws(ParleyError) -> Bool {
        let record = JSONValue.object(["ch": .string(job.channel), "u": .string(job.user), "r": .string(job.room),
                                       "c": .number(JSONNumber(job.count)), "o": .number(JSONNumber(Int(job.lastOffset))), "a": 0]).jsonString
        return try script("queueing a push", Self.enqueueScript, [
            .string(Self.pendingKey(job)), .string(record), .integer(Int64(job.count)), .integer(job.lastOffset), .integer(job.dueMillis),
            .integer(Int64(maxQueued)),
        ]).int == 1
    }

    public func due(nowMillis: Int64, limit: Int) throws(ParleyError) -> [PushJob] {
        let reply = try script("taking due pushes", Self.takeScript, [.integer(nowMillis), .integer(Int64(limit)), .integer(PushJob.leaseMillis)])
        let flat = reply.array ?? []
        var jobs: [PushJob] = []
        var index = 0
        while index + 2 < flat.count {
            defer { index += 3 }
            guard let id = flat[index].string.flatMap({ Int64($0) }), let text = flat[index + 1].string,
                  let value = try? JSONParser.parse(text), let channel = value["ch"]?.stringValue, let user = value["u"]?.stringValue,
                  let room = value["r"]?.stringValue else { continue }
            let due = flat[index + 2].string.flatMap { Double($0) }.map { Int64($0) } ?? nowMillis
            var job = PushJob(id: id, channel: channel, user: user, room: room, count: value["c"]?.intValue ?? 1,
                              lastOffset: Int64(value["o"]?.intValue ?? 0), dueMillis: due, attempts: value["a"]?.intValue ?? 0)
            job.leasedUntilMillis = nowMillis + PushJob.leaseMillis
            jobs.append(job)
        }
        return jobs
    }

    public func renew(_ taken: PushJob, nowMillis: Int64) throws(ParleyError) -> PushJob? {
        guard let lease = taken.leasedUntilMillis else { return nil }
        let renewedUntil = nowMillis + PushJob.leaseMillis
        guard try script("renewing a push's lease", Self.renewScript, [.integer(taken.id), .integer(lease), .integer(renewedUntil)]).int == 1
        else { return nil }
        var renewed = taken
        renewed.leasedUntilMillis = renewedUntil
        return renewed
    }

    public func complete(_ sent: PushJob) throws(ParleyError) {
        _ = try script("completing a push", Self.completeScript, [.integer(sent.id), .integer(sent.lastOffset), .integer(Int64(sent.count))])
    }

    public func reschedule(_ id: Int64, dueMillis: Int64, attempts: Int) throws(ParleyError) {
        _ = try script("rescheduling a push", Self.rescheduleScript, [.integer(id), .integer(dueMillis), .integer(Int64(attempts))])
    }

    public func queued() throws(ParleyError) -> Int {
        Int(try command("counting pushes", [.string("HLEN"), queue[1]]).int ?? 0)
    }
}
