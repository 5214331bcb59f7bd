import Foundation

/// Milliseconds on a clock that never goes back (for deadlines, not timestamps).
@inline(__always)
func monotonicMillis() -> UInt64 {
    DispatchTime.now().uptimeNanoseconds / 1_000_000
}
