import Foundation
import ParleyCore
import Synchronization

/// This node's copy of the bans in force, kept from the ``BanStore`` by ``BanKeeper``:
/// checked at admission (IP) and at every door's identify (name and IP). Expired bans are
/// dropped as they are met. Thread-safe; with no ban at all, a check is one atomic load.
final class BanList: Sendable {
    private let bans = Mutex<[Ban]>([])
    private let count = Atomic<Int>(0)
    /// Most bans kept at once.
    static let maxBans = 10_000
    /// Longest ban, in seconds (a year).
    static let maxSeconds = 366 * 86_400

    typealias Target = Ban.Target

    /// Puts `ban` in (replacing one on the same target, or with the same id).
    func insert(_ ban: Ban) {
        bans.withLock { list in
            list.removeAll { $0.target == ban.target || $0.id == ban.id }
            list.append(ban)
            count.store(list.count, ordering: .relaxed)
        }
    }

    /// Takes the ban `id` out; false when it was not here.
    @discardableResult
    func remove(id: Int) -> Bool {
        bans.withLock { list in
            guard let index = list.firstIndex(where: { $0.id == id }) else { return false }
            list.remove(at: index)
            count.store(list.count, ordering: .relaxed)
            return true
        }
    }

    /// Replaces the whole list with the store's; returns the bans that were not here before.
    func replace(with fresh: [Ban]) -> [Ban] {
        bans.withLock { list in
            let known = Set(list.map(\.id))
            list = fresh
            count.store(list.count, ordering: .relaxed)
            return fresh.filter { !known.contains($0.id) }
        }
    }

    /// How many bans are held (expired ones included until next met).
    var held: Int { count.load(ordering: .relaxed) }

    /// The bans in force, oldest first.
    func list(nowMillis: Int64) -> [Ban] {
        bans.withLock { list in
            list.removeAll { $0.untilMillis <= nowMillis }
            count.store(list.count, ordering: .relaxed)
            return list
        }
    }

    /// The ban covering a client from `ip` named `name` (either may be unknown yet), if any.
    func ban(ip: String?, name: String?, nowMillis: Int64) -> Ban? {
        guard count.load(ordering: .relaxed) > 0 else { return nil }
        return bans.withLock { list in
            list.first { $0.untilMillis > nowMillis && $0.target.covers(ip: ip, name: name) }
        }
    }
}

/// The bans of the server: the ``BanStore`` that keeps them (SQLite on a single node, Redis
/// for a whole cluster) and this node's ``BanList``, which every check reads. A ban added or
/// lifted here goes to the store first, then to the list. In cluster mode the keeper polls the
/// store's version every ``pollMillis`` and, when it moved (another node changed a ban),
/// reads the bans again and hands the new ones to `onNewBans` (which disconnects the clients
/// they cover on this node).
final class BanKeeper: Sendable {
    let list: BanList
    let store: any BanStore
    private let clock: any WallClock
    private let lastVersion = Mutex<Int64?>(nil)
    private let poller = Mutex<Task<Void, Never>?>(nil)
    /// How often a cluster node asks whether the bans changed.
    static let pollMillis: Int64 = 1_000

    init(store: any BanStore, list: BanList, clock: any WallClock) {
        self.store = store
        self.list = list
        self.clock = clock
    }

    /// Stores a ban and puts it in force here.
    func add(_ target: Ban.Target, seconds: Int, reason: String) async throws(ParleyError) -> Ban {
        guard list.list(nowMillis: clock.nowMillis()).count < BanList.maxBans else {
            throw ParleyError(.limitReached, "too many bans (limit \(BanList.maxBans)); lift some first")
        }
        let now = clock.nowMillis()
        let ban = try await store.add(target, reason: reason, createdMillis: now, untilMillis: now + Int64(seconds) * 1000)
        list.insert(ban)
        return ban
    }

    /// Lifts ban `id` in the store and here; false when the store had no such ban.
    func remove(id: Int) async throws(ParleyError) -> Bool {
        let found = try await store.remove(id: id)
        list.remove(id: id)
        return found
    }

    /// Reads every ban from the store into the list; returns the ones new to this node.
    @discardableResult
    func reload() async throws(ParleyError) -> [Ban] {
        let set = try await store.load(nowMillis: clock.nowMillis())
        lastVersion.withLock { $0 = set.version }
        return list.replace(with: set.bans)
    }

    /// Reloads when the store's version moved since the last read (or was never read).
    func reloadIfChanged() async throws(ParleyError) -> [Ban] {
        let version = try await store.version()
        guard lastVersion.withLock({ $0 }) != version else { return [] }
        return try await reload()
    }

    /// Reads the bans once, waiting at most `timeoutMillis` (a node starts even while Redis
    /// is down; it reads them when Redis is back). Blocks without Swift concurrency (a server
    /// may be started from a task); not on an event loop.
    func loadAtStart(timeoutMillis: Int, logger: (ParleyError) -> Void) {
        do throws(ParleyError) {
            let set = try store.loadNow(nowMillis: clock.nowMillis(), timeoutMillis: timeoutMillis)
            lastVersion.withLock { $0 = set.version }
            _ = list.replace(with: set.bans)
        } catch {
            logger(error)
        }
    }

    /// Polls the store for bans changed elsewhere until ``stop()``.
    func startPolling(onNewBans: @escaping @Sendable ([Ban]) -> Void, onError: @escaping @Sendable (ParleyError) -> Void) {
        let task = Task.detached { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Self.pollMillis))
                if Task.isCancelled { break }
                do throws(ParleyError) {
                    let fresh = try await reloadIfChanged()
                    if !fresh.isEmpty { onNewBans(fresh) }
                } catch {
                    onError(error)
                }
            }
        }
        poller.withLock { $0 = task }
    }

    func stop() {
        poller.withLock { $0?.cancel(); $0 = nil }
    }
}
