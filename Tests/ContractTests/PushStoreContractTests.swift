import Foundation
import Testing
import ParleyCore
import ParleyRedis
import ParleySQLite

/// Every push store, run through one contract (``PushStore``).
enum PushStoreKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case memory, sqlite, redis, redisCluster
    var description: String { rawValue }

    func make(path: String? = nil, keyspace: RedisKeyspace? = nil, maxDevices: Int = PushDevice.maxStored) throws -> any PushStore {
        switch self {
        case .memory: return InMemoryPushStore(maxDevices: maxDevices)
        case .sqlite:
            return try SQLitePushStore(path: path ?? NSTemporaryDirectory() + "parley-push-\(UUID().uuidString).sqlite3", maxDevices: maxDevices)
        case .redis, .redisCluster:
            let deployment = try RedisDeployment.shared(self == .redis ? .single : .cluster)
            return RedisPushStore(redis: deployment.client, keyspace: keyspace ?? RedisDeployment.freshKeyspace(), maxDevices: maxDevices)
        }
    }
}

@Suite struct PushStoreContractTests {
    static let keys = (p256dh: [UInt8](repeating: 4, count: 65), auth: [UInt8](repeating: 7, count: 16))

    static func web(_ user: String, _ n: Int, at time: Int64 = 0) -> PushDevice {
        PushDevice(channel: "ch", user: user, platform: .webpush, token: "https://push.example/\(user)/\(n)",
                   p256dh: keys.p256dh, auth: keys.auth, registeredMillis: time)
    }

    @Test(arguments: PushStoreKind.allCases)
    func aDeviceIsOnePerTokenAndAUserKeepsTheNewestTen(kind: PushStoreKind) throws {
        let store = try kind.make()
        try store.register(Self.web("alice", 1))
        #expect(try store.devices(of: "alice", in: "ch") == [Self.web("alice", 1)])
        // The same token for another user moves it.
        let moved = PushDevice(channel: "ch", user: "bob", platform: .webpush, token: Self.web("alice", 1).token,
                               p256dh: Self.keys.p256dh, auth: Self.keys.auth, registeredMillis: 5)
        try store.register(moved)
        #expect(try store.devices(of: "alice", in: "ch").isEmpty)
        #expect(try store.devices(of: "bob", in: "ch") == [moved])
        for n in 0..<12 { try store.register(Self.web("carol", n, at: Int64(100 + n))) }
        let carol = try store.devices(of: "carol", in: "ch")
        #expect(carol.count == PushDevice.maxPerUser && !carol.contains(Self.web("carol", 0, at: 100)), "the oldest go")
        #expect(try store.usersWithDevices(["alice", "bob", "carol", "dave"], in: "ch") == ["bob", "carol"])
        #expect(try store.usersWithDevices(["bob"], in: "other").isEmpty)
        #expect(try store.unregister(platform: .webpush, token: moved.token))
        #expect(try !store.unregister(platform: .webpush, token: moved.token))
        #expect(try store.devices(of: "bob", in: "ch").isEmpty)
    }

    /// The store's bound, every user together: one more device replaces the one registered
    /// longest ago (never the one registered); registering a device again makes it new.
    @Test(arguments: PushStoreKind.allCases)
    func theStoreKeepsItsMostRecentlyRegisteredDevices(kind: PushStoreKind) throws {
        let store = try kind.make(maxDevices: 3)
        try store.register(Self.web("ann", 1, at: 100))
        try store.register(Self.web("bob", 1, at: 110))
        try store.register(Self.web("cy", 1, at: 120))
        try store.register(Self.web("ann", 1, at: 130))  // registered again: now the newest
        try store.register(Self.web("dee", 1, at: 140))
        #expect(try store.devices(of: "bob", in: "ch").isEmpty, "registered longest ago: gone")
        #expect(try store.usersWithDevices(["ann", "bob", "cy", "dee"], in: "ch") == ["ann", "cy", "dee"])
        try store.register(Self.web("eve", 1, at: 10))  // an old time: kept all the same
        #expect(try store.usersWithDevices(["ann", "cy", "dee", "eve"], in: "ch") == ["ann", "dee", "eve"])
        #expect(try !store.unregister(platform: .webpush, token: Self.web("cy", 1).token), "gone from every list")
    }

    @Test(arguments: PushStoreKind.allCases)
    func mutesHoldUntilTheirTime(kind: PushStoreKind) throws {
        let store = try kind.make()
        try store.setMute(PushMute(room: "general", untilMillis: 1_000), user: "alice", channel: "ch", nowMillis: 100)
        try store.setMute(PushMute(room: nil, untilMillis: 500), user: "alice", channel: "ch", nowMillis: 100)
        #expect(try store.mutes(of: "alice", in: "ch", nowMillis: 100) == [PushMute(room: nil, untilMillis: 500),
                                                                          PushMute(room: "general", untilMillis: 1_000)])
        #expect(try store.mutes(of: "alice", in: "ch", nowMillis: 600) == [PushMute(room: "general", untilMillis: 1_000)])
        try store.setMute(PushMute(room: "general", untilMillis: 0), user: "alice", channel: "ch", nowMillis: 100)
        #expect(try store.mutes(of: "alice", in: "ch", nowMillis: 100) == [PushMute(room: nil, untilMillis: 500)], "lifted")
        #expect(try store.mutes(of: "bob", in: "ch", nowMillis: 100).isEmpty)
    }

    /// A user's mutes are bounded: one more room is refused, a room already muted can be
    /// muted again, and mutes that ended make room (setting one removes them).
    @Test(arguments: PushStoreKind.allCases)
    func mutesAreBoundedAndEndedOnesGo(kind: PushStoreKind) throws {
        let store = try kind.make()
        for n in 0..<PushMute.maxPerUser {
            try store.setMute(PushMute(room: "r\(n)", untilMillis: 1_000), user: "alice", channel: "ch", nowMillis: 100)
        }
        #expect(throws: ParleyError.self) {
            try store.setMute(PushMute(room: "one more", untilMillis: 1_000), user: "alice", channel: "ch", nowMillis: 100)
        }
        try store.setMute(PushMute(room: "r0", untilMillis: 2_000), user: "alice", channel: "ch", nowMillis: 100)
        try store.setMute(PushMute(room: "elsewhere", untilMillis: 1_000), user: "bob", channel: "ch", nowMillis: 100)
        // Later every one of alice's but r0 has ended: the next mute removes them.
        try store.setMute(PushMute(room: "new", untilMillis: 3_000), user: "alice", channel: "ch", nowMillis: 1_500)
        #expect(try store.mutes(of: "alice", in: "ch", nowMillis: 0) == [PushMute(room: "new", untilMillis: 3_000),
                                                                        PushMute(room: "r0", untilMillis: 2_000)])
        #expect(try store.mutes(of: "bob", in: "ch", nowMillis: 0).count == 1, "another user's stay")
    }

    @Test(arguments: PushStoreKind.allCases)
    func jobsCoalescePerUserAndRoomAndStayUntilCompleted(kind: PushStoreKind) throws {
        let path = NSTemporaryDirectory() + "parley-push-\(UUID().uuidString).sqlite3", keyspace = RedisDeployment.freshKeyspace()
        var store = try kind.make(path: path, keyspace: keyspace)
        #expect(try store.enqueue(PushJob(channel: "ch", user: "alice", room: "r", count: 1, lastOffset: 3, dueMillis: 100), maxQueued: 2))
        #expect(try store.enqueue(PushJob(channel: "ch", user: "alice", room: "r", count: 1, lastOffset: 4, dueMillis: 150), maxQueued: 2))
        #expect(try store.enqueue(PushJob(channel: "ch", user: "bob", room: "r", count: 1, lastOffset: 4, dueMillis: 120), maxQueued: 2))
        #expect(try !store.enqueue(PushJob(channel: "ch", user: "carol", room: "r", count: 1, lastOffset: 4, dueMillis: 120), maxQueued: 2),
                "the queue is full")
        #expect(try store.queued() == 2)
        #expect(try store.due(nowMillis: 99, limit: 10).isEmpty)
        if kind != .memory { store = try kind.make(path: path, keyspace: keyspace) }  // a restart keeps the queue
        let due = try store.due(nowMillis: 200, limit: 10)
        #expect(due.map(\.user) == ["alice", "bob"])
        #expect(due.first?.count == 2 && due.first?.lastOffset == 4 && due.first?.dueMillis == 100, "coalesced, due when the first was")
        #expect(try store.due(nowMillis: 200, limit: 10).isEmpty, "taken: hidden from every other taker")
        try store.reschedule(due[0].id, dueMillis: 500, attempts: 1)
        let later = try store.due(nowMillis: 600, limit: 10)
        #expect(later.map(\.user) == ["alice"] && later.first?.attempts == 1, "bob is still taken")
        try store.complete(later[0])
        // A taker that never finished (a crash): its job is due again after the lease.
        let again = try store.due(nowMillis: 200 + PushJob.leaseMillis, limit: 10)
        #expect(again.map(\.user) == ["bob"])
        try store.complete(again[0])
        #expect(try store.queued() == 0)
        // A message that comes while a push is being sent is not lost with it.
        #expect(try store.enqueue(PushJob(channel: "ch", user: "dave", room: "r", count: 1, lastOffset: 5, dueMillis: 800), maxQueued: 9))
        let sending = try store.due(nowMillis: 800, limit: 10)
        #expect(try store.enqueue(PushJob(channel: "ch", user: "dave", room: "r", count: 1, lastOffset: 6, dueMillis: 900), maxQueued: 9))
        try store.complete(sending[0])
        let rest = try store.due(nowMillis: 801, limit: 10)
        #expect(rest.map(\.lastOffset) == [6] && rest.first?.count == 1, "the newer message, due at once")
        try store.complete(rest[0])
        // A new message after completion starts a new job.
        #expect(try store.enqueue(PushJob(channel: "ch", user: "alice", room: "r", count: 1, lastOffset: 9, dueMillis: 700), maxQueued: 2))
        #expect(try store.due(nowMillis: 700, limit: 10).map(\.lastOffset) == [9])
    }

    /// A taker sends a job only while it holds the lease: renewing keeps it hidden from every
    /// other taker; once the lease ran out and another took it, or it was rescheduled or
    /// completed, the renewal fails (the job is not to be sent by the first).
    @Test(arguments: PushStoreKind.allCases)
    func aTakerHoldsAJobOnlyWhileItsLeaseLasts(kind: PushStoreKind) throws {
        let store = try kind.make()
        let lease = PushJob.leaseMillis
        #expect(try store.enqueue(PushJob(channel: "ch", user: "alice", room: "r", count: 1, lastOffset: 3, dueMillis: 100), maxQueued: 9))
        let mine = try #require(try store.due(nowMillis: 100, limit: 10).first)
        #expect(mine.leasedUntilMillis == 100 + lease)
        #expect(try store.renew(PushJob(id: mine.id, channel: "ch", user: "alice", room: "r", count: 1, lastOffset: 3, dueMillis: 100),
                                nowMillis: 200) == nil, "a job this taker never took")
        let renewed = try #require(try store.renew(mine, nowMillis: 20_000))
        #expect(renewed.leasedUntilMillis == 20_000 + lease)
        #expect(try store.due(nowMillis: 100 + lease, limit: 10).isEmpty, "renewed: still hidden when the first lease ends")
        #expect(try store.renew(mine, nowMillis: 20_001) == nil, "the old lease is not the job's any more")
        // The renewed lease runs out before this taker comes back: another takes the job.
        let theirs = try #require(try store.due(nowMillis: 20_000 + lease, limit: 10).first)
        #expect(theirs.user == "alice")
        #expect(try store.renew(renewed, nowMillis: 20_000 + lease + 1) == nil, "the other taker holds it")
        let theirsRenewed = try #require(try store.renew(theirs, nowMillis: 20_000 + lease + 2))
        // Rescheduled, or sent and completed: nobody holds it any more.
        try store.reschedule(theirs.id, dueMillis: 90_000, attempts: 1)
        #expect(try store.renew(theirsRenewed, nowMillis: 20_000 + lease + 3) == nil)
        let last = try #require(try store.due(nowMillis: 90_000, limit: 10).first)
        try store.complete(last)
        #expect(try store.renew(last, nowMillis: 90_001) == nil)
        #expect(try store.queued() == 0)
    }
}
