import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard error, written by a thread of its own: a caller (an event loop) only queues the
/// line, so a slow reader of stderr (a full pipe, a busy journald) never stalls the server.
/// The queue is bounded; past it lines are dropped and counted, and the next line written says
/// how many were lost.
public final class StandardErrorOutput: LogOutput {
    private struct State {
        var lines: [[UInt8]] = []
        var bytes = 0
        var dropped = 0
        var flushes: [DispatchSemaphore] = []
    }
    private let state = Mutex(State())
    private let wakeup = DispatchSemaphore(value: 0)
    private let fileDescriptor: Int32
    /// Most bytes waiting to be written.
    public let maxQueuedBytes: Int

    /// Writes to `fileDescriptor` (standard error by default).
    public init(fileDescriptor: Int32 = 2, maxQueuedBytes: Int = 4 << 20) {
        self.fileDescriptor = fileDescriptor
        self.maxQueuedBytes = maxQueuedBytes
        let thread = Thread { [self] in run() }
        thread.name = "parley-log"
        thread.start()
    }

    public func write(_ line: [UInt8]) {
        let wake = state.withLock { state -> Bool in
            guard state.bytes + line.count <= maxQueuedBytes else {
                state.dropped += 1
                return false
            }
            state.lines.append(line)
            state.bytes += line.count
            return state.lines.count == 1
        }
        if wake { wakeup.signal() }
    }

    public func flush(timeoutMillis: Int) {
        let done = DispatchSemaphore(value: 0)
        state.withLock { $0.flushes.append(done) }
        wakeup.signal()
        _ = done.wait(timeout: .now() + .milliseconds(timeoutMillis))
    }

    private func run() {
        while true {
            wakeup.wait()
            let (lines, dropped, flushes) = state.withLock { state -> ([[UInt8]], Int, [DispatchSemaphore]) in
                defer {
                    state.lines.removeAll(keepingCapacity: true)
                    state.bytes = 0
                    state.dropped = 0
                    state.flushes.removeAll()
                }
                return (state.lines, state.dropped, state.flushes)
            }
            if dropped > 0 { writeAll(Array("log: \(dropped) lines dropped (standard error was not keeping up)\n".utf8)) }
            for line in lines { writeAll(line) }
            for flush in flushes { flush.signal() }
        }
    }

    private func writeAll(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { systemWrite(fileDescriptor, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return  // stderr is gone: nothing to tell
            }
            offset += n
        }
    }
}

#if canImport(Glibc)
private let systemWrite = Glibc.write
#elseif canImport(Darwin)
private let systemWrite = Darwin.write
#endif
