/// The bench's message text: `#b:<publisher>:<sequence>:<monotonic ns>:` padded with `x` to the
/// requested size. Plain ASCII so no door escapes it, and findable in any door's framing
/// (native JSON, a line, a Socket.IO event) by scanning for `#b:`.
public enum BenchPayload {
    /// One stamped message.
    public struct Stamp: Sendable, Equatable {
        public let publisher: Int
        public let sequence: Int
        public let sentNanos: Int64
    }

    /// The message text for `stamp`, at least `size` bytes (longer only if the stamp itself is).
    public static func make(publisher: Int, sequence: Int, sentNanos: Int64, size: Int) -> [UInt8] {
        var bytes: [UInt8] = [35, 98, 58] // "#b:"
        bytes.reserveCapacity(Swift.max(size, 48))
        appendDecimal(UInt64(publisher), to: &bytes); bytes.append(58)
        appendDecimal(UInt64(sequence), to: &bytes); bytes.append(58)
        appendDecimal(UInt64(sentNanos), to: &bytes); bytes.append(58)
        if bytes.count < size { bytes.append(contentsOf: repeatElement(120, count: size - bytes.count)) }
        return bytes
    }

    @inline(__always) static func appendDecimal(_ value: UInt64, to bytes: inout [UInt8]) {
        if value == 0 { bytes.append(48); return }
        var digits: (UInt64, Int) = (value, 0)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(20)
        while digits.0 > 0 { buffer.append(UInt8(48 + digits.0 % 10)); digits.0 /= 10; digits.1 += 1 }
        bytes.append(contentsOf: buffer.reversed())
    }

    /// Finds the first stamp in `bytes` (a whole frame or line), nil when there is none.
    public static func find(in bytes: UnsafeRawBufferPointer) -> Stamp? {
        let n = bytes.count
        guard n >= 9 else { return nil }
        var i = 0
        while i + 3 <= n {
            if bytes[i] == 35 && bytes[i + 1] == 98 && bytes[i + 2] == 58 {
                var j = i + 3
                var fields: (UInt64, UInt64, UInt64) = (0, 0, 0)
                var ok = true
                for f in 0..<3 {
                    var value: UInt64 = 0
                    let start = j
                    while j < n, bytes[j] >= 48, bytes[j] <= 57 {
                        value = value &* 10 &+ UInt64(bytes[j] - 48)
                        j += 1
                    }
                    guard j > start, j < n, bytes[j] == 58 else { ok = false; break }
                    j += 1
                    switch f {
                    case 0: fields.0 = value
                    case 1: fields.1 = value
                    default: fields.2 = value
                    }
                }
                if ok {
                    return Stamp(publisher: Int(fields.0), sequence: Int(fields.1), sentNanos: Int64(fields.2))
                }
            }
            i += 1
        }
        return nil
    }

    public static func find(in bytes: [UInt8]) -> Stamp? {
        bytes.withUnsafeBytes { find(in: $0) }
    }
}

/// Whether `needle` occurs in `haystack`.
func contains(_ haystack: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
    let count = needle.count
    guard count > 0, haystack.count >= count else { return false }
    let first = needle[0]
    var i = 0
    while i + count <= haystack.count {
        if haystack[i] == first {
            var k = 1
            while k < count && haystack[i + k] == needle[k] { k += 1 }
            if k == count { return true }
        }
        i += 1
    }
    return false
}
