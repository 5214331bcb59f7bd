import Foundation

/// Collects everything a child process writes to a pipe, on a thread of its own that reads the
/// descriptor with read(2) until end of file.
///
/// Not `FileHandle.readabilityHandler`: on Linux its dispatch source and `availableData` race
/// with the handle's release and corrupt the heap now and then (swift-corelibs-foundation
/// issue 3276, seen here as an abort in a CI run of the unit tests).
public final class PipeCollector: Sendable {
    private let text = Locked("")
    private let finished = DispatchSemaphore(value: 0)

    /// Starts reading `pipe`'s read end. The parent's copy of the write end must be closed
    /// (Process.run() does that for a pipe it hands to the child) for the reader to see EOF.
    public init(_ pipe: Pipe) {
        let text = self.text, finished = self.finished
        let thread = Thread {
            // The pipe (and so its descriptor) stays alive for as long as the thread reads it.
            let fd = pipe.fileHandleForReading.fileDescriptor
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    let chunk = String(decoding: buffer[0..<count], as: UTF8.self)
                    text.withLock { $0 += chunk }
                } else if count < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            finished.signal()
        }
        thread.start()
    }

    /// What has been read so far.
    public var value: String { text.value }

    /// Waits (at most `timeout` seconds) for end of file; true if it came.
    @discardableResult
    public func waitForEnd(timeout: Double) -> Bool {
        finished.wait(timeout: .now() + timeout) == .success
    }
}
