/// A compact JSON serializer that appends UTF-8 into one byte buffer.
///
/// Doors use it to encode a frame once and write the same bytes to every subscriber. Besides
/// ``write(_:)`` for whole values, it can build objects and arrays by hand and does the comma
/// bookkeeping:
///
/// ```swift
/// var w = JSONWriter()
/// w.beginObject()
/// w.key("type"); w.writeString("publish")
/// w.key("message"); w.write(body)
/// w.endObject()
/// ```
///
/// Value writers (`write`, `writeString`, `writeInt`, `writeBool`, `writeNull`,
/// `writeNumber`, `writeRawValue`, `beginObject`, `beginArray`) put the comma before an array
/// element themselves; ``key(_:)`` does it for object members. `writeRaw` appends
/// bytes verbatim and touches no bookkeeping.
public struct JSONWriter: Sendable {
    /// The output so far.
    public var bytes: [UInt8]

    /// The open objects and arrays, innermost last.
    private var frames = FrameStack()

    /// An empty writer with room for `capacity` bytes.
    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    // MARK: Whole values

    /// Appends `value` compactly: no whitespace, keys in order, numbers verbatim.
    public mutating func write(_ value: JSONValue) {
        beforeValue()
        append(value)
    }

    /// Appends `s` as a quoted JSON string.
    ///
    /// Escapes `"`, `\` and control characters (`\n`, `\t`, ... or `\u00XX`); everything else,
    /// non-ASCII included, is written as raw UTF-8.
    public mutating func writeString(_ s: String) {
        beforeValue()
        appendString(s)
    }

    /// Appends an integer.
    public mutating func writeInt(_ i: Int) {
        beforeValue()
        appendInt(i)
    }

    /// Appends `true` or `false`.
    public mutating func writeBool(_ b: Bool) {
        beforeValue()
        appendStatic(b ? "true" : "false")
    }

    /// Appends `null`.
    public mutating func writeNull() {
        beforeValue()
        appendStatic("null")
    }

    /// Appends a number's literal text.
    public mutating func writeNumber(_ n: JSONNumber) {
        beforeValue()
        bytes.append(contentsOf: n.text.utf8)
    }

    /// Appends an already serialized JSON value (e.g. a message body encoded once) in value
    /// position, with comma bookkeeping. The bytes are not checked.
    public mutating func writeRawValue(_ utf8: some Collection<UInt8>) {
        beforeValue()
        bytes.append(contentsOf: utf8)
    }

    /// Appends bytes verbatim, with no comma bookkeeping.
    public mutating func writeRaw(_ utf8: some Collection<UInt8>) {
        bytes.append(contentsOf: utf8)
    }

    /// Appends a static string's UTF-8 verbatim, with no comma bookkeeping.
    public mutating func writeRaw(_ s: StaticString) {
        appendStatic(s)
    }

    // MARK: Building by hand

    /// Opens an object (`{`).
    public mutating func beginObject() {
        beforeValue()
        bytes.append(UInt8(ascii: "{"))
        frames.push(isObject: true)
    }

    /// Writes a member's key and `:` (with a comma before it if needed); write the value next.
    public mutating func key(_ k: String) {
        if frames.depth > 0 {
            assert(frames.innermostIsObject, "JSONWriter.key(_:) outside an object")
            if frames.markElement() { bytes.append(UInt8(ascii: ",")) }
        }
        appendString(k)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Closes the innermost object (`}`).
    public mutating func endObject() {
        assert(frames.depth > 0 && frames.innermostIsObject, "JSONWriter.endObject() without beginObject()")
        frames.pop()
        bytes.append(UInt8(ascii: "}"))
    }

    /// Opens an array (`[`).
    public mutating func beginArray() {
        beforeValue()
        bytes.append(UInt8(ascii: "["))
        frames.push(isObject: false)
    }

    /// Closes the innermost array (`]`).
    public mutating func endArray() {
        assert(frames.depth > 0 && !frames.innermostIsObject, "JSONWriter.endArray() without beginArray()")
        frames.pop()
        bytes.append(UInt8(ascii: "]"))
    }

    // MARK: Internals

    @inline(__always)
    private mutating func beforeValue() {
        guard frames.depth > 0, !frames.innermostIsObject else { return }
        if frames.markElement() { bytes.append(UInt8(ascii: ",")) }
    }

    private mutating func appendStatic(_ s: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    private mutating func append(_ value: JSONValue) {
        switch value {
        case .null: appendStatic("null")
        case .bool(let b): appendStatic(b ? "true" : "false")
        case .number(let n): bytes.append(contentsOf: n.text.utf8)
        case .string(let s): appendString(s)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                append(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            bytes.append(UInt8(ascii: "{"))
            var first = true
            for entry in object.entries {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                appendString(entry.key)
                bytes.append(UInt8(ascii: ":"))
                append(entry.value)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private mutating func appendString(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            bytes.append(UInt8(ascii: "\""))
            var runStart = 0
            var i = 0
            let raw = UnsafeRawBufferPointer(utf8)
            while i < utf8.count {
                // Eight bytes that need no escape at a time (UTF-8 passes through as it is).
                while i &+ 8 <= utf8.count, !JSONBytes.needsEscape(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { i &+= 8 }
                guard i < utf8.count else { break }
                let at = i, b = utf8[at]
                i += 1
                guard b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<at]))
                runStart = at + 1
                bytes.append(UInt8(ascii: "\\"))
                switch b {
                case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                default:
                    bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    bytes.append(hexDigit(b >> 4))
                    bytes.append(hexDigit(b & 0xF))
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
            bytes.append(UInt8(ascii: "\""))
        }
    }

    @inline(__always)
    private func hexDigit(_ d: UInt8) -> UInt8 {
        d < 10 ? UInt8(ascii: "0") + d : UInt8(ascii: "a") + d - 10
    }

    /// Digits go right-to-left into a stack buffer, then one append: reversing a slice of
    /// `bytes` in place went through a slice accessor and cost ~850 instructions per integer
    /// (two per fan-out message: timestamp and offset).
    private mutating func appendInt(_ i: Int) {
        if i < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = i.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var position = 20
            repeat {
                position -= 1
                digits[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude != 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[position..<20]))
        }
    }
}

extension JSONValue {
    /// The compact UTF-8 serialization (see ``JSONWriter/write(_:)``).
    public func serialized() -> [UInt8] {
        var writer = JSONWriter()
        writer.write(self)
        return writer.bytes
    }

    /// The compact serialization as a `String`.
    public var jsonString: String {
        String(decoding: serialized(), as: UTF8.self)
    }
}

/// The writer's open objects and arrays: whether each is an object and has an element yet.
/// The first 64 levels are bits of two words, so a frame written by hand allocates nothing
/// for its bookkeeping; deeper levels (values written with ``JSONWriter/write(_:)`` nest
/// without it) go to an array.
private struct FrameStack: Sendable {
    private static let inlineLevels = 64
    private var objectBits: UInt64 = 0
    private var elementBits: UInt64 = 0
    private var deeper: [(isObject: Bool, hasElements: Bool)] = []
    private(set) var depth = 0

    mutating func push(isObject: Bool) {
        if depth < Self.inlineLevels {
            let bit: UInt64 = 1 << UInt64(depth)
            if isObject { objectBits |= bit } else { objectBits &= ~bit }
            elementBits &= ~bit
        } else {
            deeper.append((isObject, false))
        }
        depth += 1
    }

    mutating func pop() {
        depth -= 1
        if depth >= Self.inlineLevels { deeper.removeLast() }
    }

    var innermostIsObject: Bool {
        let level = depth - 1
        if level < Self.inlineLevels { return objectBits & (1 << UInt64(level)) != 0 }
        return deeper[level - Self.inlineLevels].isObject
    }

    /// Records an element in the innermost level; true when it already had one (a comma
    /// goes before the new one).
    mutating func markElement() -> Bool {
        let level = depth - 1
        if level < Self.inlineLevels {
            let bit: UInt64 = 1 << UInt64(level)
            defer { elementBits |= bit }
            return elementBits & bit != 0
        }
        defer { deeper[level - Self.inlineLevels].hasElements = true }
        return deeper[level - Self.inlineLevels].hasElements
    }
}
