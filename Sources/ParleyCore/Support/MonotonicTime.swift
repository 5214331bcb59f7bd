#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Time that never goes back (`CLOCK_MONOTONIC`), for deadlines and durations, never for
/// timestamps (those are ``WallClock``'s). The one reading of it for the server, the Redis
/// client and the bench: values from different callers can be compared.
public enum MonotonicTime {
    @inline(__always)
    public static func nanoseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    @inline(__always)
    public static func microseconds() -> Int64 { nanoseconds() / 1_000 }

    @inline(__always)
    public static func milliseconds() -> Int64 { nanoseconds() / 1_000_000 }
}
