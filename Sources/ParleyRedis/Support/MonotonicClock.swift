import ParleyCore

/// ``MonotonicTime`` in the unsigned milliseconds the Redis client's deadlines count in.
@inline(__always)
func monotonicMillis() -> UInt64 {
    UInt64(MonotonicTime.milliseconds())
}
