/// The one rule for the name a person chats under, whatever door they came in by: the line
/// door's `iam:NAME`, Socket.IO's `connectUser(nickname)` and the native door's
/// `client_data.name` all pass through ``problem(with:)``. A name is shown to everybody (on
/// terminals too), so it must not be able to move a cursor, reorder the text around it, or
/// look empty.
public enum MemberName {
    /// Most characters (grapheme clusters) in a name.
    public static let maxCharacters = 64
    /// Most UTF-8 bytes in a name: one character may hold any number of combining marks, so
    /// the count of characters alone bounds nothing.
    public static let maxBytes = 256

    /// Nil when `name` is acceptable, else why not (a `.badRequest` the door words its way).
    public static func problem(with name: String) -> ParleyError? {
        if name.unicodeScalars.allSatisfy(\.properties.isWhitespace) {
            return ParleyError(.badRequest, "a name must not be empty or only spaces")
        }
        if name.utf8.count > maxBytes || name.count > maxCharacters {
            return ParleyError(.badRequest, "name too long (limit \(maxCharacters) characters, \(maxBytes) bytes)")
        }
        for scalar in name.unicodeScalars {
            if scalar == "\u{FFFD}" {
                // What invalid UTF-8 decodes to (the line door repairs its bytes this way).
                return ParleyError(.badRequest, "a name must be valid UTF-8")
            }
            if TerminalText.isUnsafe(scalar) {
                return ParleyError(.badRequest, "a name must not contain control characters or bidirectional overrides")
            }
        }
        return nil
    }

    /// Whether `name` passes ``problem(with:)``.
    public static func isValid(_ name: String) -> Bool { problem(with: name) == nil }

    /// Nil when a native handshake's `client_data` is acceptable: at most `maxBytes` of JSON
    /// (it is copied into every member list and join event of every room the client joins),
    /// and when it has a string `name`, that name passes ``problem(with:)``.
    public static func problem(withClientData clientData: JSONValue, maxBytes: Int) -> ParleyError? {
        var writer = JSONWriter()
        writer.write(clientData)
        if writer.bytes.count > maxBytes {
            return ParleyError(.tooLarge, "client_data too large (\(writer.bytes.count) bytes; limit \(maxBytes))")
        }
        if let name = clientData["name"]?.stringValue, let problem = problem(with: name) {
            return ParleyError(problem.code, "client_data.name: \(problem.message)")
        }
        return nil
    }
}
