import Synchronization

/// The in-memory default store: everything completes before the call returns; nothing
/// survives the process. Retention by count is applied at each append, by age on demand.
public final class InMemoryMessageStore: MessageStore {
    private struct Log {
        var messages: [Message] = []
        var clientIDs: [Int64: String] = [:]
        var lastOffset: Int64 = 0
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
            log.messages.append(message)
            log.lastOffset = message.offset
            if let clientMessageID { log.clientIDs[message.offset] = clientMessageID }
            if let keep = retention.policy(for: message.room.channel).maxMessagesPerRoom, log.messages.count > keep {
                for dropped in log.messages.prefix(log.messages.count - keep) { log.clientIDs[dropped.offset] = nil }
                log.messages.removeFirst(log.messages.count - keep)
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
            let end = before.map { bound in log.messages.partitionPoint { $0.offset < bound } } ?? log.messages.count
            let counted = max(0, end - limit)
            let start = MessagePage.firstFitting(log.messages[counted..<end], maxBytes: maxBytes, size: \.approximateSize)
            return MessagePage(messages: Array(log.messages[start..<end]), hasMore: start > 0)
        }
        completion(.success(page))
    }

    public func deleteMessage(in room: RoomKey, offset: Int64, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        let found = rooms.withLock { rooms -> Bool in
            guard let messages = rooms[room]?.messages else { return false }
            let index = messages.partitionPoint { $0.offset < offset }
            guard index < messages.count, messages[index].offset == offset else { return false }
            rooms[room]!.messages[index] = messages[index].tombstone
            return true
        }
        completion(.success(found))
    }

    public func enforceRetention(nowMillis: Int64, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        if !retention.keepsEverything {
            rooms.withLock { rooms in
                for key in rooms.keys {
                    guard let age = retention.policy(for: key.channel).maxAgeMillis else { continue }
                    let cut = rooms[key]!.messages.partitionPoint { $0.timestampMillis < nowMillis - age }
                    for dropped in rooms[key]!.messages.prefix(cut) { rooms[key]!.clientIDs[dropped.offset] = nil }
                    rooms[key]!.messages.removeFirst(cut)
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
