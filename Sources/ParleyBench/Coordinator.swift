import Foundation
import ParleyIO
import Synchronization

/// Runs a task on every loop of a group and collects the results, with a timeout.
enum LoopCalls {
    /// Runs `body` on each loop; returns the results in loop order, or nil when some loop did
    /// not answer within `timeout` seconds.
    static func onEach<T: Sendable>(_ group: EventLoopGroup, timeout: Double = 30,
                                    _ body: @escaping @Sendable (EventLoop) -> T) -> [T]? {
        let results = Mutex<[Int: T]>([:])
        let done = DispatchSemaphore(value: 0)
        for loop in group.loops {
            loop.execute {
                let value = body(loop)
                results.withLock { $0[loop.index] = value }
                done.signal()
            }
        }
        let deadline = DispatchTime.now() + timeout
        for _ in group.loops {
            if done.wait(timeout: deadline) == .timedOut { return nil }
        }
        let collected = results.withLock { $0 }
        return group.loops.map { collected[$0.index]! }
    }

    /// The bench state of `loop`. Loop thread only; `make` runs on first use.
    static func bench(_ loop: EventLoop, make: () -> BenchLoop) -> BenchLoop {
        loop.local(BenchLoop.self, make: make)
    }
}

/// Raises the soft open-files limit to the hard limit; returns the limit now in force.
public func raiseFileLimit() -> Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
    if limit.rlim_cur < limit.rlim_max {
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
    }
    return Int(clamping: limit.rlim_cur)
}

/// Resident memory of a process in KiB (`VmRSS` of /proc/PID/status), nil when unreadable.
public func residentKiB(pid: Int32) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.dropFirst(6).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
    }
    return nil
}

/// The summed resident memory of several processes in KiB; nil when there are none or one
/// cannot be read.
public func residentKiB(pids: [Int32]) -> Int? {
    guard !pids.isEmpty else { return nil }
    var total = 0
    for pid in pids {
        guard let kib = residentKiB(pid: pid) else { return nil }
        total += kib
    }
    return total
}

func sleepSeconds(_ seconds: Double) {
    if seconds > 0 { Thread.sleep(forTimeInterval: seconds) }
}
