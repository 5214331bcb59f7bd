/// What the line door should do with the bytes it has read so far.
public enum LineDecoderEvent: Equatable, Sendable {
    /// One complete message, without its `\n` or `\r\n`; never empty. Bytes are passed
    /// through as received (NUL, invalid UTF-8...): the door decides what to do with them.
    case line([UInt8])
    /// A line passed `maximumLength`; the rest of it is being discarded. The connection can
    /// carry on with the next line.
    case tooLong
}

/// Frames the line protocol's byte stream into messages.
///
/// A message ends at `\n` (a `\r` right before it is dropped), or, for the original iOS
/// client that writes `iam:Luke` with no newline, when the client goes quiet: the I/O layer
/// runs a short timer (~50 ms) whenever ``hasPendingBytes`` is true, restarts it on every
/// read, and calls ``quietPeriodElapsed()`` when it fires.
///
/// A pure state machine: no I/O, no timers, no callbacks, so it can be tested and fuzzed
/// byte by byte. Feeding the same bytes in any chunking gives the same events, as long as
/// no quiet period falls in between.
public struct LineDecoder: Sendable {
    private enum State: Sendable {
        case collecting
        /// After `.tooLong`: dropping bytes up to and including the next `\n`.
        case discarding
    }

    /// Longest accepted line in bytes, not counting the `\n` or `\r\n` that ends it.
    public let maximumLength: Int

    private var state = State.collecting
    /// The current partial line; never longer than `maximumLength` and never ending in the
    /// `\r` that may turn out to be half of `\r\n` (that one lives in `pendingCR`).
    private var buffer: [UInt8] = []
    private var pendingCR = false

    /// A decoder for lines of at most `maximumLength` bytes (16 KiB by default).
    public init(maximumLength: Int = 16 * 1024) {
        precondition(maximumLength > 0, "maximumLength must be positive")
        self.maximumLength = maximumLength
    }

    /// Whether bytes are waiting for a newline or a quiet period (or a too-long line is
    /// being discarded); the door arms the quiet timer only when this is true.
    public var hasPendingBytes: Bool {
        !buffer.isEmpty || pendingCR || state == .discarding
    }

    /// Takes the bytes of one read; returns the events they complete, in order.
    public mutating func feed(_ bytes: [UInt8]) -> [LineDecoderEvent] {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// Takes the bytes of one read; returns the events they complete, in order.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [LineDecoderEvent] {
        var events: [LineDecoderEvent] = []
        let end = bytes.count
        var i = 0

        if pendingCR, end > 0 {
            pendingCR = false
            // A `\r` not followed by `\n` is part of the line.
            if bytes[0] != newline { appendToBuffer(carriageReturnBytes, events: &events) }
        }

        while i < end {
            let newlineIndex = bytes[i..<end].firstIndex(of: newline)
            if state == .discarding {
                guard let newlineIndex else { return events }
                state = .collecting
                i = newlineIndex + 1
                continue
            }
            guard let newlineIndex else {
                var segment = UnsafeRawBufferPointer(rebasing: bytes[i..<end])
                if segment.last == carriageReturn {
                    pendingCR = true
                    segment = UnsafeRawBufferPointer(rebasing: segment.dropLast())
                }
                appendToBuffer(segment, events: &events)
                return events
            }
            var segment = UnsafeRawBufferPointer(rebasing: bytes[i..<newlineIndex])
            if segment.last == carriageReturn {
                segment = UnsafeRawBufferPointer(rebasing: segment.dropLast())
            }
            i = newlineIndex + 1
            if buffer.count + segment.count > maximumLength {
                clearBuffer()
                events.append(.tooLong)
            } else if buffer.isEmpty {
                if !segment.isEmpty { events.append(.line(Array(segment))) }
            } else {
                buffer.append(contentsOf: segment)
                events.append(.line(buffer))
                clearBuffer()
            }
        }
        return events
    }

    /// The client has been quiet for the quiet period: a pending partial line (not empty)
    /// becomes a message, and an ongoing discard of a too-long line ends silently.
    ///
    /// A trailing `\r` of the partial line is dropped, as it would be before `\n`.
    public mutating func quietPeriodElapsed() -> [LineDecoderEvent] {
        pendingCR = false
        if state == .discarding {
            state = .collecting
            return []
        }
        guard !buffer.isEmpty else { return [] }
        let line = buffer
        clearBuffer()
        return [.line(line)]
    }

    /// Appends part of a line that has no newline yet, switching to discarding (and
    /// reporting `.tooLong` once) if it would make the line too long.
    private mutating func appendToBuffer(_ bytes: UnsafeRawBufferPointer, events: inout [LineDecoderEvent]) {
        if buffer.count + bytes.count > maximumLength {
            clearBuffer()
            pendingCR = false
            state = .discarding
            events.append(.tooLong)
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    private mutating func appendToBuffer(_ bytes: [UInt8], events: inout [LineDecoderEvent]) {
        bytes.withUnsafeBytes { appendToBuffer($0, events: &events) }
    }

    private mutating func clearBuffer() {
        // Keep a small buffer for the next line, but give back the memory of a big one.
        if buffer.capacity > 4096 {
            buffer = []
        } else {
            buffer.removeAll(keepingCapacity: true)
        }
    }
}

private let newline = UInt8(ascii: "\n")
private let carriageReturn = UInt8(ascii: "\r")
private let carriageReturnBytes: [UInt8] = [carriageReturn]
