/// Text from other people made safe to put on a terminal (the line door's nc/telnet users,
/// `parley chat`): nothing in it can move the cursor, clear the screen, ring the bell, set
/// the window title (ESC, CSI, OSC ...) or reorder what is shown around it.
public enum TerminalText {
    /// What an unsafe character is replaced by: visible, so nothing is silently hidden.
    public static let replacement: Unicode.Scalar = "\u{FFFD}"

    /// C0 controls except TAB, DEL, C1 controls, the bidirectional embeddings, overrides and
    /// isolates (U+202A–U+202E, U+2066–U+2069) and the line and paragraph separators
    /// (U+2028, U+2029).
    @inline(__always) public static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09: false
        case 0x00..<0x20, 0x7F..<0xA0: true
        case 0x2028...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// `text` with every unsafe character replaced by ``replacement``, except that a line
    /// break (LF, CR or CRLF) becomes one space: one message stays one line, so nobody can
    /// forge a line that looks like somebody else's.
    public static func sanitized(_ text: String) -> String {
        guard mayNeedSanitizing(text) else { return text }
        var scalars = String.UnicodeScalarView()
        var afterCR = false
        for scalar in text.unicodeScalars {
            defer { afterCR = scalar == "\r" }
            switch scalar {
            case "\n" where afterCR: continue
            case "\n", "\r": scalars.append(" ")
            case _ where isUnsafe(scalar): scalars.append(replacement)
            default: scalars.append(scalar)
            }
        }
        return String(scalars)
    }

    /// False when no byte can start an unsafe character: C0 and DEL are single bytes, C1 is
    /// `C2 80`–`C2 9F`, and the rest start with `E2`. Almost all text takes this path.
    @inline(__always) static func mayNeedSanitizing(_ text: String) -> Bool {
        text.utf8.contains { byte in (byte < 0x20 && byte != 0x09) || byte == 0x7F || byte == 0xC2 || byte == 0xE2 }
    }
}
