/// What an operator does to rooms (the admin API), and what it reads about this node.
extension Hub {
    /// Replaces the stored message at `offset` of `key` by its tombstone, then tells every
    /// node's sessions (``RoomEvent/messageDeleted(offset:)``, in order with the room's other
    /// events): clients remove it, and history and resume show the tombstone from then on.
    /// `completion` gets false when the room has no message there (never had, or retention
    /// dropped it); nothing is announced then.
    public func deleteMessage(at offset: Int64, in key: RoomKey,
                              completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        let broker = self.broker
        store.deleteMessage(in: key, offset: offset) { result in
            if case .success(true) = result { broker.broadcast(.messageDeleted(offset: offset), in: key) }
            completion(result)
        }
    }

    /// ``deleteMessage(at:in:completion:)``, awaiting the store.
    public func deleteMessage(at offset: Int64, in key: RoomKey) async throws(ParleyError) -> Bool {
        let result = await withCheckedContinuation { continuation in
            deleteMessage(at: offset, in: key) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Closes a room on every node: each session in it is told (``RoomEvent/roomClosed(reason:)``)
    /// and leaves. The room's history stays; it can be joined again.
    public func closeRoom(_ key: RoomKey, reason: String) {
        broker.broadcast(.roomClosed(reason: reason), in: key)
    }

    /// One room this node holds in memory.
    public struct RoomSummary: Sendable, Equatable {
        public let key: RoomKey
        /// Members as this node sees them (every node's, for rooms with a session here).
        public let members: Int
        /// Sessions of this node in the room.
        public let localSessions: Int
    }

    /// The rooms this node holds in memory now, sorted by channel and name.
    public func roomSummaries() -> [RoomSummary] {
        let rooms = self.rooms.withLock { Array($0.values) }
        return rooms.map { room in
            room.lock.withLock { state in RoomSummary(key: room.key, members: state.presence.members.count, localSessions: state.sessions.count) }
        }.sorted { ($0.key.channel, $0.key.room) < ($1.key.channel, $1.key.room) }
    }

    /// Members of the rooms held in memory, summed (a member in two rooms counts twice).
    public var membersInMemory: Int {
        let rooms = self.rooms.withLock { Array($0.values) }
        return rooms.reduce(0) { total, room in total + room.lock.withLock { $0.presence.members.count } }
    }
}
