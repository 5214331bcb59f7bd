import Synchronization

/// The in-memory default store: everything completes before the call returns; nothing
/// survives the process. Retention by count is applied at each append, by age on demand.
public final class InMemoryMessageStore: MessageStore {
    private struct Log {
        /// Every entry as appended (deleted messages and their edits as tombstones).
        var messages: [Message] = []
        var clientIDs: [Int64: String] = [:]
        var lastOffset: Int64 = 0
        /// The current state of messages that actions changed, by offset.
        var current: [Int64: Message] = [:]
        /// Offsets of the kept messages (not actions), by id.
        var offsets: [String: Int64] = [:]

        func index(of offset: Int64) -> Int? {
            let index = messages.partitionPoint { $0.offset < offset }
            return index < messages.count && messages[index].offset == offset ? index : nil
        }

        /// The kept message at `index` in its current state.
        func state(at index: Int) -> Message { current[messages[index].offset] ?? messages[index] }

        /// Applies an action entry to its target (before the entry is appended); returns the
        /// entry as it is to be kept: an edit of a message deleted meanwhile (it passed its
        /// checks before the delete was stored) is kept as a tombstone, as the edits the
        /// delete found were, so its text is not replayed after the delete.
        mutating func apply(_ entry: Message) -> Message {
            guard let action = entry.action, let index = index(of: action.target.offset), !messages[index].isAction else { return entry }
            if action.kind == .edit, messages[index].isDeleted { return entry.tombstone }
            if action.kind == .delete {
                delete(at: index)
            } else {
                current[action.target.offset] = state(at: index).applying(entry)
            }
            return entry
        }

        /// The message at `index` and the edits of it become tombstones.
        mutating func delete(at index: Int) {
            let offset = messages[index].offset
            messages[index] = messages[index].tombstone
            current[offset] = nil
            for later in (index + 1)..<messages.count where messages[later].carriesText(of: offset) {
                messages[later] = messages[later].tombstone
            }
        }

        mutating func dropFirst(_ count: Int) {
            for dropped in messages.prefix(count) {
                clientIDs[dropped.offset] = nil
                current[dropped.offset] = nil
                if !dropped.isAction { offsets[dropped.id] = nil }
            }
            messages.removeFirst(count)
        }
    }
    public let retention: StoreRetention
    private let rooms = Mutex<[RoomKey: Log]>([:])

    public init(retention: StoreRetention = .keepEverything) {
        self.retention = retention
    }

    public func append(_ message: Message, clientMessageID: String?,
                       completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        let result = rooms.withLock { rooms -> Result<Void, ParleyError> in
            var log = rooms[message.room] ?? Log()
            guard message.offset == log.lastOffset + 1 else {
                return .failure(ParleyError(.conflict, "offset \(message.offset) does not follow \(log.lastOffset) in \(message.room)"))
            }
            log.messages.append(log.apply(message))
            if !message.isAction { log.offsets[message.id] = message.offset }
            log.lastOffset = message.offset
            if let clientMessageID { log.clientIDs[message.offset] = clientMessageID }
            if let keep = retention.policy(for: message.room.channel).maxMessagesPerRoom, log.messages.count > keep {
                log.dropFirst(log.messages.count - keep)
            }
            rooms[message.room] = log
            return .success(())
        }
        completion(result)
    }

    public func messages(in room: RoomKey, after offset: Int64, limit: Int,
                         completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        messages(in: room, after: offset, limit: limit, maxBytes: .max, completion: completion)
    }

    public func messages(in room: RoomKey, after offset: Int64, limit: Int, maxBytes: Int,
                         completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        let page = rooms.withLock { rooms -> [Message] in
            guard let log = rooms[room], limit > 0 else { return [] }
            let start = log.messages.partitionPoint { $0.offset <= offset }
            return MessagePage.prefixFitting(Array(log.messages[start...].prefix(limit)), maxBytes: maxBytes)
        }
        completion(.success(page))
    }

    public func messages(in room: RoomKey, before: Int64?, limit: Int,
                         completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        messages(in: room, before: before, limit: limit, maxBytes: .max, completion: completion)
    }

    public func messages(in room: RoomKey, before: Int64?, limit: Int, maxBytes: Int,
                         completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        let page = rooms.withLock { rooms -> MessagePage in
            guard let log = rooms[room], limit > 0 else { return MessagePage(messages: [], hasMore: false) }
            var index = before.map { bound in log.messages.partitionPoint { $0.offset < bound } } ?? log.messages.count
            // Messages only, in their current state; actions are walked over.
            var counted: [Message] = []
            while index > 0 && counted.count < limit {
                index -= 1
                if !log.messages[index].isAction { counted.append(log.state(at: index)) }
            }
            counted.reverse()
            let start = MessagePage.firstFitting(counted, maxBytes: maxBytes, size: \.approximateSize)
            let olderKept = start > 0 || log.messages[..<index].contains { !$0.isAction }
            return MessagePage(messages: Array(counted[start...]), hasMore: olderKept)
        }
        completion(.success(page))
    }

    public func deleteMessage(in room: RoomKey, offset: Int64, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        let found = rooms.withLock { rooms -> Bool in
            guard let index = rooms[room]?.index(of: offset), !rooms[room]!.messages[index].isAction else { return false }
            rooms[room]!.delete(at: index)
            return true
        }
        completion(.success(found))
    }

    public func message(withID id: String, in room: RoomKey, completion: @escaping @Sendable (Result<Message?, ParleyError>) -> Void) {
        let found = rooms.withLock { rooms -> Message? in
            guard let log = rooms[room], let offset = log.offsets[id], let index = log.index(of: offset) else { return nil }
            return log.state(at: index)
        }
        completion(.success(found))
    }

    public func enforceRetention(nowMillis: Int64, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        if !retention.keepsEverything {
            rooms.withLock { rooms in
                for key in rooms.keys {
                    guard let age = retention.policy(for: key.channel).maxAgeMillis else { continue }
                    let cut = rooms[key]!.messages.partitionPoint { $0.timestampMillis < nowMillis - age }
                    rooms[key]!.dropFirst(cut)
                }
            }
        }
        completion(.success(()))
    }

    public func loadRoom(_ room: RoomKey, clientMessageIDsSince: Int64,
                         completion: @escaping @Sendable (Result<RoomRecovery, ParleyError>) -> Void) {
        let recovery = rooms.withLock { rooms -> RoomRecovery in
            guard let log = rooms[room] else { return RoomRecovery() }
            var recovery = RoomRecovery(lastOffset: log.lastOffset)
            for message in log.messages where message.timestampMillis >= clientMessageIDsSince {
                guard let clientID = log.clientIDs[message.offset] else { continue }
                recovery.recentPublishes.append(RememberedPublish(room: room, clientMessageID: clientID, id: message.id,
                                                                  offset: message.offset, timestampMillis: message.timestampMillis))
            }
            // The newest ones, as many as the broker keeps for a room.
            let excess = recovery.recentPublishes.count - SingleNodeBroker.maxRememberedPerRoom
            if excess > 0 { recovery.recentPublishes.removeFirst(excess) }
            return recovery
        }
        completion(.success(recovery))
    }

    public func recover(clientMessageIDsSince: Int64) throws(ParleyError) -> StoreRecovery {
        rooms.withLock { rooms in
            var recovery = StoreRecovery()
            for (key, log) in rooms {
                recovery.lastOffsets[key] = log.lastOffset
                for message in log.messages where message.timestampMillis >= clientMessageIDsSince {
                    guard let clientID = log.clientIDs[message.offset] else { continue }
                    recovery.recentPublishes.append(RememberedPublish(room: key, clientMessageID: clientID, id: message.id,
                                                                      offset: message.offset, timestampMillis: message.timestampMillis))
                }
            }
            return recovery
        }
    }
}

extension RandomAccessCollection where Index == Int {
    /// The first index whose element does not satisfy `belongs` (elements satisfying it must
    /// come first): a binary search.
    func partitionPoint(_ belongs: (Element) -> Bool) -> Int {
        var low = startIndex, high = endIndex
        while low < high {
            let mid = (low + high) / 2
            if belongs(self[mid]) { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
