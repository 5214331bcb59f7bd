import Foundation
import ParleyCore
import Synchronization

/// An operator's ban: a name or an IP address kept out until a time.
struct Ban: Sendable, Equatable {
    enum Target: Sendable, Equatable {
        case name(String)
        case ip(String)

        /// Whether a client with this address and name is covered. An address ban covers
        /// what counts as one client for the per-IP limits (``IPAddress/limitKey``): the
        /// address, and for IPv6 its whole /64, which one host can move around in.
        func covers(ip: String?, name: String?) -> Bool {
            switch self {
            case .ip(let banned):
                guard let ip else { return false }
                return ip == banned || IPAddress.limitKey(ip) == IPAddress.limitKey(banned)
            case .name(let banned): return name.map { Ban.normalized($0) == banned } ?? false
            }
        }

        var kind: String {
            switch self {
            case .name: "name"
            case .ip: "ip"
            }
        }

        var value: String {
            switch self {
            case .name(let name): name
            case .ip(let ip): ip
            }
        }
    }

    let id: Int
    let target: Target
    let reason: String
    let createdMillis: Int64
    let untilMillis: Int64

    /// Names are compared trimmed and case-insensitively (`Alice ` is `alice`).
    static func normalized(_ name: String) -> String {
        name.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    }
}

/// The bans in force: checked at admission (IP) and at every door's identify (name and IP).
/// Expired bans are dropped as they are met. Thread-safe; with no ban at all, a check is one
/// atomic load.
final class BanList: Sendable {
    private let bans = Mutex<(list: [Ban], nextID: Int)>(([], 1))
    private let count = Atomic<Int>(0)
    /// Most bans kept at once.
    static let maxBans = 10_000
    /// Longest ban, in seconds (a year).
    static let maxSeconds = 366 * 86_400

    enum Failure: Error, Equatable { case tooMany }

    /// Adds a ban (replacing one on the same target) lasting `seconds`.
    func add(_ target: Target, seconds: Int, reason: String, nowMillis: Int64) throws(Failure) -> Ban {
        let target: Ban.Target = if case .name(let name) = target { .name(Ban.normalized(name)) } else { target }
        let ban = try bans.withLock { state throws(Failure) -> Ban in
            state.list.removeAll { $0.untilMillis <= nowMillis || $0.target == target }
            guard state.list.count < Self.maxBans else { throw .tooMany }
            let ban = Ban(id: state.nextID, target: target, reason: reason, createdMillis: nowMillis,
                          untilMillis: nowMillis + Int64(seconds) * 1000)
            state.nextID += 1
            state.list.append(ban)
            count.store(state.list.count, ordering: .relaxed)
            return ban
        }
        return ban
    }
    typealias Target = Ban.Target

    /// Lifts the ban `id`; false when there is none.
    func remove(id: Int) -> Bool {
        bans.withLock { state in
            guard let index = state.list.firstIndex(where: { $0.id == id }) else { return false }
            state.list.remove(at: index)
            count.store(state.list.count, ordering: .relaxed)
            return true
        }
    }

    /// The bans in force, oldest first.
    func list(nowMillis: Int64) -> [Ban] {
        bans.withLock { state in
            state.list.removeAll { $0.untilMillis <= nowMillis }
            count.store(state.list.count, ordering: .relaxed)
            return state.list
        }
    }

    /// The ban covering a client from `ip` named `name` (either may be unknown yet), if any.
    func ban(ip: String?, name: String?, nowMillis: Int64) -> Ban? {
        guard count.load(ordering: .relaxed) > 0 else { return nil }
        return bans.withLock { state in
            state.list.first { $0.untilMillis > nowMillis && $0.target.covers(ip: ip, name: name) }
        }
    }
}
