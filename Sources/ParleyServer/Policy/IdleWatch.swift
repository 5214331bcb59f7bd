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

    private static let origin = ContinuousClock.now

    /// Monotonic milliseconds since the first watch.
    private static func now() -> UInt64 {
        // `origin` first: read after the clock, the first call would see a negative time.
        let origin = self.origin
        let elapsed = ContinuousClock.now - origin
        let millis = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        return UInt64(max(0, millis))
    }

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
