import ParleyCore
import Synchronization

/// An in-memory store whose appends complete only when the test says so.
public final class GatedStore: MessageStore {
    public let inner = InMemoryMessageStore()
    /// History pages (`messages(in:before:…)`) wait for ``releasePages()`` too.
    public let gatesPages: Bool
    private let heldPages = Mutex<[@Sendable () -> Void]>([])
    public init(gatesPages: Bool = false) { self.gatesPages = gatesPages }

    /// Answers every held history page read, in order, on this thread.
    public func releasePages() {
        for read in heldPages.withLock({ held in defer { held = [] }; return held }) { read() }
    }

    public var heldPageReads: Int { heldPages.withLock { $0.count } }
    /// Appends waiting for ``release(_:)``.
    public var heldCount: Int { held.withLock { $0.count } }
    private let held = Mutex<[(Message, String?, @Sendable (Result<Void, ParleyError>) -> Void)]>([])

    public func append(_ message: Message, clientMessageID: String?, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        held.withLock { $0.append((message, clientMessageID, completion)) }
    }
    /// Completes the first `count` held appends, in order, on this thread.
    public func release(_ count: Int = .max) {
        let batch = held.withLock { held in
            let batch = Array(held.prefix(count))
            held.removeFirst(batch.count)
            return batch
        }
        for (message, id, completion) in batch { inner.append(message, clientMessageID: id, completion: completion) }
    }
    /// Fails the first `count` held appends with `error`, in order, on this thread.
    public func fail(_ count: Int = .max, with error: ParleyError) {
        let batch = held.withLock { held in
            let batch = Array(held.prefix(count))
            held.removeFirst(batch.count)
            return batch
        }
        for (_, _, completion) in batch { completion(.failure(error)) }
    }
    public func messages(in room: RoomKey, after offset: Int64, limit: Int, completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        inner.messages(in: room, after: offset, limit: limit, completion: completion)
    }

    public func messages(in room: RoomKey, after offset: Int64, limit: Int, maxBytes: Int,
                  completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        inner.messages(in: room, after: offset, limit: limit, maxBytes: maxBytes, completion: completion)
    }
    public func messages(in room: RoomKey, before: Int64?, limit: Int, completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        inner.messages(in: room, before: before, limit: limit, completion: completion)
    }

    public func messages(in room: RoomKey, before: Int64?, limit: Int, maxBytes: Int,
                  completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        guard gatesPages else { return inner.messages(in: room, before: before, limit: limit, maxBytes: maxBytes, completion: completion) }
        let inner = self.inner
        heldPages.withLock { $0.append { inner.messages(in: room, before: before, limit: limit, maxBytes: maxBytes, completion: completion) } }
    }
    public func deleteMessage(in room: RoomKey, offset: Int64, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        inner.deleteMessage(in: room, offset: offset, completion: completion)
    }
    public func message(withID id: String, in room: RoomKey, completion: @escaping @Sendable (Result<Message?, ParleyError>) -> Void) {
        inner.message(withID: id, in: room, completion: completion)
    }
    public func enforceRetention(nowMillis: Int64, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        inner.enforceRetention(nowMillis: nowMillis, completion: completion)
    }
    public func recover(clientMessageIDsSince: Int64) throws(ParleyError) -> StoreRecovery {
        try inner.recover(clientMessageIDsSince: clientMessageIDsSince)
    }
    public func loadRoom(_ room: RoomKey, clientMessageIDsSince: Int64, completion: @escaping @Sendable (Result<RoomRecovery, ParleyError>) -> Void) {
        inner.loadRoom(room, clientMessageIDsSince: clientMessageIDsSince, completion: completion)
    }
}

