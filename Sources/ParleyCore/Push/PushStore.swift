import Synchronization

/// One user's pending notification for one room: the messages that came since it was queued
/// (coalesced), due at a time (docs/push.md).
public struct PushJob: Sendable, Equatable {
    /// Given by the store.
    public var id: Int64
    public let channel: String
    public let user: String
    public let room: String
    /// Messages it stands for.
    public var count: Int
    /// The newest of them.
    public var lastOffset: Int64
    public var dueMillis: Int64
    public var attempts: Int
    /// Set on a job ``PushStore/due(nowMillis:limit:)`` handed out: when its lease ends. It
    /// names this taker's hold on the job (``PushStore/renew(_:nowMillis:)``).
    public var leasedUntilMillis: Int64? = nil

    /// How long a job ``PushStore/due(nowMillis:limit:)`` handed out is hidden from every
    /// other taker (another node's worker): it is sent, or due again after this.
    public static let leaseMillis: Int64 = 30_000

    public init(id: Int64 = 0, channel: String, user: String, room: String, count: Int, lastOffset: Int64, dueMillis: Int64, attempts: Int = 0) {
        self.id = id
        self.channel = channel
        self.user = user
        self.room = room
        self.count = count
        self.lastOffset = lastOffset
        self.dueMillis = dueMillis
        self.attempts = attempts
    }
}

/// Devices, mutes and the push queue (docs/push.md): SQLite on one node (`push.sqlite3`),
/// memory in tests. Blocking: called on the push worker's thread only.
///
/// Contract (Tests/ContractTests/PushStoreContractTests.swift):
/// - a device is one per platform and token: registering it again replaces it (for whichever
///   user); a user keeps at most ``PushDevice/maxPerUser`` per channel, the oldest goes; the
///   store keeps at most its `maxDevices` in all, the one registered longest ago goes (never
///   the one being registered);
/// - a mute per user, channel and room (nil: every room) holds until its time; a time not
///   after `nowMillis` lifts it (the mute is removed), and setting one removes the user's
///   mutes that ended; a user holds at most ``PushMute/maxPerUser`` per channel, and a mute
///   of one more room is refused (`limitReached`);
/// - ``enqueue(_:maxQueued:)`` adds to the job of the same user and room (count added, the
///   newest offset kept, its due time left as it is: a pending job's is the earlier, a taken
///   one's is its lease), else queues a new one unless `maxQueued` wait (false then);
/// - ``complete(_:)`` removes a job that was sent, unless messages came meanwhile (its offset
///   passed the sent one's): then those stay queued, due at once;
/// - ``due(nowMillis:limit:)`` takes the jobs due, earliest first: each is hidden for
///   ``PushJob/leaseMillis`` (so two nodes never send one push), and stays queued until
///   ``complete(_:)`` (so a restart or a crash loses none: it is due again after the lease);
/// - ``renew(_:nowMillis:)`` gives a taken job another lease from `nowMillis` while it is
///   still as ``due(nowMillis:limit:)`` left it for that taker (its lease not taken by
///   another after it ran out, nor rescheduled, nor completed): the job with its new lease;
///   nil otherwise, and the job is not to be sent (another taker has it, or nobody needs it).
public protocol PushStore: AnyObject, Sendable {
    func register(_ device: PushDevice) throws(ParleyError)
    func unregister(platform: PushDevice.Platform, token: String) throws(ParleyError) -> Bool
    func devices(of user: String, in channel: String) throws(ParleyError) -> [PushDevice]
    /// Which of `users` have a device in `channel`.
    func usersWithDevices(_ users: [String], in channel: String) throws(ParleyError) -> Set<String>
    func setMute(_ mute: PushMute, user: String, channel: String, nowMillis: Int64) throws(ParleyError)
    func mutes(of user: String, in channel: String, nowMillis: Int64) throws(ParleyError) -> [PushMute]
    func enqueue(_ job: PushJob, maxQueued: Int) throws(ParleyError) -> Bool
    func due(nowMillis: Int64, limit: Int) throws(ParleyError) -> [PushJob]
    func renew(_ taken: PushJob, nowMillis: Int64) throws(ParleyError) -> PushJob?
    func complete(_ sent: PushJob) throws(ParleyError)
    func reschedule(_ id: Int64, dueMillis: Int64, attempts: Int) throws(ParleyError)
    func queued() throws(ParleyError) -> Int
}

/// The push store in memory: tests, and a server without a data directory.
public final class InMemoryPushStore: PushStore {
    public let maxDevices: Int
    private struct State {
        var devices: [PushDevice] = []
        var mutes: [String: PushMute] = [:]  // channel \0 user \0 room
        var jobs: [Int64: PushJob] = [:]
        var nextID: Int64 = 1
    }
    private let state = Mutex(State())

    public init(maxDevices: Int = PushDevice.maxStored) { self.maxDevices = max(1, maxDevices) }

    public func register(_ device: PushDevice) {
        state.withLock { state in
            state.devices.removeAll { $0.platform == device.platform && $0.token == device.token }
            state.devices.append(device)
            let mine = state.devices.filter { $0.channel == device.channel && $0.user == device.user }
            if mine.count > PushDevice.maxPerUser, let oldest = mine.min(by: { $0.registeredMillis < $1.registeredMillis }) {
                state.devices.removeAll { $0 == oldest }
            }
            while state.devices.count > maxDevices,
                  let oldest = state.devices.filter({ $0 != device })
                      .min(by: { ($0.registeredMillis, $0.platform.rawValue, $0.token) < ($1.registeredMillis, $1.platform.rawValue, $1.token) }) {
                state.devices.removeAll { $0 == oldest }
            }
        }
    }

    public func unregister(platform: PushDevice.Platform, token: String) -> Bool {
        state.withLock { state in
            let before = state.devices.count
            state.devices.removeAll { $0.platform == platform && $0.token == token }
            return state.devices.count != before
        }
    }

    public func devices(of user: String, in channel: String) -> [PushDevice] {
        state.withLock { $0.devices.filter { $0.channel == channel && $0.user == user } }
    }

    public func usersWithDevices(_ users: [String], in channel: String) -> Set<String> {
        let wanted = Set(users)
        return state.withLock { Set($0.devices.filter { $0.channel == channel && wanted.contains($0.user) }.map(\.user)) }
    }

    private static func key(_ channel: String, _ user: String, _ room: String?) -> String { channel + "\0" + user + "\0" + (room ?? "") }

    public func setMute(_ mute: PushMute, user: String, channel: String, nowMillis: Int64) throws(ParleyError) {
        let prefix = channel + "\0" + user + "\0", key = Self.key(channel, user, mute.room)
        try state.withLock { state throws(ParleyError) in
            // One walk: the user's ended mutes go, the running ones are counted.
            var running = 0
            for (other, held) in state.mutes where other.hasPrefix(prefix) {
                if held.untilMillis <= nowMillis { state.mutes[other] = nil } else { running += 1 }
            }
            guard mute.untilMillis > nowMillis else { state.mutes[key] = nil; return }
            if state.mutes[key] == nil, running >= PushMute.maxPerUser {
                throw PushMute.tooMany
            }
            state.mutes[key] = mute
        }
    }

    public func mutes(of user: String, in channel: String, nowMillis: Int64) -> [PushMute] {
        let prefix = channel + "\0" + user + "\0"
        return state.withLock { state in
            state.mutes.filter { $0.key.hasPrefix(prefix) && $0.value.untilMillis > nowMillis }.map(\.value)
                .sorted { ($0.room ?? "") < ($1.room ?? "") }
        }
    }

    public func enqueue(_ job: PushJob, maxQueued: Int) -> Bool {
        state.withLock { state in
            if let id = state.jobs.values.first(where: { $0.channel == job.channel && $0.user == job.user && $0.room == job.room })?.id {
                state.jobs[id]!.count += job.count
                state.jobs[id]!.lastOffset = max(state.jobs[id]!.lastOffset, job.lastOffset)
                return true
            }
            guard state.jobs.count < maxQueued else { return false }
            var job = job
            job.id = state.nextID
            state.nextID += 1
            state.jobs[job.id] = job
            return true
        }
    }

    public func due(nowMillis: Int64, limit: Int) -> [PushJob] {
        state.withLock { state in
            let due = Array(state.jobs.values.filter { $0.dueMillis <= nowMillis }
                .sorted { $0.dueMillis != $1.dueMillis ? $0.dueMillis < $1.dueMillis : $0.id < $1.id }.prefix(limit))
            for job in due { state.jobs[job.id]?.dueMillis = nowMillis + PushJob.leaseMillis }
            return due.map { job in
                var taken = job
                taken.leasedUntilMillis = nowMillis + PushJob.leaseMillis
                return taken
            }
        }
    }

    public func renew(_ taken: PushJob, nowMillis: Int64) -> PushJob? {
        state.withLock { state in
            guard let lease = taken.leasedUntilMillis, state.jobs[taken.id]?.dueMillis == lease else { return nil }
            state.jobs[taken.id]!.dueMillis = nowMillis + PushJob.leaseMillis
            var renewed = taken
            renewed.leasedUntilMillis = nowMillis + PushJob.leaseMillis
            return renewed
        }
    }

    public func complete(_ sent: PushJob) {
        state.withLock { state in
            guard let job = state.jobs[sent.id] else { return }
            if job.lastOffset > sent.lastOffset {
                state.jobs[sent.id]!.count = max(1, job.count - sent.count)
                state.jobs[sent.id]!.dueMillis = 0
                state.jobs[sent.id]!.attempts = 0
            } else {
                state.jobs[sent.id] = nil
            }
        }
    }

    public func reschedule(_ id: Int64, dueMillis: Int64, attempts: Int) {
        state.withLock { state in
            state.jobs[id]?.dueMillis = dueMillis
            state.jobs[id]?.attempts = attempts
        }
    }

    public func queued() -> Int { state.withLock { $0.jobs.count } }
}
