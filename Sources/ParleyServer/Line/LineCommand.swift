/// One message of the line protocol, as the classic stream-socket chat client sends it.
public enum LineCommand: Equatable, Sendable {
    /// `iam:NAME`: identify as `NAME` (surrounding whitespace trimmed; may be empty, the door
    /// decides whether that is acceptable).
    case iam(String)
    /// `msg:TEXT`: everything after the first `msg:`, colons and spaces kept.
    case msg(String)
    /// `auth:TOKEN`: a Parley extension for channels that require a token (trimmed).
    case auth(String)
    /// `reply:TEXT`: Parley's extension, a reply to the newest lobby message of someone else.
    case reply(String)
    /// `react:EMOJI` / `unreact:EMOJI`: a reaction on the newest lobby message of someone
    /// else, or taking it back (trimmed).
    case react(String)
    case unreact(String)
    /// `edit:TEXT`: the new text of this connection's newest lobby message.
    case edit(String)
    /// Anything else, as text.
    case unknown(String)

    /// Parses one line from ``LineDecoder`` (no newline).
    ///
    /// The prefix must start the line and is case-sensitive, as the original client sends
    /// it. Invalid UTF-8 is repaired with U+FFFD rather than rejected, so a garbled client
    /// still gets its message through. The prefix is matched on bytes, so a combining mark
    /// right after the colon cannot hide it.
    public static func parse(_ line: [UInt8]) -> LineCommand {
        if let rest = payload(of: line, after: iamPrefix) {
            return .iam(trimmingWhitespace(decode(rest)))
        }
        if let rest = payload(of: line, after: msgPrefix) {
            var text = rest
            if text.last == UInt8(ascii: "\r") { text = text.dropLast() }
            return .msg(decode(text))
        }
        if let rest = payload(of: line, after: authPrefix) {
            return .auth(trimmingWhitespace(decode(rest)))
        }
        if let rest = payload(of: line, after: replyPrefix) { return .reply(decode(droppingCR(rest))) }
        if let rest = payload(of: line, after: reactPrefix) { return .react(trimmingWhitespace(decode(rest))) }
        if let rest = payload(of: line, after: unreactPrefix) { return .unreact(trimmingWhitespace(decode(rest))) }
        if let rest = payload(of: line, after: editPrefix) { return .edit(decode(droppingCR(rest))) }
        return .unknown(decode(line[...]))
    }

    private static let iamPrefix = Array("iam:".utf8)
    private static let msgPrefix = Array("msg:".utf8)
    private static let authPrefix = Array("auth:".utf8)
    private static let replyPrefix = Array("reply:".utf8)
    private static let reactPrefix = Array("react:".utf8)
    private static let unreactPrefix = Array("unreact:".utf8)
    private static let editPrefix = Array("edit:".utf8)

    private static func droppingCR(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        bytes.last == UInt8(ascii: "\r") ? bytes.dropLast() : bytes
    }

    private static func payload(of line: [UInt8], after prefix: [UInt8]) -> ArraySlice<UInt8>? {
        guard line.starts(with: prefix) else { return nil }
        return line[prefix.count...]
    }

    private static func decode(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    private static func trimmingWhitespace(_ s: String) -> String {
        let scalars = s.unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        return String(scalars[first...last])
    }
}
