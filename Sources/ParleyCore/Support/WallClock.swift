import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wall-clock time for timestamps and expiry, in milliseconds since the Unix epoch. Named
/// apart from the standard library's `Clock` (durations between instants), which it would
/// otherwise shadow in every module that imports ParleyCore; for deadlines and durations
/// use ``MonotonicTime``.
public protocol WallClock: Sendable {
    func nowMillis() -> Int64
}

/// The real clock.
public struct SystemWallClock: WallClock {
    public init() {}
    public func nowMillis() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}

/// A clock tests move by hand.
public final class ManualClock: WallClock {
    private let now: Mutex<Int64>
    public init(millis: Int64 = 1_700_000_000_000) { now = Mutex(millis) }
    public func nowMillis() -> Int64 { now.withLock { $0 } }
    public func advance(millis: Int64) { now.withLock { $0 += millis } }
}
