import Dispatch
import ParleyCore
import ParleyFiles
import ParleyIO
import Synchronization

extension ServerFiles {
    /// Runs garbage collection every `seconds` on the worker threads (README.md, "Files and
    /// images": an upload goes when no retained message refers to it, after its grace period).
    func startCollecting(on loop: EventLoop, every seconds: Int, store: any MessageStore, clock: any WallClock) {
        let interval = UInt64(seconds) * 1000
        loop.execute {
            let timer = LoopTimer(loop: loop)
            timer.start(after: interval, repeating: interval, keepAlive: true) { [weak self] in
                guard let self, !self.collecting.exchange(true, ordering: .relaxed) else { return }
                try? self.pool.submit {
                    defer { self.collecting.store(false, ordering: .relaxed) }
                    _ = self.collectNow(store: store, nowMillis: clock.nowMillis())
                }
            }
        }
    }

    /// One garbage collection, now (blocking: worker threads, or tests). The message store
    /// drops what its retention no longer keeps first, so the answer to "is this message still
    /// kept" is the policy's, not the background trimming's.
    func collectNow(store: any MessageStore, nowMillis: Int64) -> FileCollectionReport {
        _ = wait { done in store.enforceRetention(nowMillis: nowMillis) { done($0) } }
        let report = collector.collect(nowMillis: nowMillis) { room in
            let first = wait { done in store.messages(in: room, after: 0, limit: 1) { done($0) } }
            switch first {
            case .success(let messages): return messages.first.map { .keepsFrom($0.offset) } ?? .empty
            case .failure, nil: return .unknown
            }
        }
        counted(report, nowMillis: nowMillis)
        return report
    }

    /// Runs `work` with a completion and waits for it (60 s at most: a stuck store must not
    /// hold a worker thread for ever). Worker threads only.
    private func wait<T: Sendable>(_ work: (@escaping @Sendable (T) -> Void) -> Void) -> T? {
        let box = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        work { value in
            box.withLock { $0 = value }
            done.signal()
        }
        guard done.wait(timeout: .now() + 60) == .success else { return nil }
        return box.withLock { $0 }
    }
}
