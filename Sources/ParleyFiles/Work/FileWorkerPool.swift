import Dispatch
import ParleyCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A few threads that run file I/O and image work, so that no event loop ever blocks on a
/// disk or a decoder.
///
/// The queue is bounded: ``submit(_:)`` refuses with `busy` (HTTP 503) when it is full,
/// which is the back-pressure a door passes on to its client instead of buffering without
/// limit. Results go to a completion callback on the worker thread; a server hops back to
/// its connection's loop from there (`EventLoop.execute`).
///
/// A ``FileWorkerLane`` runs one upload's jobs (append chunk, append chunk, finish) in order,
/// one at a time, on whichever thread is free.
public final class FileWorkerPool: Sendable {
    /// Threads in the pool.
    public let threadCount: Int
    /// Jobs that may wait before ``submit(_:)`` refuses.
    public let queueLimit: Int

    private struct Queue {
        var jobs = FIFO<@Sendable () -> Void>()
        var stopping = false
        var waiting: Int { jobs.count }

        mutating func pop() -> (@Sendable () -> Void)? { jobs.popFirst() }
    }
    private final class SharedQueue: Sendable {
        let state = Mutex(Queue())
    }
    private let queue = SharedQueue()
    // Dispatch's semaphore: portable (macOS has no unnamed POSIX semaphores) and Sendable.
    private let wakeup = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// Starts `threads` worker threads (2 suits a small server: image work is CPU-bound).
    public init(threads: Int = 2, queueLimit: Int = 64, name: String = "parley-files") {
        precondition(threads > 0 && queueLimit > 0)
        threadCount = threads
        self.queueLimit = queueLimit
        for index in 0..<threads {
            let queue = self.queue, wakeup = self.wakeup, finished = self.finished
            DetachedThread.start(name: "\(name)-\(index)") {
                while true {
                    wakeup.wait()
                    let (job, stopping) = queue.state.withLock { q in (q.pop(), q.stopping) }
                    if let job {
                        job()
                    } else if stopping {
                        break
                    }
                }
                finished.signal()
            }
        }
    }

    /// Queues `job`; throws `busy` when the queue is full, or after ``shutdown()``.
    public func submit(_ job: @escaping @Sendable () -> Void) throws(FileError) {
        try enqueue(job, force: false)
    }

    /// Runs `work` on a worker and hands its result to `completion` (on the worker thread).
    /// Throws `busy` at once when the queue is full; `completion` is then never called.
    public func submit<T: Sendable>(_ work: @escaping @Sendable () throws(FileError) -> T,
                                    completion: @escaping @Sendable (Result<T, FileError>) -> Void) throws(FileError) {
        try submit {
            completion(Result { () throws(FileError) -> T in try work() })
        }
    }

    /// Runs `work` on a worker and returns its result (for async callers and tests).
    public func run<T: Sendable>(_ work: @escaping @Sendable () throws(FileError) -> T) async throws(FileError) -> T {
        let result: Result<T, FileError> = await withCheckedContinuation { continuation in
            do throws(FileError) {
                try submit(work) { continuation.resume(returning: $0) }
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        return try result.get()
    }

    /// A lane for jobs that must run in order, one at a time (one upload's chunks). A lane
    /// holds at most `limit` waiting jobs.
    public func makeLane(limit: Int = 16) -> FileWorkerLane {
        FileWorkerLane(pool: self, limit: limit)
    }

    /// Jobs waiting (not yet started).
    public var waitingJobs: Int { queue.state.withLock { $0.waiting } }

    /// Refuses new jobs, runs the queued ones, and waits for the threads to end.
    public func shutdown() {
        let alreadyStopping = queue.state.withLock { q in
            defer { q.stopping = true }
            return q.stopping
        }
        guard !alreadyStopping else { return }
        for _ in 0..<threadCount { wakeup.signal() }
        for _ in 0..<threadCount { finished.wait() }
    }

    /// `force` skips the limit: a lane's next job was already admitted through the lane.
    func enqueue(_ job: @escaping @Sendable () -> Void, force: Bool) throws(FileError) {
        let refusal: FileError? = queue.state.withLock { q in
            // A lane's next job still runs during shutdown: its thread is alive and will pick it up.
            if q.stopping && !force { return FileError(.busy, "the file workers are shutting down") }
            if !force && q.waiting >= queueLimit { return FileError(.busy, "too many file operations in progress") }
            q.jobs.append(job)
            return nil
        }
        if let refusal { throw refusal }
        wakeup.signal()
    }
}

/// Jobs that run in submission order, one at a time, on a ``FileWorkerPool``.
public final class FileWorkerLane: Sendable {
    private let pool: FileWorkerPool
    /// Jobs that may wait in this lane before ``submit(_:)`` refuses.
    public let limit: Int
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var running = false
    }
    private let state = Mutex(State())

    init(pool: FileWorkerPool, limit: Int) {
        self.pool = pool
        self.limit = limit
    }

    /// Queues `job` behind this lane's earlier jobs. Throws `busy` when the lane already
    /// holds ``limit`` jobs or the pool is full: a door then stops reading until earlier
    /// jobs complete.
    public func submit(_ job: @escaping @Sendable () -> Void) throws(FileError) {
        let start: Bool = try state.withLock { (s: inout State) throws(FileError) -> Bool in
            guard s.jobs.count < limit else { throw FileError(.busy, "too many chunks waiting for the disk") }
            s.jobs.append(job)
            if s.running { return false }
            s.running = true
            return true
        }
        guard start else { return }
        do throws(FileError) {
            try pool.enqueue({ self.runNext() }, force: false)
        } catch {
            state.withLock { s in
                s.jobs.removeAll()
                s.running = false
            }
            throw error
        }
    }

    /// Runs `work` in order and hands its result to `completion` (on the worker thread).
    public func submit<T: Sendable>(_ work: @escaping @Sendable () throws(FileError) -> T,
                                    completion: @escaping @Sendable (Result<T, FileError>) -> Void) throws(FileError) {
        try submit {
            completion(Result { () throws(FileError) -> T in try work() })
        }
    }

    /// Jobs queued in this lane, the running one included.
    public var pendingJobs: Int { state.withLock { $0.jobs.count } }

    private func runNext() {
        let job = state.withLock { $0.jobs.first }
        job?()
        let more = state.withLock { s -> Bool in
            if !s.jobs.isEmpty { s.jobs.removeFirst() }
            if s.jobs.isEmpty {
                s.running = false
                return false
            }
            return true
        }
        // Requeue rather than loop, so one busy upload cannot hold a thread from the others.
        if more { try? pool.enqueue({ self.runNext() }, force: true) }
    }
}
