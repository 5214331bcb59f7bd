/// Sustained abuse of a message rate: refusals counted over a fixed window. A connection
/// refused more than `factor` × its rate within the window is to be disconnected.
struct RateAbuseDetector {
    private(set) var threshold: Int
    private(set) var windowMillis: Int64
    private var windowStart: Int64 = 0
    private var refused = 0

    init(ratePerSecond: Double, factor: Double, windowMillis: Int64) {
        threshold = max(1, Int(ratePerSecond * factor))
        self.windowMillis = windowMillis
    }

    /// A new rate (a reload): the refusals counted in the current window stay counted.
    mutating func rerate(ratePerSecond: Double, factor: Double, windowMillis: Int64) {
        threshold = max(1, Int(ratePerSecond * factor))
        self.windowMillis = windowMillis
    }

    /// Records one refusal; true when this one crosses the line.
    mutating func refused(nowMillis: Int64) -> Bool {
        if nowMillis - windowStart > windowMillis {
            windowStart = nowMillis
            refused = 0
        }
        refused += 1
        return refused > threshold
    }
}
