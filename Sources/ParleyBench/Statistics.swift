import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A latency histogram in microseconds with bounded memory and cheap merging: exact below
/// 1,024 µs, then log-linear buckets 1/512 of their value wide (under 0.2 % error), up to hours.
/// Percentiles use the nearest-rank definition; the maximum is kept exactly.
public struct LatencyHistogram: Sendable, Equatable {
    static let linear = 1024
    static let subBuckets = 512
    static let subBits = 9
    static let bucketCount = linear + subBuckets * 54

    private(set) var counts: [UInt64]
    /// Number of values recorded.
    public private(set) var count: UInt64 = 0
    /// The largest value recorded (µs), exact.
    public private(set) var max: UInt64 = 0
    /// The smallest value recorded (µs), exact.
    public private(set) var min: UInt64 = .max
    /// Sum of all values (µs), for the mean.
    public private(set) var sum: UInt64 = 0

    public init() { counts = [UInt64](repeating: 0, count: Self.bucketCount) }

    static func index(of value: UInt64) -> Int {
        if value < UInt64(linear) { return Int(value) }
        let log2 = 63 - value.leadingZeroBitCount
        let shift = log2 - subBits
        let sub = Int(value >> UInt64(shift)) - subBuckets
        return Swift.min(linear + (shift - 1) * subBuckets + sub, bucketCount - 1)
    }

    /// The middle of a bucket (the value itself in the exact range).
    static func value(at index: Int) -> UInt64 {
        if index < linear { return UInt64(index) }
        let shift = (index - linear) / subBuckets + 1
        let sub = UInt64((index - linear) % subBuckets + subBuckets)
        let low = sub << UInt64(shift)
        return low + (UInt64(1) << UInt64(shift)) / 2
    }

    /// Records one latency in microseconds.
    @inline(__always) public mutating func record(micros value: UInt64) {
        counts[Self.index(of: value)] &+= 1
        count &+= 1
        sum &+= value
        if value > max { max = value }
        if value < min { min = value }
    }

    /// Adds another histogram's values to this one.
    public mutating func merge(_ other: LatencyHistogram) {
        guard other.count > 0 else { return }
        for i in 0..<counts.count where other.counts[i] != 0 { counts[i] &+= other.counts[i] }
        count += other.count
        sum += other.sum
        max = Swift.max(max, other.max)
        min = Swift.min(min, other.min)
    }

    /// The nearest-rank percentile (`p` in 0...100) in microseconds: the smallest recorded value
    /// with at least p % of the values at or below it. 0 when empty.
    public func percentile(_ p: Double) -> UInt64 {
        guard count > 0 else { return 0 }
        if p >= 100 { return max }
        let rank = Swift.max(1, UInt64((p / 100 * Double(count)).rounded(.up)))
        var seen: UInt64 = 0
        for i in 0..<counts.count {
            seen += counts[i]
            if seen >= rank { return Swift.min(Swift.max(Self.value(at: i), min), max) }
        }
        return max
    }

    /// Mean in microseconds (0 when empty).
    public var mean: Double { count == 0 ? 0 : Double(sum) / Double(count) }
}

/// A growable set of small non-negative integers: which sequence numbers of one publisher one
/// receiver has seen. Detects duplicates as they arrive; loss is the sent count minus ``count``.
public struct SequenceTracker: Sendable, Equatable {
    private var words: [UInt64] = []
    /// Distinct sequence numbers seen.
    public private(set) var count = 0
    /// Arrivals of a sequence number already seen.
    public private(set) var duplicates = 0

    public init() {}

    /// Records `sequence`; returns false (and counts a duplicate) when it was seen before.
    @discardableResult
    @inline(__always) public mutating func record(_ sequence: Int) -> Bool {
        precondition(sequence >= 0, "sequence numbers start at 0")
        let word = sequence >> 6
        if word >= words.count {
            words.append(contentsOf: repeatElement(0, count: Swift.max(word + 1 - words.count, words.count)))
        }
        let bit = UInt64(1) << UInt64(sequence & 63)
        if words[word] & bit != 0 {
            duplicates += 1
            return false
        }
        words[word] |= bit
        count += 1
        return true
    }

    /// Whether `sequence` was seen.
    public func contains(_ sequence: Int) -> Bool {
        let word = sequence >> 6
        return word < words.count && words[word] & (UInt64(1) << UInt64(sequence & 63)) != 0
    }

    /// How many of `0..<sent` never arrived.
    public func missing(sent: Int) -> Int {
        var seenBelow = 0
        let fullWords = Swift.min(sent >> 6, words.count)
        for i in 0..<fullWords { seenBelow += words[i].nonzeroBitCount }
        if fullWords < words.count && sent & 63 != 0 {
            let mask = (UInt64(1) << UInt64(sent & 63)) - 1
            seenBelow += (words[fullWords] & mask).nonzeroBitCount
        }
        return sent - seenBelow
    }
}

/// CPU time of a process from `/proc/PID/stat` (Linux).
enum ProcessCPU {
    /// User + system CPU seconds of `pid` (this process when nil); nil when unreadable.
    static func seconds(pid: Int32?) -> Double? {
        let path = pid.map { "/proc/\($0)/stat" } ?? "/proc/self/stat"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces): state is field 3, so utime
        // (14) and stime (15) are the 12th and 13th after it.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return (user + system) / ticks
    }
}
