@testable import ParleyCore
import Testing

/// What may reach a terminal (ParleyCore/Support/TerminalText.swift).
struct TerminalTextTests {
    @Test(arguments: [
        ("plain text", "plain text"),
        ("tab\tkept", "tab\tkept"),
        ("zoë 👋 日本語 שלום", "zoë 👋 日本語 שלום"),
        ("\u{1B}[2J\u{1B}[Hcleared", "\u{FFFD}[2J\u{FFFD}[Hcleared"),           // CSI clear screen, home
        ("\u{1B}]0;pwned\u{7}title", "\u{FFFD}]0;pwned\u{FFFD}title"),          // OSC set title, BEL
        ("\u{1B}]8;;http://evil\u{1B}\\link", "\u{FFFD}]8;;http://evil\u{FFFD}\\link"),  // OSC 8 hyperlink, ST
        ("\u{9B}31mred", "\u{FFFD}31mred"),                                     // C1 CSI
        ("\u{90}dcs\u{9C}", "\u{FFFD}dcs\u{FFFD}"),                             // C1 DCS ... ST
        ("nul\u{0}del\u{7F}bs\u{8}", "nul\u{FFFD}del\u{FFFD}bs\u{FFFD}"),
        ("invoice\u{202E}fdp.exe", "invoice\u{FFFD}fdp.exe"),                   // right-to-left override
        ("\u{202A}\u{202B}\u{202C}\u{202D}", "\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}"),
        ("\u{2066}\u{2067}\u{2068}\u{2069}", "\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}"),  // isolates
        ("a\u{2028}b\u{2029}c", "a\u{FFFD}b\u{FFFD}c"),                         // line/paragraph separators
        ("one\ntwo\r\nthree\rfour", "one two three four"),                     // a line break is one space
        ("\r\n\r\n", "  "),
        ("\u{1B}\u{301}", "\u{FFFD}\u{301}"),                                   // ESC hidden in a grapheme
        ("\u{200F}rlm and \u{200D}zwj", "\u{200F}rlm and \u{200D}zwj"),        // marks and joiners are harmless
        ("\u{A0}nbsp \u{E9}", "\u{A0}nbsp \u{E9}"),                            // C2/E2 lead bytes that are fine
    ])
    func replacesWhatCouldDriveATerminal(_ input: String, _ expected: String) {
        #expect(TerminalText.sanitized(input) == expected, "\(input.debugDescription)")
    }

    /// Every scalar up to U+2FFF: the fast path never skips an unsafe one, and safe ones stay.
    @Test func fastPathAgreesWithTheRule() {
        for value in 0...0x2FFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let text = "a" + String(Character(scalar)) + "b"
            let unsafe = TerminalText.isUnsafe(scalar)
            if unsafe { #expect(TerminalText.mayNeedSanitizing(text), "U+\(String(value, radix: 16))") }
            let out = TerminalText.sanitized(text)
            #expect(out.unicodeScalars.allSatisfy { !TerminalText.isUnsafe($0) }, "U+\(String(value, radix: 16))")
            if !unsafe && scalar != "\n" && scalar != "\r" { #expect(out == text, "U+\(String(value, radix: 16))") }
        }
    }

    @Test func repairedInvalidUTF8StaysVisible() {
        let text = String(decoding: [0x61, 0xFF, 0x1B, 0x62] as [UInt8], as: UTF8.self)
        #expect(TerminalText.sanitized(text) == "a\u{FFFD}\u{FFFD}b")
    }
}
