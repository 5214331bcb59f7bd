import Synchronization

/// Where users' read marks live, which are also their conversations (the rooms of their
/// inbox): SQLite on one node, Redis in a cluster, memory in tests. Completion-based like
/// ``MessageStore``: every call returns at once, `completion` runs later on a thread of the
/// store's choosing (or before the call returns, in memory).
///
/// Contract (Tests/ContractTests/ReadStateStoreContractTests.swift, run against every backend):
/// - ``record(_:completion:)`` keeps the greater of the stored offset and the new one (a mark
///   never moves back), and the latest name (an empty one keeps the stored name), receipt
///   setting and time; offset 0 only adds the room to the user's conversations.
/// - A user has at most ``maxRoomsPerUser`` conversations per channel: recording one more
///   drops the one the user touched least recently (its mark with it); recording one more
///   with `evicting` false (someone else opened it for the user) records nothing then, so
///   nobody can push a user's own conversations out of their inbox.
/// - The store keeps at most ``maxMarks`` marks in all (every user and channel): recording
///   a new one past it drops the marks touched least recently, whoever's they are (a user
///   long gone, or one an address made up on an open channel), never the one recorded.
/// - ``marks(of:in:limit:completion:)`` lists a user's marks, most recently touched first.
/// - ``readers(of:limit:completion:)`` lists the receipts of a room's marks that share them
///   and have read something, furthest read first (ties: user id, descending), at most
///   `limit` of them.
public protocol ReadStateStore: AnyObject, Sendable {
    /// Most conversations kept per user and channel.
    var maxRoomsPerUser: Int { get }
    /// Most marks kept in all.
    var maxMarks: Int { get }
    func record(_ mark: ReadMark, evicting: Bool, completion: @escaping @Sendable (Result<ReadUpdate, ParleyError>) -> Void)
    func mark(of user: String, in room: RoomKey, completion: @escaping @Sendable (Result<ReadMark?, ParleyError>) -> Void)
    func marks(of user: String, in channel: String, limit: Int, completion: @escaping @Sendable (Result<[ReadMark], ParleyError>) -> Void)
    func readers(of room: RoomKey, limit: Int, completion: @escaping @Sendable (Result<[ReadReceipt], ParleyError>) -> Void)
    /// The users who have `room` among their conversations (private ones too), at most `limit`,
    /// in no set order: whom a push for the room may reach.
    func users(of room: RoomKey, limit: Int, completion: @escaping @Sendable (Result<[String], ParleyError>) -> Void)
}

extension ReadStateStore {
    /// Records `mark`, dropping the least recent conversation when the user has too many.
    public func record(_ mark: ReadMark, completion: @escaping @Sendable (Result<ReadUpdate, ParleyError>) -> Void) {
        record(mark, evicting: true, completion: completion)
    }

    public func record(_ mark: ReadMark, evicting: Bool = true) async throws(ParleyError) -> ReadUpdate {
        try await withCheckedContinuation { continuation in
            record(mark, evicting: evicting) { continuation.resume(returning: $0) }
        }.get()
    }

    public func mark(of user: String, in room: RoomKey) async throws(ParleyError) -> ReadMark? {
        try await withCheckedContinuation { continuation in mark(of: user, in: room) { continuation.resume(returning: $0) } }.get()
    }

    public func marks(of user: String, in channel: String, limit: Int) async throws(ParleyError) -> [ReadMark] {
        try await withCheckedContinuation { continuation in
            marks(of: user, in: channel, limit: limit) { continuation.resume(returning: $0) }
        }.get()
    }

    public func users(of room: RoomKey, limit: Int) async throws(ParleyError) -> [String] {
        try await withCheckedContinuation { continuation in users(of: room, limit: limit) { continuation.resume(returning: $0) } }.get()
    }

    public func readers(of room: RoomKey, limit: Int) async throws(ParleyError) -> [ReadReceipt] {
        try await withCheckedContinuation { continuation in readers(of: room, limit: limit) { continuation.resume(returning: $0) } }.get()
    }
}

/// The rule every backend applies to one mark: the merged mark, and whether it moved.
extension ReadMark {
    /// `self` (stored) updated by `newer` (recorded): the greater offset, the newer name
    /// (unless it is empty: someone else opened the conversation for this user), setting and
    /// time.
    public func merged(with newer: ReadMark) -> ReadMark {
        var mark = newer
        if newer.name.isEmpty { mark.name = name }
        mark.offset = max(offset, newer.offset)
        mark.updatedMillis = max(updatedMillis, newer.updatedMillis)
        return mark
    }
}

/// Read marks in memory: the store of tests and of a server without a data directory.
public final class InMemoryReadStateStore: ReadStateStore {
    public let maxRoomsPerUser: Int
    public let maxMarks: Int
    private struct UserKey: Hashable { let channel: String; let user: String }
    private let state = Mutex<[UserKey: [String: ReadMark]]>([:])
    /// Marks held in all (kept beside the table, so a record does not count them).
    private let total = Mutex(0)

    public init(maxRoomsPerUser: Int = 500, maxMarks: Int = ReadMark.maxStored) {
        self.maxRoomsPerUser = maxRoomsPerUser
        self.maxMarks = max(1, maxMarks)
    }

    public func record(_ mark: ReadMark, evicting: Bool, completion: @escaping @Sendable (Result<ReadUpdate, ParleyError>) -> Void) {
        let key = UserKey(channel: mark.room.channel, user: mark.user)
        let update = state.withLock { state -> ReadUpdate in
            var marks = state[key] ?? [:]
            let old = marks[mark.room.room]
            if old == nil, !evicting, marks.count >= maxRoomsPerUser { return ReadUpdate(mark: mark, moved: false, added: false) }
            let merged = old?.merged(with: mark) ?? mark
            marks[mark.room.room] = merged
            var added = old == nil ? 1 : 0
            if old == nil, marks.count > maxRoomsPerUser,
               let oldest = marks.values.filter({ $0.room != mark.room }).min(by: Self.lessRecent) {
                marks[oldest.room.room] = nil
                added -= 1
            }
            state[key] = marks
            let held = total.withLock { $0 += added; return $0 }
            // The store's bound: the least recently touched marks of anyone go, a hundredth of
            // the bound at a time (one sort per batch, not a walk per mark).
            if held > maxMarks {
                var everyone = state.flatMap { owner, marks in marks.values.map { (owner, $0) } }
                    .filter { !($0.0 == key && $0.1.room == mark.room) }
                // Ties as SQLite's index and Redis's sorted set break them: channel, user, room.
                everyone.sort { ($0.1.updatedMillis, $0.0.channel, $0.0.user, $0.1.room.room)
                    < ($1.1.updatedMillis, $1.0.channel, $1.0.user, $1.1.room.room) }
                let dropped = everyone.prefix(max(held - maxMarks, maxMarks / 100))
                for (owner, gone) in dropped {
                    state[owner]?[gone.room.room] = nil
                    if state[owner]?.isEmpty == true { state[owner] = nil }
                }
                total.withLock { $0 -= dropped.count }
            }
            return ReadUpdate(mark: merged, moved: merged.offset > (old?.offset ?? 0), added: old == nil)
        }
        completion(.success(update))
    }

    public func mark(of user: String, in room: RoomKey, completion: @escaping @Sendable (Result<ReadMark?, ParleyError>) -> Void) {
        completion(.success(state.withLock { $0[UserKey(channel: room.channel, user: user)]?[room.room] }))
    }

    public func marks(of user: String, in channel: String, limit: Int,
                      completion: @escaping @Sendable (Result<[ReadMark], ParleyError>) -> Void) {
        let marks = state.withLock { $0[UserKey(channel: channel, user: user)].map { Array($0.values) } ?? [] }
        completion(.success(Array(marks.sorted { Self.lessRecent($1, $0) }.prefix(max(0, limit)))))
    }

    public func readers(of room: RoomKey, limit: Int, completion: @escaping @Sendable (Result<[ReadReceipt], ParleyError>) -> Void) {
        let marks = state.withLock { state in
            state.compactMap { key, marks in key.channel == room.channel ? marks[room.room] : nil }
        }
        let readers = marks.filter { $0.sharesReceipts && $0.offset > 0 }
            .sorted { $0.offset != $1.offset ? $0.offset > $1.offset : $0.user > $1.user }
        completion(.success(readers.prefix(max(0, limit)).map(ReadReceipt.init)))
    }

    public func users(of room: RoomKey, limit: Int, completion: @escaping @Sendable (Result<[String], ParleyError>) -> Void) {
        let users = state.withLock { state in
            state.compactMap { key, marks in key.channel == room.channel && marks[room.room] != nil ? key.user : nil }
        }
        completion(.success(Array(users.sorted().prefix(max(0, limit)))))
    }

    /// Ordered by (time touched, room name), as every backend orders them (Redis: a sorted
    /// set by time, ties by name), so all of them drop and list the same ones.
    public static func lessRecent(_ a: ReadMark, _ b: ReadMark) -> Bool {
        a.updatedMillis != b.updatedMillis ? a.updatedMillis < b.updatedMillis : a.room.room < b.room.room
    }
}
