import ParleyCore
import ParleyIO

/// How room events look on the line door: `NAME:TEXT`, `NAME has joined`, `NAME has left`,
/// one per line; a message with files is its caption and then one `NAME:[image cat.jpg
/// 1.2 MB] URL` line per file. Typing signals are never shown there.
enum LineEncoding {
    /// Name shown for messages with no sender (published by the server, e.g. over REST).
    static let serverName = "parley"

    static func encode(_ event: RoomEvent) -> IOBuffer? {
        switch event {
        case .message(let message):
            // Typing signals, deleted messages and actions (edits, deletes, reactions: not yet
            // worded for this door) are never shown here; a reply is a message.
            guard !message.isEphemeral, !message.isDeleted, !message.isAction else { return nil }
            let name = singleLine(message.sender.map(\.displayName) ?? serverName)
            // Files: the caption, then `[image cat.jpg 1.2 MB] URL`, one line each.
            if case .attachments(let files) = AttachmentMessage.classify(message.body) {
                return IOBuffer(string: files.lineDoorLines().map { "\(name):\(singleLine($0))\n" }.joined())
            }
            return IOBuffer(string: "\(name):\(text(of: message.body))\n")
        case .memberJoined(let member):
            return IOBuffer(string: "\(singleLine(member.displayName)) has joined\n")
        case .memberLeft(let member):
            return IOBuffer(string: "\(singleLine(member.displayName)) has left\n")
        case .messageDeleted:
            // A line already written cannot be taken back; the protocol has no way to say so.
            return nil
        case .roomClosed:
            return IOBuffer(string: "the lobby was closed by an administrator; bye\n")
        }
    }

    /// A string body as it is; any other JSON as compact JSON text. Made safe for a terminal
    /// either way (JSON strings may hold bidi overrides raw).
    static func text(of body: JSONValue) -> String {
        if case .string(let text) = body { return singleLine(text) }
        return singleLine(body.jsonString)
    }

    /// What other people wrote, as this door shows it: nc and telnet put it straight on a
    /// terminal, so control characters, bidi overrides and separators become U+FFFD, and a
    /// line break (which would let one user forge lines from another) a space
    /// (``TerminalText/sanitized(_:)``).
    @inline(__always) static func singleLine(_ text: String) -> String { TerminalText.sanitized(text) }
}
