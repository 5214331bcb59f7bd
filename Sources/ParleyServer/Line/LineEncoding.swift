import ParleyCore
import ParleyIO

/// How room events look on the line door: `NAME:TEXT`, `NAME has joined`, `NAME has left`,
/// one per line; a message with files is its caption and then one `NAME:[image cat.jpg
/// 1.2 MB] URL` line per file. Typing signals are never shown there. Message actions:
/// `NAME (reply to BOB: "hello…"):TEXT`, `NAME (edited):TEXT`, `NAME deleted "hello…"`,
/// `NAME reacted 👍 to "hello…"`, `NAME took back 👍 on "hello…"` (the target as the
/// loop's ``LineTranscript`` knows it; "a message" when it does not).
enum LineEncoding {
    /// Name shown for messages with no sender (published by the server, e.g. over REST).
    static let serverName = "parley"

    /// Longest quote of a message in an action's line, in characters (then `…`).
    static let quoteCharacters = 30

    static func encode(_ event: RoomEvent, transcript: LineTranscript? = nil) -> IOBuffer? {
        switch event {
        case .message(let message):
            defer { transcript?.observe(message) }
            // Typing signals and deleted messages are never shown here.
            guard !message.isEphemeral, !message.isDeleted || message.action?.kind == .delete else { return nil }
            var name = singleLine(message.sender.map(\.displayName) ?? serverName)
            if let action = message.action {
                return IOBuffer(string: actionLine(action, by: name, body: message.body, transcript: transcript) + "\n")
            }
            if let reply = message.replyTo {
                name += " (" + (transcript?.entry(at: reply.offset).map { "reply to \($0.name): \(quote($0.text))" } ?? "reply to a message") + ")"
            }
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
        case .read, .conversationAdded:
            // Users of the line door get none of the users events (docs/protocols.md, "Users").
            return nil
        case .roomClosed:
            return IOBuffer(string: "the lobby was closed by an administrator; bye\n")
        }
    }

    private static func actionLine(_ action: MessageAction, by name: String, body: JSONValue, transcript: LineTranscript?) -> String {
        let target = transcript?.entry(at: action.target.offset).map { quote($0.text) } ?? "a message"
        switch action.kind {
        case .edit: return "\(name) (edited):\(text(of: body))"
        case .delete: return "\(name) deleted \(target)"
        case .react: return "\(name) reacted \(singleLine(action.emoji ?? "")) to \(target)"
        case .unreact: return "\(name) took back \(singleLine(action.emoji ?? "")) on \(target)"
        }
    }

    /// `"hello…"`: at most ``quoteCharacters`` characters of a message, quoted.
    static func quote(_ text: String) -> String {
        "\"" + (text.count > quoteCharacters ? String(text.prefix(quoteCharacters)) + "…" : text) + "\""
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
