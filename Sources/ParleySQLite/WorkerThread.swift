import ParleyCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A dedicated thread that drains a queue of jobs in bulk: `handle` gets every job queued
/// since the last call, in order, so the writer can commit them as one transaction.
final class WorkerThread<Job: Sendable>: Sendable {
    private final class Queue: Sendable {
        let state = Mutex<(jobs: [Job], stopping: Bool)>(([], false))
    }
    private let queue = Queue()
    private let wakeup: Semaphore
    private let finished: Semaphore
    let name: String
    /// Most jobs that may wait: past it ``submit(_:)`` refuses (every queue has a bound).
    let limit: Int

    /// `handle` runs on the new thread only; `idle` runs there when `idleMillis` pass with
    /// nothing queued.
    ///
    /// `gather`: when the last call handled at least `minJobs` jobs (jobs are arriving from
    /// many places at once) and fewer than `untilJobs` wait now, the thread waits `micros`
    /// for more before taking them, so one call (one group commit) takes several. A single
    /// caller waiting for each job in turn never sees a batch of two, so it never waits.
    init(name: String, idleMillis: Int, limit: Int = 1_000_000,
         gather: (minJobs: Int, untilJobs: Int, micros: Int)? = nil,
         handle: @escaping @Sendable ([Job]) -> Void,
         idle: @escaping @Sendable () -> Void = {}) {
        self.name = name
        self.limit = limit
        wakeup = Semaphore()
        finished = Semaphore()
        let queue = self.queue, wakeup = self.wakeup, finished = self.finished
        DetachedThread.start(name: name) {
            var lastBatch = 0
            // Swapped with the queue's buffer under the lock, so taking a batch allocates
            // nothing (see EventLoop.drainInbox).
            var jobs: [Job] = []
            while true {
                let signalled = wakeup.wait(timeoutMillis: idleMillis)
                if let gather, lastBatch >= gather.minJobs,
                   queue.state.withLock({ !$0.stopping && $0.jobs.count < gather.untilJobs }) {
                    usleep(UInt32(gather.micros))
                }
                let stopping = queue.state.withLock { state -> Bool in
                    swap(&jobs, &state.jobs)
                    return state.stopping
                }
                lastBatch = jobs.count
                if !jobs.isEmpty { handle(jobs) } else if !signalled { idle() }
                if stopping && jobs.isEmpty { break }
                jobs.removeAll(keepingCapacity: jobs.capacity <= 16_384)
            }
            finished.post()
        }
    }

    /// Queues a job; never blocks on the worker. False (the job is not queued) when
    /// ``limit`` jobs already wait.
    @discardableResult
    func submit(_ job: Job) -> Bool {
        let outcome = queue.state.withLock { state -> Bool? in
            guard state.jobs.count < limit else { return nil }
            state.jobs.append(job)
            return state.jobs.count == 1
        }
        guard let wasEmpty = outcome else { return false }
        if wasEmpty { wakeup.post() }
        return true
    }

    /// Jobs waiting now.
    var depth: Int { queue.state.withLock { $0.jobs.count } }

    /// Blocks the caller (another worker, never a loop) until fewer than `count` jobs wait:
    /// back-pressure from this thread to the one feeding it.
    func waitUntilFewer(than count: Int) {
        while depth >= count { usleep(200) }
    }

    /// Runs every queued job, then ends the thread and waits for it.
    func stop() {
        queue.state.withLock { $0.stopping = true }
        wakeup.post()
        finished.wait(timeoutMillis: -1)
    }
}

/// A counting semaphore over `sem_t` (Darwin: a mutex-polled fallback is not needed on Linux).
final class Semaphore: Sendable {
    // A heap pointer never moves; sem_* calls are thread-safe by definition.
    nonisolated(unsafe) private let semaphore: UnsafeMutablePointer<sem_t>

    init() {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    func post() { sem_post(semaphore) }

    /// Waits up to `timeoutMillis` (forever when negative); true when posted.
    @discardableResult
    func wait(timeoutMillis: Int) -> Bool {
        if timeoutMillis < 0 {
            while sem_wait(semaphore) != 0 {}
            return true
        }
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let nanos = Int(deadline.tv_nsec) + (timeoutMillis % 1000) * 1_000_000
        deadline.tv_sec += timeoutMillis / 1000 + nanos / 1_000_000_000
        deadline.tv_nsec = nanos % 1_000_000_000
        while true {
            if sem_timedwait(semaphore, &deadline) == 0 { return true }
            if errno != EINTR { return false }
        }
    }
}
