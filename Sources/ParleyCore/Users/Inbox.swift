import Synchronization

/// One of a user's conversations (a room or a direct room) as their inbox shows it.
public struct Conversation: Sendable, Equatable {
    public let room: RoomKey
    /// The users of a direct room; nil for other rooms.
    public var users: [String]? { DirectRoom.users(of: room.room) }
    public var readOffset: Int64
    public var unread: UnreadCount
    /// The newest message, in its current state (nil when the room has none).
    public var last: Message?
    /// When something last happened: the newest message's time, else when the user opened it.
    public var activityMillis: Int64

    public init(room: RoomKey, readOffset: Int64, unread: UnreadCount, last: Message?, activityMillis: Int64) {
        self.room = room
        self.readOffset = readOffset
        self.unread = unread
        self.last = last
        self.activityMillis = activityMillis
    }

    /// Newest activity first; ties by room name.
    public static func moreRecent(_ a: Conversation, _ b: Conversation) -> Bool {
        a.activityMillis != b.activityMillis ? a.activityMillis > b.activityMillis : a.room.room < b.room.room
    }

    /// A message `message` arrived in the room (live): the newest one, and unread unless the
    /// user sent it. An action changes the counts only as far as the next read says.
    public mutating func arrived(_ message: Message, for user: String, name: String) {
        guard message.offset > 0, !message.isEphemeral else { return }
        if !message.isAction {
            last = message
            activityMillis = max(activityMillis, message.timestampMillis)
        }
        if message.offset > readOffset { unread.add(message, for: user, name: name) }
    }
}

/// One page of a user's inbox, and what reading it cost.
public struct InboxRead: Sendable, Equatable {
    /// The newest conversations, newest activity first.
    public var conversations: [Conversation]
    /// Whether the user has more conversations than the page holds.
    public var hasMore: Bool
    /// Bytes of the messages read from the store to make the page: the newest message of
    /// every conversation the user has (not only the page's) and the messages its unread
    /// counts read. What whoever asked for the page is charged.
    public var bytesRead: Int

    public init(conversations: [Conversation], hasMore: Bool, bytesRead: Int) {
        self.conversations = conversations
        self.hasMore = hasMore
        self.bytesRead = bytesRead
    }
}

/// Reads a user's inbox from the stores: their conversations (``ReadStateStore``) with each
/// room's newest message and unread counts (``MessageStore``), newest activity first.
public struct InboxReader: Sendable {
    public let messages: any MessageStore
    public let reads: any ReadStateStore
    /// Most conversations one inbox page holds.
    public static let maxPage = 50

    public init(messages: any MessageStore, reads: any ReadStateStore) {
        self.messages = messages
        self.reads = reads
    }

    /// The newest `limit` (at most ``maxPage``) conversations of `user` in `channel`, and
    /// whether there are more. Reads the newest message of each of the user's conversations
    /// (at most ``ReadStateStore/maxRoomsPerUser``), then counts unread messages for the page
    /// only. `completion` runs once, on any thread.
    public func inbox(of user: String, name: String, in channel: String, limit: Int,
                      completion: @escaping @Sendable (Result<InboxRead, ParleyError>) -> Void) {
        let limit = max(0, min(limit, Self.maxPage))
        reads.marks(of: user, in: channel, limit: reads.maxRoomsPerUser) { [self] result in
            switch result {
            case .failure(let error): completion(.failure(error))
            case .success(let marks):
                guard !marks.isEmpty else { return completion(.success(InboxRead(conversations: [], hasMore: false, bytesRead: 0))) }
                gather(marks, { mark, done in latest(in: mark.room) { done($0.map { (mark, $0) }) } }) { result in
                    switch result {
                    case .failure(let error): completion(.failure(error))
                    case .success(let found):
                        let newest = found.reduce(0) { $0 + ($1.1?.approximateSize ?? 0) }
                        let ordered = found.map { mark, last in
                            Conversation(room: mark.room, readOffset: mark.offset, unread: UnreadCount(), last: last,
                                         activityMillis: last?.timestampMillis ?? mark.updatedMillis)
                        }.sorted(by: Conversation.moreRecent)
                        let page = Array(ordered.prefix(limit))
                        gather(page, { conversation, done in counted(conversation, of: user, name: name, done) }) { counted in
                            completion(counted.map { counted in
                                InboxRead(conversations: counted.map(\.conversation).sorted(by: Conversation.moreRecent),
                                          hasMore: ordered.count > limit,
                                          bytesRead: newest + counted.reduce(0) { $0 + $1.bytesRead })
                            })
                        }
                    }
                }
            }
        }
    }

    /// One conversation of `user` from their mark: its newest message and unread counts.
    public func conversation(_ mark: ReadMark, name: String, completion: @escaping @Sendable (Result<Conversation, ParleyError>) -> Void) {
        latest(in: mark.room) { [self] result in
            switch result {
            case .failure(let error): completion(.failure(error))
            case .success(let last):
                let conversation = Conversation(room: mark.room, readOffset: mark.offset, unread: UnreadCount(), last: last,
                                                activityMillis: last?.timestampMillis ?? mark.updatedMillis)
                counted(conversation, of: mark.user, name: name) { completion($0.map(\.conversation)) }
            }
        }
    }

    /// The unread count of `user` in `room` after `offset`, the room's newest offset being `lastOffset`.
    public func unread(of user: String, name: String, in room: RoomKey, after offset: Int64, lastOffset: Int64,
                       completion: @escaping @Sendable (Result<UnreadCount, ParleyError>) -> Void) {
        unreadRead(of: user, name: name, in: room, after: offset, lastOffset: lastOffset) { completion($0.map(\.count)) }
    }

    /// ``unread(of:name:in:after:lastOffset:completion:)`` with the bytes of the messages it read.
    private func unreadRead(of user: String, name: String, in room: RoomKey, after offset: Int64, lastOffset: Int64,
                            completion: @escaping @Sendable (Result<(count: UnreadCount, bytesRead: Int), ParleyError>) -> Void) {
        guard lastOffset > offset else { return completion(.success((UnreadCount(), 0))) }
        messages.messages(in: room, after: offset, limit: UnreadCounter.maxCounted, maxBytes: UnreadCounter.maxBytes) { result in
            completion(result.map { read in
                (UnreadCounter.count(read, for: user, name: name, lastOffset: lastOffset),
                 read.reduce(0) { $0 + $1.approximateSize })
            })
        }
    }

    private func latest(in room: RoomKey, _ completion: @escaping @Sendable (Result<Message?, ParleyError>) -> Void) {
        messages.messages(in: room, before: nil, limit: 1, maxBytes: UnreadCounter.maxBytes) { result in
            completion(result.map(\.messages.last))
        }
    }

    private func counted(_ conversation: Conversation, of user: String, name: String,
                         _ completion: @escaping @Sendable (Result<(conversation: Conversation, bytesRead: Int), ParleyError>) -> Void) {
        unreadRead(of: user, name: name, in: conversation.room, after: conversation.readOffset,
                   lastOffset: conversation.last?.offset ?? 0) { result in
            completion(result.map { count, bytesRead in
                var conversation = conversation
                conversation.unread = count
                return (conversation, bytesRead)
            })
        }
    }
}

/// Runs `work` for every item at once and completes with every result (in no set order), or
/// the first failure, once all are done.
public func gather<Item: Sendable, Value: Sendable>(_ items: [Item],
                                             _ work: (Item, @escaping @Sendable (Result<Value, ParleyError>) -> Void) -> Void,
                                             completion: @escaping @Sendable (Result<[Value], ParleyError>) -> Void) {
    guard !items.isEmpty else { return completion(.success([])) }
    let state = Mutex<(values: [Value], left: Int, failed: Bool)>(([], items.count, false))
    for item in items {
        work(item) { result in
            let finished = state.withLock { state -> Result<[Value], ParleyError>? in
                guard !state.failed else { return nil }
                switch result {
                case .failure(let error):
                    state.failed = true
                    return .failure(error)
                case .success(let value):
                    state.values.append(value)
                    state.left -= 1
                    return state.left == 0 ? .success(state.values) : nil
                }
            }
            if let finished { completion(finished) }
        }
    }
}
