/// A page of stored messages, oldest first, and whether older ones are kept.
public struct MessagePage: Sendable, Equatable {
    public let messages: [Message]
    public let hasMore: Bool
    public init(messages: [Message], hasMore: Bool) {
        self.messages = messages
        self.hasMore = hasMore
    }

    /// The newest messages of this page that fit in `maxBytes` (``Message/approximateSize``),
    /// at least one; `hasMore` when any were left out.
    public func cut(toBytes maxBytes: Int) -> MessagePage {
        let start = MessagePage.firstFitting(messages, maxBytes: maxBytes, size: \.approximateSize)
        guard start > 0 else { return self }
        return MessagePage(messages: Array(messages[start...]), hasMore: true)
    }

    /// The oldest of `messages` (oldest first) that fit in `maxBytes` together, at least one.
    public static func prefixFitting(_ messages: [Message], maxBytes: Int) -> [Message] {
        guard maxBytes != .max else { return messages }
        var bytes = 0
        for (index, message) in messages.enumerated() {
            bytes += message.approximateSize
            if index > 0 && bytes > maxBytes { return Array(messages[..<index]) }
        }
        return messages
    }

    /// Where the newest-first walk over `messages` (oldest first) stops: the index of the
    /// oldest message that still fits in `maxBytes` with every newer one. A page always holds
    /// the newest message, however large.
    public static func firstFitting<C: RandomAccessCollection>(_ messages: C, maxBytes: Int, size: (Message) -> Int) -> C.Index
        where C.Element == Message {
        var start = messages.endIndex
        var bytes = 0
        while start > messages.startIndex {
            let next = messages.index(before: start)
            let grown = bytes + size(messages[next])
            if start != messages.endIndex && grown > maxBytes { break }
            bytes = grown
            start = next
        }
        return start
    }
}

/// A client-chosen message id (`message_id`) remembered for idempotent retries.
public struct RememberedPublish: Sendable, Equatable {
    public let room: RoomKey
    public let clientMessageID: String
    public let id: String
    public let offset: Int64
    public let timestampMillis: Int64
    public init(room: RoomKey, clientMessageID: String, id: String, offset: Int64, timestampMillis: Int64) {
        self.room = room
        self.clientMessageID = clientMessageID
        self.id = id
        self.offset = offset
        self.timestampMillis = timestampMillis
    }
}

/// What the hub needs from a store when it starts: where every room's offsets stand, and
/// the client message ids it must still recognise.
public struct StoreRecovery: Sendable, Equatable {
    public var lastOffsets: [RoomKey: Int64]
    public var recentPublishes: [RememberedPublish]
    public init(lastOffsets: [RoomKey: Int64] = [:], recentPublishes: [RememberedPublish] = []) {
        self.lastOffsets = lastOffsets
        self.recentPublishes = recentPublishes
    }
}

/// Where one room stands in a store: its last offset (0 when it never had a message) and the
/// client message ids it must still recognise.
public struct RoomRecovery: Sendable, Equatable {
    public var lastOffset: Int64
    public var recentPublishes: [RememberedPublish]
    public init(lastOffset: Int64 = 0, recentPublishes: [RememberedPublish] = []) {
        self.lastOffset = lastOffset
        self.recentPublishes = recentPublishes
    }
}

/// How long stored messages are kept, per room. nil keeps everything.
public struct StoreRetention: Sendable, Equatable {
    public var maxMessagesPerRoom: Int?
    public var maxAgeMillis: Int64?
    /// Channels with their own policy (a channel listed here ignores the server-wide one).
    public var channels: [String: ChannelRetention] = [:]

    public struct ChannelRetention: Sendable, Equatable {
        public var maxMessagesPerRoom: Int?
        public var maxAgeMillis: Int64?
        public init(maxMessagesPerRoom: Int? = nil, maxAgeMillis: Int64? = nil) {
            self.maxMessagesPerRoom = maxMessagesPerRoom
            self.maxAgeMillis = maxAgeMillis
        }
    }

    public init(maxMessagesPerRoom: Int? = nil, maxAgeMillis: Int64? = nil) {
        self.maxMessagesPerRoom = maxMessagesPerRoom
        self.maxAgeMillis = maxAgeMillis
    }
    public static let keepEverything = StoreRetention()

    /// The policy for one channel's rooms.
    public func policy(for channel: String) -> ChannelRetention {
        channels[channel] ?? ChannelRetention(maxMessagesPerRoom: maxMessagesPerRoom, maxAgeMillis: maxAgeMillis)
    }

    /// True when nothing is ever dropped.
    public var keepsEverything: Bool {
        maxMessagesPerRoom == nil && maxAgeMillis == nil
            && channels.values.allSatisfy { $0.maxMessagesPerRoom == nil && $0.maxAgeMillis == nil }
    }
}

/// Where room history lives. Completion-based so an event loop never blocks on it: every
/// call returns at once, and `completion` runs later on a thread of the store's choosing (or
/// before the call returns, when the store is in memory).
///
/// Contract (proved for every implementation by `MessageStoreContractTests`):
/// - `append` takes a message whose offset is exactly one more than the room's last stored
///   offset *counting appends still in flight*; anything else fails with `.conflict`, so a
///   room's stored offsets are always 1…n with no gap even after a failed write.
/// - Appends are applied in call order and their completions run in call order; a completion
///   with `.success` means the message survives a crash of the process.
/// - Reads see every append whose completion has run.
/// - ``deleteMessage(in:offset:completion:)`` leaves a tombstone in place: offsets stay 1…n.
/// - Actions (``Message/action``: edit, delete, react, unreact) are appended like messages,
///   and the same append applies the action to its target's current state
///   (``Message/applying(_:)``; a delete as ``deleteMessage(in:offset:completion:)``), all of
///   it or none. An action whose target the room does not have (any more) changes nothing.
/// - `messages(in:after:…)` (a resume) returns the log: every entry as it was appended,
///   actions included, except that deleted messages and the edits of them are tombstones.
///   `messages(in:before:…)` (history) returns messages only, each in its current state;
///   `limit` counts messages, and `hasMore` says whether an older message is kept.
public protocol MessageStore: AnyObject, Sendable {
    /// Stores `message` (never an ephemeral one), remembering `clientMessageID` for retries.
    func append(_ message: Message, clientMessageID: String?,
                completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void)

    /// Up to `limit` messages with an offset greater than `offset`, oldest first.
    func messages(in room: RoomKey, after offset: Int64, limit: Int,
                  completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void)

    /// As ``messages(in:after:limit:completion:)``, and only the oldest of them that fit in
    /// `maxBytes` together (counted as in ``messages(in:before:limit:maxBytes:completion:)``),
    /// at least one: a resume replays a page at a time. Stores bound the read itself; the
    /// default reads by count and cuts.
    func messages(in room: RoomKey, after offset: Int64, limit: Int, maxBytes: Int,
                  completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void)

    /// The newest `limit` messages with an offset below `before` (the newest of all when
    /// nil), oldest first, and whether older ones are kept.
    func messages(in room: RoomKey, before: Int64?, limit: Int,
                  completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void)

    /// As ``messages(in:before:limit:completion:)``, and also at most `maxBytes` of messages:
    /// the page walks back from the newest and ends before the first message that would take
    /// it past `maxBytes` (each counted as the store holds it: about its id, body and
    /// sender's data), with `hasMore`. It always holds at least one message when there is
    /// one, however large. Stores bound the read itself, so a page of huge messages is never
    /// loaded whole; the default reads the page by count and cuts it.
    func messages(in room: RoomKey, before: Int64?, limit: Int, maxBytes: Int,
                  completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void)

    /// Replaces the stored message at `offset` by its tombstone (``Message/tombstone``: same
    /// id, offset, time and sender, no body, `isDeleted`); every read returns the tombstone
    /// from then on. `true` when the room has a message there (also when it was deleted
    /// already), `false` when it never had one or retention dropped it. Applied in call order
    /// with appends.
    func deleteMessage(in room: RoomKey, offset: Int64, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void)

    /// The message `id` of `room` in its current state; nil when the room has none (never had,
    /// retention dropped it, or `id` is an action's). A store that keeps no actions fails
    /// with `.unavailable`, saying so: nothing can then reply, edit, delete or react.
    func message(withID id: String, in room: RoomKey, completion: @escaping @Sendable (Result<Message?, ParleyError>) -> Void)

    /// Drops what the retention policy no longer keeps (stores also do it on their own in
    /// the background); offsets are never reused.
    func enforceRetention(nowMillis: Int64, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void)

    /// Each room's last offset and the client message ids published at or after
    /// `clientMessageIDsSince` (Unix ms). Blocking, and it reads every room: for tools and
    /// tests, never on an event loop.
    func recover(clientMessageIDsSince: Int64) throws(ParleyError) -> StoreRecovery

    /// One room's last offset (counting appends already made, in call order) and its client
    /// message ids published at or after `clientMessageIDsSince`, the newest
    /// ``SingleNodeBroker/maxRememberedPerRoom`` of them at most, oldest first: what a broker
    /// needs before it assigns the room's next offset.
    func loadRoom(_ room: RoomKey, clientMessageIDsSince: Int64,
                  completion: @escaping @Sendable (Result<RoomRecovery, ParleyError>) -> Void)
}

extension MessageStore {
    public func messages(in room: RoomKey, after offset: Int64, limit: Int, maxBytes: Int,
                         completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        messages(in: room, after: offset, limit: limit) { result in
            completion(result.map { MessagePage.prefixFitting($0, maxBytes: maxBytes) })
        }
    }

    public func messages(in room: RoomKey, after offset: Int64, limit: Int, maxBytes: Int) async throws(ParleyError) -> [Message] {
        let result = await withCheckedContinuation { continuation in
            messages(in: room, after: offset, limit: limit, maxBytes: maxBytes) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    public func messages(in room: RoomKey, before: Int64?, limit: Int, maxBytes: Int,
                         completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        messages(in: room, before: before, limit: limit) { result in completion(result.map { $0.cut(toBytes: maxBytes) }) }
    }

    public func messages(in room: RoomKey, before: Int64?, limit: Int, maxBytes: Int) async throws(ParleyError) -> MessagePage {
        let result = await withCheckedContinuation { continuation in
            messages(in: room, before: before, limit: limit, maxBytes: maxBytes) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    public func append(_ message: Message, clientMessageID: String? = nil) async throws(ParleyError) {
        let result = await withCheckedContinuation { continuation in
            append(message, clientMessageID: clientMessageID) { continuation.resume(returning: $0) }
        }
        try result.get()
    }

    public func messages(in room: RoomKey, after offset: Int64, limit: Int) async throws(ParleyError) -> [Message] {
        let result = await withCheckedContinuation { continuation in
            messages(in: room, after: offset, limit: limit) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    public func messages(in room: RoomKey, before: Int64?, limit: Int) async throws(ParleyError) -> MessagePage {
        let result = await withCheckedContinuation { continuation in
            messages(in: room, before: before, limit: limit) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    public func deleteMessage(in room: RoomKey, offset: Int64) async throws(ParleyError) -> Bool {
        let result = await withCheckedContinuation { continuation in
            deleteMessage(in: room, offset: offset) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    public func message(withID id: String, in room: RoomKey) async throws(ParleyError) -> Message? {
        let result = await withCheckedContinuation { continuation in
            message(withID: id, in: room) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    public func enforceRetention(nowMillis: Int64) async throws(ParleyError) {
        let result = await withCheckedContinuation { continuation in
            enforceRetention(nowMillis: nowMillis) { continuation.resume(returning: $0) }
        }
        try result.get()
    }
}
