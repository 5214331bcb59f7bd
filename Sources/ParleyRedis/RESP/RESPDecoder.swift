/// Hard limits of a ``RESPDecoder``. A reply over any of them fails the decoder with
/// ``RedisError/Code/protocolViolation`` as soon as its header says so, before its bytes are
/// buffered.
public struct RESPDecoderLimits: Sendable, Equatable {
    /// Longest bulk string, blob error or verbatim string, in bytes.
    public var maxBulkLength: Int
    /// Most elements of one array, set or push, and most pairs of one map or attribute.
    public var maxAggregateLength: Int
    /// Deepest nesting of aggregates (an array in an array is depth 2).
    public var maxDepth: Int
    /// Longest line: a simple string, simple error, number or length header.
    public var maxLineLength: Int
    /// Most bytes one top-level value may take on the wire, everything nested included: the
    /// bound on what a reply still arriving holds in memory.
    public var maxValueBytes: Int

    public init(maxBulkLength: Int = 32 << 20, maxAggregateLength: Int = 1 << 20, maxDepth: Int = 32,
                maxLineLength: Int = 64 << 10, maxValueBytes: Int = 128 << 20) {
        self.maxBulkLength = maxBulkLength
        self.maxAggregateLength = maxAggregateLength
        self.maxDepth = maxDepth
        self.maxLineLength = maxLineLength
        self.maxValueBytes = maxValueBytes
    }
}

/// Turns a byte stream from Redis into ``RedisValue``s, RESP2 and RESP3 alike.
///
/// An explicit state machine: ``feed(_:)`` consumes every byte at once, remembering where it
/// stands inside a line, a bulk payload or a nest of aggregates, so bytes may arrive in any
/// chunking (one at a time included) and nothing is parsed twice. Call ``next()`` until it
/// returns nil after each feed. Everything is checked strictly (CRLF line ends, digits only in
/// lengths and integers, known type bytes); the first violation fails the decoder for good:
/// ``next()`` returns the values completed before it, then throws it every time.
///
/// Not supported (Redis never sends them): RESP3 streamed strings and aggregates (`$?`, `*?`).
public struct RESPDecoder {
    public let limits: RESPDecoderLimits

    private enum Kind {
        case simpleString, simpleError, integer, bulkString, array, null, boolean, double,
             bigNumber, blobError, verbatimString, map, set, attribute, push
    }

    private enum State {
        /// Waiting for a value's type byte.
        case typeByte
        /// Collecting a line into `line`; `sawCR` after its `\r`.
        case line(Kind, sawCR: Bool)
        /// Collecting `remaining` payload bytes into `payload`.
        case payload(Kind, remaining: Int)
        /// After a payload: expecting `\r` then `\n`.
        case payloadEnd(Kind, sawCR: Bool)
        case failed
    }

    /// An aggregate whose elements are still arriving.
    private struct Aggregate {
        var kind: Kind
        var remaining: Int
        var items: [RedisValue]
        /// An attribute received at this level, for the next element.
        var attributes: [RedisPair]?
    }

    private var state = State.typeByte
    private var line: [UInt8] = []
    private var payload: [UInt8] = []
    private var stack: [Aggregate] = []
    private var topAttributes: [RedisPair]?
    /// Wire bytes of the top-level value in progress.
    private var valueBytes = 0
    private var ready: [RedisValue] = []
    private var readyHead = 0
    private var failure: RedisError?

    public init(limits: RESPDecoderLimits = RESPDecoderLimits()) {
        self.limits = limits
    }

    /// True once the decoder has failed (after ``next()`` has returned the values before it).
    public var hasFailed: Bool { failure != nil }

    /// Consumes bytes. Complete values wait for ``next()``.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        var index = 0
        let count = bytes.count
        while index < count {
            switch state {
            case .failed:
                return
            case .typeByte:
                let byte = bytes[index]
                index += 1
                guard account(1) else { return }
                guard let kind = Self.kind(of: byte) else {
                    fail("unknown RESP type byte 0x\(String(byte, radix: 16))")
                    return
                }
                line.removeAll(keepingCapacity: true)
                state = .line(kind, sawCR: false)
            case .line(let kind, let sawCR):
                if sawCR {
                    guard bytes[index] == UInt8(ascii: "\n") else { fail("CR not followed by LF"); return }
                    index += 1
                    guard account(1) else { return }
                    finishLine(kind)
                    continue
                }
                var end = index
                while end < count && bytes[end] != UInt8(ascii: "\r") && bytes[end] != UInt8(ascii: "\n") { end += 1 }
                let taken = end - index
                if line.count + taken > limits.maxLineLength {
                    fail("line longer than \(limits.maxLineLength) bytes")
                    return
                }
                line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<end]))
                guard account(taken) else { return }
                index = end
                if end < count {
                    guard bytes[end] == UInt8(ascii: "\r") else { fail("LF without CR in a line"); return }
                    index += 1
                    guard account(1) else { return }
                    state = .line(kind, sawCR: true)
                }
            case .payload(let kind, let remaining):
                let taken = min(remaining, count - index)
                payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + taken)]))
                index += taken
                // Counted when the header was read (so an oversized payload fails up front).
                state = remaining == taken ? .payloadEnd(kind, sawCR: false) : .payload(kind, remaining: remaining - taken)
            case .payloadEnd(let kind, let sawCR):
                let byte = bytes[index]
                index += 1
                if !sawCR {
                    guard byte == UInt8(ascii: "\r") else { fail("bulk payload longer than its length"); return }
                    state = .payloadEnd(kind, sawCR: true)
                } else {
                    guard byte == UInt8(ascii: "\n") else { fail("CR not followed by LF after a bulk payload"); return }
                    finishPayload(kind)
                }
            }
        }
    }

    /// Consumes bytes.
    public mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// The next complete value, nil when more bytes are needed; throws the protocol violation
    /// once every value before it has been returned.
    public mutating func next() throws(RedisError) -> RedisValue? {
        if readyHead < ready.count {
            let value = ready[readyHead]
            readyHead += 1
            if readyHead == ready.count {
                ready.removeAll(keepingCapacity: ready.capacity <= 1024)
                readyHead = 0
            }
            return value
        }
        if let failure { throw failure }
        return nil
    }

    // MARK: steps

    private static func kind(of byte: UInt8) -> Kind? {
        switch byte {
        case UInt8(ascii: "+"): return .simpleString
        case UInt8(ascii: "-"): return .simpleError
        case UInt8(ascii: ":"): return .integer
        case UInt8(ascii: "$"): return .bulkString
        case UInt8(ascii: "*"): return .array
        case UInt8(ascii: "_"): return .null
        case UInt8(ascii: "#"): return .boolean
        case UInt8(ascii: ","): return .double
        case UInt8(ascii: "("): return .bigNumber
        case UInt8(ascii: "!"): return .blobError
        case UInt8(ascii: "="): return .verbatimString
        case UInt8(ascii: "%"): return .map
        case UInt8(ascii: "~"): return .set
        case UInt8(ascii: "|"): return .attribute
        case UInt8(ascii: ">"): return .push
        default: return nil
        }
    }

    /// Adds wire bytes to the value in progress; false (and failed) over the limit.
    private mutating func account(_ bytes: Int) -> Bool {
        valueBytes += bytes
        if valueBytes > limits.maxValueBytes {
            fail("reply larger than \(limits.maxValueBytes) bytes")
            return false
        }
        return true
    }

    private mutating func fail(_ message: String) {
        state = .failed
        failure = RedisError(.protocolViolation, "invalid reply from Redis: \(message)")
        line = []
        payload = []
        stack = []
    }

    private mutating func finishLine(_ kind: Kind) {
        state = .typeByte
        let text = line[...]
        switch kind {
        case .simpleString:
            complete(.simpleString(String(decoding: text, as: UTF8.self)))
        case .simpleError:
            complete(.error(String(decoding: text, as: UTF8.self)))
        case .integer:
            guard let value = RESPNumber.parseInt64(text) else { fail("not an integer: \(Self.show(text))"); return }
            complete(.integer(value))
        case .null:
            guard text.isEmpty else { fail("null with content"); return }
            complete(.null)
        case .boolean:
            guard text.count == 1, text.first == UInt8(ascii: "t") || text.first == UInt8(ascii: "f") else {
                fail("not a boolean: \(Self.show(text))")
                return
            }
            complete(.boolean(text.first == UInt8(ascii: "t")))
        case .double:
            guard let value = RESPNumber.parseDouble(text) else { fail("not a double: \(Self.show(text))"); return }
            complete(.double(value))
        case .bigNumber:
            guard RESPNumber.isBigNumber(text) else { fail("not a big number: \(Self.show(text))"); return }
            complete(.bigNumber(String(decoding: text, as: UTF8.self)))
        case .bulkString, .blobError, .verbatimString:
            if kind == .bulkString, text.elementsEqual("-1".utf8) {
                complete(.null)
                return
            }
            guard let length = Self.length(text) else { fail("invalid length: \(Self.show(text))"); return }
            guard length <= limits.maxBulkLength else {
                fail("bulk string of \(length) bytes (limit \(limits.maxBulkLength))")
                return
            }
            guard account(length + 2) else { return }
            payload.removeAll(keepingCapacity: payload.capacity <= 64 << 10)
            payload.reserveCapacity(min(length, 64 << 10))
            state = length == 0 ? .payloadEnd(kind, sawCR: false) : .payload(kind, remaining: length)
        case .array, .map, .set, .push, .attribute:
            if kind == .array, text.elementsEqual("-1".utf8) {
                complete(.null)
                return
            }
            guard let length = Self.length(text) else { fail("invalid length: \(Self.show(text))"); return }
            guard length <= limits.maxAggregateLength else {
                fail("aggregate of \(length) elements (limit \(limits.maxAggregateLength))")
                return
            }
            // An empty aggregate is a level too: checked before it completes at once.
            guard stack.count < limits.maxDepth else {
                fail("aggregates nested deeper than \(limits.maxDepth)")
                return
            }
            if length == 0 {
                completeAggregate(Aggregate(kind: kind, remaining: 0, items: [], attributes: nil))
                return
            }
            let elements = kind == .map || kind == .attribute ? length * 2 : length
            var items: [RedisValue] = []
            // The declared length is untrusted: memory grows with what actually arrives.
            items.reserveCapacity(min(elements, 64))
            stack.append(Aggregate(kind: kind, remaining: elements, items: items, attributes: nil))
        }
    }

    private mutating func finishPayload(_ kind: Kind) {
        state = .typeByte
        switch kind {
        case .bulkString:
            complete(.bulkString(payload))
        case .blobError:
            complete(.error(String(decoding: payload, as: UTF8.self)))
        case .verbatimString:
            guard payload.count >= 4, payload[3] == UInt8(ascii: ":"), payload[0..<3].allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                fail("verbatim string without a three-letter format prefix")
                return
            }
            complete(.verbatimString(format: String(decoding: payload[0..<3], as: UTF8.self), text: Array(payload[4...])))
        default:
            fail("internal: payload for a line type")
        }
    }

    /// A value is complete: it becomes an element of the innermost aggregate (closing every
    /// aggregate it completes) or, at the top, ready.
    private mutating func complete(_ value: RedisValue) {
        var value = value
        while true {
            guard !stack.isEmpty else {
                if let attributes = topAttributes {
                    value = .attributed(attributes: attributes, value: value)
                    topAttributes = nil
                }
                ready.append(value)
                valueBytes = 0
                return
            }
            let top = stack.count - 1
            if let attributes = stack[top].attributes {
                value = .attributed(attributes: attributes, value: value)
                stack[top].attributes = nil
            }
            stack[top].items.append(value)
            stack[top].remaining -= 1
            if stack[top].remaining > 0 { return }
            let aggregate = stack.removeLast()
            if aggregate.kind == .attribute {
                attach(Self.pairs(aggregate.items))
                return
            }
            value = Self.build(aggregate)
        }
    }

    private mutating func completeAggregate(_ aggregate: Aggregate) {
        if aggregate.kind == .attribute {
            attach(Self.pairs(aggregate.items))
        } else {
            complete(Self.build(aggregate))
        }
    }

    /// An attribute applies to the next value at its own level; it is not an element.
    private mutating func attach(_ attributes: [RedisPair]) {
        if stack.isEmpty {
            topAttributes = (topAttributes ?? []) + attributes
        } else {
            stack[stack.count - 1].attributes = (stack[stack.count - 1].attributes ?? []) + attributes
        }
    }

    private static func build(_ aggregate: Aggregate) -> RedisValue {
        switch aggregate.kind {
        case .map: return .map(pairs(aggregate.items))
        case .set: return .set(aggregate.items)
        case .push: return .push(aggregate.items)
        default: return .array(aggregate.items)
        }
    }

    private static func pairs(_ items: [RedisValue]) -> [RedisPair] {
        stride(from: 0, to: items.count - 1, by: 2).map { RedisPair(key: items[$0], value: items[$0 + 1]) }
    }

    /// A non-negative decimal length (digits only).
    private static func length(_ text: ArraySlice<UInt8>) -> Int? {
        guard !text.isEmpty, text.count <= 18 else { return nil }
        var value = 0
        for byte in text {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    private static func show(_ text: ArraySlice<UInt8>) -> String {
        String(decoding: text.prefix(40), as: UTF8.self).debugDescription
    }
}

extension RESPNumber {
    static func isBigNumber(_ text: ArraySlice<UInt8>) -> Bool {
        var digits = text
        if let first = digits.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") { digits = digits.dropFirst() }
        return !digits.isEmpty && digits.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }
}
