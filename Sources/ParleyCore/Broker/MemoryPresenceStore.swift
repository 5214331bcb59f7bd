import Synchronization

/// The single-node ``PresenceStore``: member lists in memory. Every call completes before it
/// returns.
public final class MemoryPresenceStore: PresenceStore {
    private struct RoomMembers {
        /// Member id → (join sequence, member).
        var byID: [String: (sequence: UInt64, member: Member)] = [:]
        var nextSequence: UInt64 = 0
    }
    private struct State {
        var rooms: [RoomKey: RoomMembers] = [:]
        /// Channel → names of its rooms that have members.
        var occupied: [String: Set<String>] = [:]
    }
    private let state = Mutex(State())

    public init() {}

    public func add(_ member: Member, to room: RoomKey, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        let added = state.withLock { state -> Bool in
            var members = state.rooms[room] ?? RoomMembers()
            let isNew: Bool
            if let existing = members.byID[member.id] {
                members.byID[member.id] = (existing.sequence, member)
                isNew = false
            } else {
                members.nextSequence += 1
                members.byID[member.id] = (members.nextSequence, member)
                isNew = true
            }
            state.rooms[room] = members
            state.occupied[room.channel, default: []].insert(room.room)
            return isNew
        }
        completion(.success(added))
    }

    public func remove(_ member: Member, from room: RoomKey, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        let removed = state.withLock { state -> Bool in
            guard var members = state.rooms[room], members.byID.removeValue(forKey: member.id) != nil else { return false }
            if members.byID.isEmpty {
                state.rooms[room] = nil
                state.occupied[room.channel]?.remove(room.room)
                if state.occupied[room.channel]?.isEmpty == true { state.occupied[room.channel] = nil }
            } else {
                state.rooms[room] = members
            }
            return true
        }
        completion(.success(removed))
    }

    public func members(of room: RoomKey, limit: Int,
                        completion: @escaping @Sendable (Result<(members: [Member], total: Int), ParleyError>) -> Void) {
        let found = state.withLock { state -> ([Member], Int) in
            guard let members = state.rooms[room] else { return ([], 0) }
            let ordered = members.byID.values.sorted { $0.sequence < $1.sequence }.prefix(max(0, limit)).map(\.member)
            return (Array(ordered), members.byID.count)
        }
        completion(.success(found))
    }

    public func rooms(in channel: String, after cursor: String?, limit: Int,
                      completion: @escaping @Sendable (Result<[String], ParleyError>) -> Void) {
        let names = state.withLock { state -> [String] in
            guard let rooms = state.occupied[channel] else { return [] }
            let sorted = rooms.sorted()
            let start = cursor.map { cursor in sorted.firstIndex { $0 > cursor } ?? sorted.count } ?? 0
            return Array(sorted[start...].prefix(max(0, limit)))
        }
        completion(.success(names))
    }
}
