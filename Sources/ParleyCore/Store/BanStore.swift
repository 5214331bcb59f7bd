import Synchronization

/// The bans in a store, and the store's version: it changes with every ban added or lifted,
/// so a node that polls it knows when to read the bans again.
public struct BanSet: Sendable, Equatable {
    public var bans: [Ban]
    public var version: Int64
    public init(bans: [Ban], version: Int64) {
        self.bans = bans
        self.version = version
    }
}

/// Where bans are kept beyond one process: SQLite under `--data` on a single node, Redis in
/// cluster mode (one list for every node), memory in tests. Every node checks bans from its
/// own cache (``BanSet``), refreshed from here; the store is asked only when an operator
/// changes a ban and when the version moved.
///
/// Contract (Tests/ContractTests/BanStoreContractTests.swift, run against every backend):
/// - ``add(_:reason:createdMillis:untilMillis:)`` gives a ban an id unique in the store and
///   replaces any ban on the same target (names compared as ``Ban/normalized(_:)``);
/// - ``remove(id:)`` is false for an id it does not hold;
/// - ``load(nowMillis:)`` returns the bans still in force at `nowMillis`, oldest first, and
///   forgets expired ones;
/// - the version after any add or remove differs from every version before it.
public protocol BanStore: AnyObject, Sendable {
    func add(_ target: Ban.Target, reason: String, createdMillis: Int64, untilMillis: Int64) async throws(ParleyError) -> Ban
    func remove(id: Int) async throws(ParleyError) -> Bool
    func load(nowMillis: Int64) async throws(ParleyError) -> BanSet
    /// The version alone: cheap enough to poll every second.
    func version() async throws(ParleyError) -> Int64
    /// ``load(nowMillis:)`` for a caller that must wait for it without Swift concurrency (a
    /// server starting: its bans are in force before its first connection). Blocks at most
    /// about `timeoutMillis`; never call it on an event loop.
    func loadNow(nowMillis: Int64, timeoutMillis: Int) throws(ParleyError) -> BanSet
}

/// Bans in memory: the store of tests (and of nothing else; a server keeps them durably).
public final class InMemoryBanStore: BanStore {
    private let state = Mutex<(bans: [Ban], nextID: Int, version: Int64)>(([], 1, 0))

    public init() {}

    public func add(_ target: Ban.Target, reason: String, createdMillis: Int64, untilMillis: Int64) async throws(ParleyError) -> Ban {
        let target = Ban.target(target)
        return state.withLock { state in
            state.bans.removeAll { $0.target == target }
            let ban = Ban(id: state.nextID, target: target, reason: reason, createdMillis: createdMillis, untilMillis: untilMillis)
            state.nextID += 1
            state.bans.append(ban)
            state.version += 1
            return ban
        }
    }

    public func remove(id: Int) async throws(ParleyError) -> Bool {
        state.withLock { state in
            guard let index = state.bans.firstIndex(where: { $0.id == id }) else { return false }
            state.bans.remove(at: index)
            state.version += 1
            return true
        }
    }

    public func load(nowMillis: Int64) async throws(ParleyError) -> BanSet {
        loadNow(nowMillis: nowMillis)
    }

    public func loadNow(nowMillis: Int64, timeoutMillis: Int = 0) -> BanSet {
        state.withLock { state in
            state.bans.removeAll { $0.untilMillis <= nowMillis }
            return BanSet(bans: state.bans, version: state.version)
        }
    }

    public func version() async throws(ParleyError) -> Int64 { state.withLock { $0.version } }
}
