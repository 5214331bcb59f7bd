/// Streaming UTF-8 validator (RFC 3629): feed bytes in any chunking; it reports an error as
/// soon as no continuation could make the input valid (overlongs, surrogates, code points
/// above U+10FFFF, stray continuation bytes). Used for text messages split across
/// fragments and for close reasons.
struct UTF8Validator: Sendable {
    /// Continuation bytes still expected for the current scalar.
    private var remaining: UInt8 = 0
    /// Allowed range for the next continuation byte (narrowed after E0, ED, F0, F4).
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    init() {}

    /// True when the bytes so far end on a scalar boundary.
    var isAtBoundary: Bool { remaining == 0 }

    mutating func reset() { self = UTF8Validator() }

    /// Feeds bytes; returns false as soon as the input is certainly invalid.
    mutating func validate(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let count = bytes.count
        var i = 0
        while i < count {
            if remaining == 0 {
                // ASCII fast path, eight bytes at a time.
                while i + 8 <= count {
                    let word = bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                    if word & 0x8080_8080_8080_8080 != 0 { break }
                    i += 8
                }
                if i >= count { break }
                let b = bytes[i]
                i += 1
                switch b {
                case 0x00...0x7F: continue
                case 0xC2...0xDF: remaining = 1; lower = 0x80; upper = 0xBF
                case 0xE0: remaining = 2; lower = 0xA0; upper = 0xBF
                case 0xE1...0xEC, 0xEE...0xEF: remaining = 2; lower = 0x80; upper = 0xBF
                case 0xED: remaining = 2; lower = 0x80; upper = 0x9F
                case 0xF0: remaining = 3; lower = 0x90; upper = 0xBF
                case 0xF1...0xF3: remaining = 3; lower = 0x80; upper = 0xBF
                case 0xF4: remaining = 3; lower = 0x80; upper = 0x8F
                default: return false
                }
            } else {
                let b = bytes[i]
                i += 1
                guard b >= lower && b <= upper else { return false }
                remaining -= 1
                lower = 0x80
                upper = 0xBF
            }
        }
        return true
    }

    /// Feeds bytes; returns false as soon as the input is certainly invalid.
    mutating func validate(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { validate($0) }
    }

    /// Whole-buffer check: valid and complete.
    static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var v = UTF8Validator()
        return v.validate(bytes) && v.isAtBoundary
    }

    /// Whole-buffer check: valid and complete.
    static func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { isValid($0) }
    }
}
