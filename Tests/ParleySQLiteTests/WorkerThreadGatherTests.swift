import Foundation
import Synchronization
import Testing
@testable import ParleySQLite
import ParleyTestSupport

/// The writer's gathering: after a batch of two or more, the next wake waits a moment for
/// more jobs, so one group commit serves several; a lone caller that waits for each job in
/// turn never waits.
@Suite struct WorkerThreadGatherTests {
    @Test func concurrentJobsAreGatheredIntoOneBatch() throws {
        let batches = Mutex<[[Int]]>([])
        let release = Semaphore()
        let worker = WorkerThread<Int>(name: "gather-test", idleMillis: 60_000, gather: (2, 64, 300_000),
                                       handle: { jobs in
                                           batches.withLock { $0.append(jobs) }
                                           if jobs == [0] { release.wait(timeoutMillis: 10_000) }
                                       })
        defer { worker.stop() }
        // Job 0 holds the thread while jobs 1 and 2 queue: they are one batch of two, which
        // turns gathering on.
        worker.submit(0)
        try eventuallyBlocking("job 0 is being handled") { batches.withLock { $0 } == [[0]] }
        worker.submit(1)
        worker.submit(2)
        release.post()
        try eventuallyBlocking("the batch of two") { batches.withLock { $0 } == [[0], [1, 2]] }
        // The next job wakes the thread, which waits up to 300 ms: a job 30 ms later joins it.
        worker.submit(3)
        Thread.sleep(forTimeInterval: 0.03)
        worker.submit(4)
        try eventuallyBlocking("jobs 3 and 4") { batches.withLock { $0.flatMap { $0 } } == [0, 1, 2, 3, 4] }
        #expect(batches.withLock { $0.last } == [3, 4])
    }

    @Test func aLoneCallerWaitingForEachJobNeverWaits() throws {
        let done = Mutex<[Int]>([])
        // A 2-second gather: were it applied, five jobs in turn would take ten seconds.
        let worker = WorkerThread<Int>(name: "gather-lone", idleMillis: 60_000, gather: (2, 64, 2_000_000),
                                       handle: { jobs in done.withLock { $0.append(contentsOf: jobs) } })
        defer { worker.stop() }
        let start = Date()
        for job in 1...5 {
            worker.submit(job)
            try eventuallyBlocking("job \(job)", pollMillis: 1) { done.withLock { $0.last } == job }
        }
        #expect(Date().timeIntervalSince(start) < 1.5, "a batch of one must not make the next wake wait")
        #expect(done.withLock { $0 } == [1, 2, 3, 4, 5])
    }
}
