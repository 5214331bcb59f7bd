/// `async` forms of the hub's completion-based calls, for code that is not on an event loop
/// (REST handlers, tools, tests).
extension Hub {
    /// Publishes and waits until the message is durable; returns it with its offset.
    public func publish(_ body: JSONValue, to key: RoomKey, from sender: Member?, messageID: String? = nil) async throws(ParleyError) -> Message {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Message, ParleyError>, Never>) in
            do throws(ParleyError) {
                try publish(body, to: key, from: sender, messageID: messageID) { continuation.resume(returning: $0) }
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        return try result.get()
    }

    /// Members of any room across every node (at most `limit`), and how many there are.
    public func members(of key: RoomKey, limit: Int) async throws(ParleyError) -> (members: [Member], total: Int) {
        let result = await withCheckedContinuation { continuation in
            members(of: key, limit: limit) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Rooms of a channel that have members, sorted by name, a page at a time.
    public func occupiedRooms(in channel: String, after cursor: String? = nil, limit: Int) async throws(ParleyError) -> [String] {
        let result = await withCheckedContinuation { continuation in
            occupiedRooms(in: channel, after: cursor, limit: limit) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// The offset of a room's newest stored message (0 when none).
    public func lastOffset(of key: RoomKey) async throws(ParleyError) -> Int64 {
        let result = await withCheckedContinuation { continuation in
            lastOffset(of: key) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Stored messages before `offset` (the newest when nil), oldest first.
    public func storedHistory(of key: RoomKey, before offset: Int64? = nil, limit: Int) async throws(ParleyError) -> MessagePage {
        let result = await withCheckedContinuation { continuation in
            storedHistory(of: key, before: offset, limit: limit) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }
}

extension Hub {
    /// Most members read per room by the channel-wide queries.
    public static let maxMembersPerRoomQuery = 10_000

    /// The occupied rooms of a channel (a page, sorted by name) with their members in join order.
    public func roomMembers(in channel: String, after cursor: String? = nil, limit: Int) async throws(ParleyError) -> [(room: String, members: [Member])] {
        var listing: [(room: String, members: [Member])] = []
        for room in try await occupiedRooms(in: channel, after: cursor, limit: limit) {
            let (members, _) = try await members(of: RoomKey(channel: channel, room: room), limit: Self.maxMembersPerRoomQuery)
            if !members.isEmpty { listing.append((room, members)) }
        }
        return listing
    }

    /// Distinct client ids in a channel's occupied rooms (the first `roomLimit` rooms by
    /// name), in order of first appearance.
    public func clientIDs(in channel: String, roomLimit: Int = 1_000) async throws(ParleyError) -> [String] {
        var seen = Set<String>(), ids: [String] = []
        for (_, members) in try await roomMembers(in: channel, limit: roomLimit) {
            for member in members where seen.insert(member.id).inserted { ids.append(member.id) }
        }
        return ids
    }
}
