// This file and MultipartHeaders.swift use only the standard library: the fuzz target
// compiles them on their own (Fuzz/run.sh multipart).

/// Limits for one `multipart/form-data` body.
public struct MultipartLimits: Sendable, Hashable {
    /// The most bytes in one part's header block.
    public var maxHeaderBytes: Int
    /// The most parts.
    public var maxParts: Int
    /// The most bytes in the whole body, delimiters and headers included.
    public var maxTotalBytes: Int
    /// The most bytes before the first boundary (ignored by definition, but not unbounded).
    public var maxPreambleBytes: Int

    public init(maxHeaderBytes: Int = 8 * 1024, maxParts: Int = 16,
                maxTotalBytes: Int = 10 * 1024 * 1024 + 64 * 1024, maxPreambleBytes: Int = 1024) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxParts = maxParts
        self.maxTotalBytes = maxTotalBytes
        self.maxPreambleBytes = maxPreambleBytes
    }
}

/// Why a multipart body was refused.
public struct MultipartError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// Not valid multipart syntax.
        case malformed
        /// A part's header block is over ``MultipartLimits/maxHeaderBytes``.
        case headerTooLarge
        /// More than ``MultipartLimits/maxParts`` parts.
        case tooManyParts
        /// The body is over ``MultipartLimits/maxTotalBytes``.
        case tooLarge
        /// The input ended before the closing boundary.
        case truncated
    }
    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(message) [\(code.rawValue)]" }
}

/// What the parser saw; ``MultipartParser/feed(_:)`` returns them in order.
public enum MultipartEvent: Sendable, Hashable {
    /// A part starts; its body follows as `.body` chunks.
    case partBegin(MultipartPart)
    /// Some bytes of the current part's body. How a body is split into chunks depends on how
    /// the input arrived; the bytes do not.
    case body([UInt8])
    /// The current part is complete.
    case partEnd
    /// The closing boundary: the body is complete. Anything after it is ignored.
    case end
    /// The body is refused; the parser ignores all further input.
    case failed(MultipartError)
}

/// A `multipart/form-data` (RFC 7578) parser: an explicit state machine that owns no I/O.
///
/// Feed it the HTTP body in whatever pieces it arrives; it returns events, streaming each
/// part's body out as it comes (a file part never has to fit in memory: only a few bytes
/// that may begin a boundary are held back). Every size is bounded by ``MultipartLimits``.
///
/// ```swift
/// guard let boundary = MultipartParser.boundary(fromContentType: contentType) else { /* 400 */ }
/// var parser = MultipartParser(boundary: boundary)
/// for event in parser.feed(chunk) { ... }
/// for event in parser.finish() { ... }   // at the end of the HTTP body
/// ```
public struct MultipartParser: Sendable {
    private enum State: Sendable {
        /// Before the first boundary.
        case preamble
        /// After a boundary: `--` (the last one) or transport padding then CRLF.
        case afterBoundary
        /// In a part's header block.
        case headers
        /// In a part's body.
        case body
        /// After the closing boundary.
        case epilogue
        /// Refused.
        case failed
    }

    public let limits: MultipartLimits
    private var state = State.preamble
    /// `CRLF--boundary`: what ends a body.
    private let delimiter: [UInt8]
    /// Unconsumed input from `start` on.
    private var buffer: [UInt8]
    private var start = 0
    private var totalBytes = 0
    private var parts = 0
    /// Preamble bytes already dropped (they can no longer begin a boundary).
    private var preambleDropped = 0
    /// Where the header search resumes (it never rescans what it has looked at).
    private var headerScanned = 0

    /// A parser for parts separated by `boundary` (from ``boundary(fromContentType:)``).
    public init(boundary: String, limits: MultipartLimits = .init()) {
        self.limits = limits
        delimiter = Array("\r\n--".utf8) + Array(boundary.utf8)
        // The first boundary may open the body without a CRLF before it: pretend one was there.
        buffer = [13, 10]
    }

    /// The boundary parameter of a `multipart/form-data` Content-Type; `nil` if the type is
    /// another one or the boundary is missing or not valid under RFC 2046 (1 to 70
    /// characters from its set, not ending in a space).
    public static func boundary(fromContentType contentType: String) -> String? {
        guard let mediaType = MultipartHeaders.parseParameterized(contentType),
              mediaType.value.lowercased() == "multipart/form-data",
              let boundary = mediaType.parameter("boundary") else { return nil }
        let bytes = Array(boundary.utf8)
        guard (1...70).contains(bytes.count), bytes.last != UInt8(ascii: " ") else { return nil }
        let allowed = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=? ".utf8)
        guard bytes.allSatisfy(allowed.contains) else { return nil }
        return boundary
    }

    /// Whether the closing boundary has been seen.
    public var isComplete: Bool {
        if case .epilogue = state { return true }
        return false
    }

    /// Consumes `bytes` and returns what they completed.
    public mutating func feed(_ bytes: some Collection<UInt8>) -> [MultipartEvent] {
        var events: [MultipartEvent] = []
        if case .failed = state { return events }
        if case .epilogue = state {
            totalBytes += bytes.count
            if totalBytes > limits.maxTotalBytes { fail(.tooLarge, "the body is larger than \(limits.maxTotalBytes) bytes", &events) }
            return events
        }
        let allowed = limits.maxTotalBytes - totalBytes
        if bytes.count > allowed {
            // Parse what fits, then refuse: the events do not depend on how the input was split.
            buffer.append(contentsOf: bytes.prefix(allowed))
            totalBytes += allowed
            run(&events)
            if case .failed = state { return events }
            fail(.tooLarge, "the body is larger than \(limits.maxTotalBytes) bytes", &events)
            return events
        }
        buffer.append(contentsOf: bytes)
        totalBytes += bytes.count
        run(&events)
        return events
    }

    /// The input has ended: refuses a body that did not reach its closing boundary.
    public mutating func finish() -> [MultipartEvent] {
        var events: [MultipartEvent] = []
        switch state {
        case .epilogue, .failed: break
        default: fail(.truncated, "the body ended before its closing boundary", &events)
        }
        return events
    }

    // MARK: State machine

    private mutating func run(_ events: inout [MultipartEvent]) {
        while true {
            let progressed: Bool
            switch state {
            case .preamble: progressed = scanPreamble(&events)
            case .afterBoundary: progressed = scanAfterBoundary(&events)
            case .headers: progressed = scanHeaders(&events)
            case .body: progressed = scanBody(&events)
            case .epilogue:
                buffer.removeAll()
                start = 0
                return
            case .failed:
                return
            }
            if !progressed { break }
        }
        compact()
    }

    private mutating func scanPreamble(_ events: inout [MultipartEvent]) -> Bool {
        if let at = find(delimiter, from: start) {
            if preambleDropped + (at - start) - 2 > limits.maxPreambleBytes {
                fail(.malformed, "no boundary in the first \(limits.maxPreambleBytes) bytes", &events)
                return false
            }
            start = at + delimiter.count
            state = .afterBoundary
            return true
        }
        // Keep only what may still begin the delimiter.
        let keep = delimiter.count - 1
        let droppable = buffer.count - start - keep
        if droppable > 0 {
            preambleDropped += droppable
            start += droppable
        }
        if preambleDropped - 2 > limits.maxPreambleBytes {
            fail(.malformed, "no boundary in the first \(limits.maxPreambleBytes) bytes", &events)
        }
        return false
    }

    private mutating func scanAfterBoundary(_ events: inout [MultipartEvent]) -> Bool {
        var i = start
        guard i < buffer.count else { return false }
        if buffer[i] == UInt8(ascii: "-") {
            guard i + 1 < buffer.count else { return false }
            guard buffer[i + 1] == UInt8(ascii: "-") else {
                fail(.malformed, "expected -- or CRLF after a boundary", &events)
                return false
            }
            events.append(.end)
            state = .epilogue
            return true
        }
        // Transport padding: spaces and tabs before the CRLF (bounded like a header).
        while i < buffer.count && (buffer[i] == 32 || buffer[i] == 9) { i += 1 }
        if i - start > limits.maxHeaderBytes {
            fail(.headerTooLarge, "too much padding after a boundary", &events)
            return false
        }
        guard i < buffer.count else { return false }
        guard buffer[i] == 13 else {
            fail(.malformed, "expected CRLF after a boundary", &events)
            return false
        }
        guard i + 1 < buffer.count else { return false }
        guard buffer[i + 1] == 10 else {
            fail(.malformed, "expected CRLF after a boundary", &events)
            return false
        }
        start = i + 2
        headerScanned = start
        state = .headers
        return true
    }

    private mutating func scanHeaders(_ events: inout [MultipartEvent]) -> Bool {
        // An empty header block is a lone CRLF.
        guard buffer.count - start >= 2 else { return false }
        let blockEnd: Int
        let resume: Int
        if buffer[start] == 13 && buffer[start + 1] == 10 {
            blockEnd = start
            resume = start + 2
        } else if let at = find([13, 10, 13, 10], from: max(start, headerScanned - 3)) {
            blockEnd = at
            resume = at + 4
        } else {
            headerScanned = buffer.count
            if buffer.count - start > limits.maxHeaderBytes + 3 {
                fail(.headerTooLarge, "a part's headers are larger than \(limits.maxHeaderBytes) bytes", &events)
            }
            return false
        }
        guard blockEnd - start <= limits.maxHeaderBytes else {
            fail(.headerTooLarge, "a part's headers are larger than \(limits.maxHeaderBytes) bytes", &events)
            return false
        }
        guard parts < limits.maxParts else {
            fail(.tooManyParts, "more than \(limits.maxParts) parts", &events)
            return false
        }
        let part: MultipartPart
        switch MultipartHeaders.parsePart(buffer[start..<blockEnd]) {
        case .success(let parsed): part = parsed
        case .failure(let error):
            fail(error.code, error.message, &events)
            return false
        }
        parts += 1
        events.append(.partBegin(part))
        start = resume
        state = .body
        return true
    }

    private mutating func scanBody(_ events: inout [MultipartEvent]) -> Bool {
        if let at = find(delimiter, from: start) {
            if at > start { events.append(.body(Array(buffer[start..<at]))) }
            events.append(.partEnd)
            start = at + delimiter.count
            state = .afterBoundary
            return true
        }
        // Everything except a tail that may begin the delimiter is body.
        let safeEnd = buffer.count - (delimiter.count - 1)
        if safeEnd > start {
            events.append(.body(Array(buffer[start..<safeEnd])))
            start = safeEnd
        }
        return false
    }

    private mutating func fail(_ code: MultipartError.Code, _ message: String, _ events: inout [MultipartEvent]) {
        events.append(.failed(MultipartError(code, message)))
        state = .failed
        buffer = []
        start = 0
    }

    /// Drops consumed bytes so the buffer holds only what is still needed.
    private mutating func compact() {
        guard start > 0 else { return }
        if start >= buffer.count {
            buffer.removeAll(keepingCapacity: true)
        } else {
            buffer.removeFirst(start)
        }
        headerScanned = max(0, headerScanned - start)
        start = 0
    }

    /// The first position at or after `from` where `needle` starts, if it is complete in
    /// the buffer.
    private func find(_ needle: [UInt8], from: Int) -> Int? {
        let first = needle[0]
        let last = buffer.count - needle.count
        guard from <= last else { return nil }
        var i = from
        while i <= last {
            if buffer[i] == first {
                var j = 1
                while j < needle.count && buffer[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }
}
