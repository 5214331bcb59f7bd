import Foundation
import ParleyCore
import ParleyLog
import Synchronization

/// The store as the server uses it: any ``MessageStore`` (SQLite, a test's fault injector, a
/// cluster's) with its appends timed and counted for `/metrics`, its failures logged (at
/// error, a flood summarised) and remembered for `/readyz`. Everything else passes through.
final class ObservedMessageStore: MessageStore {
    let wrapped: any MessageStore
    private let metrics: ServerMetrics
    private let logger: Logger
    private let throttle: LogThrottle
    /// The last append's outcome: nil after a success, else the failure and when (monotonic ms).
    private let lastFailure = Mutex<(error: ParleyError, atMillis: Int64)?>(nil)
    /// Whether `lastFailure` is set: a success after a success takes no lock.
    private let failing = Atomic<Bool>(false)

    init(_ wrapped: any MessageStore, metrics: ServerMetrics, logger: Logger, throttle: LogThrottle) {
        self.wrapped = wrapped
        self.metrics = metrics
        self.logger = logger
        self.throttle = throttle
    }

    /// The failure of the most recent append, if the most recent append failed within the
    /// last `withinMillis` (a store nobody writes to is not held unready forever).
    func recentFailure(withinMillis: Int64) -> ParleyError? {
        lastFailure.withLock { last in
            guard let last, MonotonicTime.milliseconds() - last.atMillis <= withinMillis else { return nil }
            return last.error
        }
    }

    func append(_ message: Message, clientMessageID: String?, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        let started = MonotonicTime.microseconds()
        metrics.storeQueueDepth.add(1)
        wrapped.append(message, clientMessageID: clientMessageID) { [self] result in
            metrics.storeQueueDepth.add(-1)
            metrics.storeCommit.observe(micros: Int(MonotonicTime.microseconds() - started))
            switch result {
            case .success:
                if failing.load(ordering: .relaxed) {
                    lastFailure.withLock { $0 = nil }
                    failing.store(false, ordering: .relaxed)
                }
            case .failure(let error):
                metrics.storeErrors.increment()
                metrics.publishesRefused.counter(.storeFailed).increment()
                lastFailure.withLock { $0 = (error, MonotonicTime.milliseconds()) }
                failing.store(true, ordering: .relaxed)
                throttle.log("store error", to: logger, .error, "store append failed",
                             metadata: ["room": .string(message.room.description), "offset": .int(Int(message.offset)),
                                        "error": .string(error.message), "code": .string(error.code.name)])
            }
            completion(result)
        }
    }

    func messages(in room: RoomKey, after offset: Int64, limit: Int,
                  completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        wrapped.messages(in: room, after: offset, limit: limit, completion: completion)
    }

    func messages(in room: RoomKey, after offset: Int64, limit: Int, maxBytes: Int,
                  completion: @escaping @Sendable (Result<[Message], ParleyError>) -> Void) {
        wrapped.messages(in: room, after: offset, limit: limit, maxBytes: maxBytes, completion: completion)
    }

    func messages(in room: RoomKey, before: Int64?, limit: Int,
                  completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        wrapped.messages(in: room, before: before, limit: limit, completion: completion)
    }

    func messages(in room: RoomKey, before: Int64?, limit: Int, maxBytes: Int,
                  completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) {
        wrapped.messages(in: room, before: before, limit: limit, maxBytes: maxBytes, completion: completion)
    }

    func deleteMessage(in room: RoomKey, offset: Int64, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void) {
        wrapped.deleteMessage(in: room, offset: offset) { [logger] result in
            if case .failure(let error) = result {
                logger.error("store delete failed", metadata: ["room": .string(room.description), "offset": .int(Int(offset)),
                                                               "error": .string(error.message)])
            }
            completion(result)
        }
    }

    func message(withID id: String, in room: RoomKey, completion: @escaping @Sendable (Result<Message?, ParleyError>) -> Void) {
        wrapped.message(withID: id, in: room, completion: completion)
    }

    func enforceRetention(nowMillis: Int64, completion: @escaping @Sendable (Result<Void, ParleyError>) -> Void) {
        wrapped.enforceRetention(nowMillis: nowMillis, completion: completion)
    }

    func recover(clientMessageIDsSince: Int64) throws(ParleyError) -> StoreRecovery {
        try wrapped.recover(clientMessageIDsSince: clientMessageIDsSince)
    }

    func loadRoom(_ room: RoomKey, clientMessageIDsSince: Int64,
                  completion: @escaping @Sendable (Result<RoomRecovery, ParleyError>) -> Void) {
        wrapped.loadRoom(room, clientMessageIDsSince: clientMessageIDsSince, completion: completion)
    }
}
