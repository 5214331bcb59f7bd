import ParleyCore
import ParleyIO

/// Closes a connection that sends no message for the idle timeout. Re-armed lazily: activity
/// only stamps a time, the timer checks it when it fires. Loop-confined.
final class IdleWatch {
    private let timer: LoopTimer
    private let timeoutMillis: UInt64
    private var lastActivity: UInt64
    private let onIdle: () -> Void

    init(loop: EventLoop, timeoutMillis: UInt64, onIdle: @escaping () -> Void) {
        timer = LoopTimer(loop: loop)
        self.timeoutMillis = timeoutMillis
        self.onIdle = onIdle
        lastActivity = IdleWatch.now()
        arm(after: timeoutMillis)
    }

    /// Monotonic milliseconds.
    private static func now() -> UInt64 { UInt64(MonotonicTime.milliseconds()) }

    private func arm(after milliseconds: UInt64) {
        timer.start(after: milliseconds) { [weak self] in self?.check() }
    }

    private func check() {
        let idle = IdleWatch.now() - lastActivity
        if idle >= timeoutMillis {
            onIdle()
        } else {
            arm(after: timeoutMillis - idle)
        }
    }

    /// The peer sent a message.
    func touch() { lastActivity = IdleWatch.now() }

    func stop() { timer.stop() }
}
