import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Raw mode, the alternate screen, and putting the terminal back however the program ends:
/// normal exit (atexit), Ctrl-C / SIGTERM / SIGHUP, or a crash (SIGSEGV, SIGABRT, a Swift trap).
enum Terminal {
    // Why `nonisolated(unsafe)` is safe: both are written once, on the main thread, in
    // `enterRawMode()` before any handler that reads them is installed, and never written again
    // except `rawActive`, which is only cleared by `restore()` — whose work is idempotent
    // (tcsetattr to the same saved state, the same escape bytes), so a signal handler racing a
    // normal exit at worst restores twice.
    nonisolated(unsafe) private static var saved = termios()
    nonisolated(unsafe) private static var rawActive = false

    /// Leaves the alternate screen, shows the cursor, resets colors.
    private static let leaveSequence: StaticString = "\u{1B}[0m\u{1B}[?25h\u{1B}[?1049l"

    /// Switches to raw mode and the alternate screen, and arranges for `restore()` on every exit.
    static func enterRawMode() -> Bool {
        guard tcgetattr(0, &saved) == 0 else { return false }
        var raw = saved
        raw.c_iflag &= ~tcflag_t(BRKINT | ICRNL | INPCK | ISTRIP | IXON)
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | IEXTEN | ISIG)
        raw.c_cflag |= tcflag_t(CS8)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        guard tcsetattr(0, TCSAFLUSH, &raw) == 0 else { return false }
        rawActive = true
        atexit { Terminal.restore() }
        for signal in [SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGABRT, SIGFPE] {
            Glibc.signal(signal) { received in
                Terminal.restore()
                Glibc.signal(received, SIG_DFL)
                raise(received)
            }
        }
        write("\u{1B}[?1049h\u{1B}[H\u{1B}[2J")
        return true
    }

    /// Puts the terminal back. Async-signal-safe: only write(2) and tcsetattr(3).
    static func restore() {
        guard rawActive else { return }
        rawActive = false
        _ = Glibc.write(1, leaveSequence.utf8Start, leaveSequence.utf8CodeUnitCount)
        _ = tcsetattr(0, TCSAFLUSH, &saved)
    }

    /// Rows and columns (24×80 when unknown).
    static func size() -> (rows: Int, columns: Int) {
        var size = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0, size.ws_col > 0 {
            return (Int(size.ws_row), Int(size.ws_col))
        }
        return (24, 80)
    }

    /// Writes all of `text` to fd 1.
    static func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(1, $0.baseAddress! + offset, $0.count - offset) }
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                return
            }
            offset += n
        }
    }

    /// Display width of a character: 0 for controls, 2 for wide East Asian and emoji, else 1.
    static func width(_ character: Character) -> Int {
        guard let scalar = character.unicodeScalars.first else { return 0 }
        let v = scalar.value
        if v < 0x20 || (0x7F..<0xA0).contains(v) { return 0 }
        if character.unicodeScalars.count > 1, character.unicodeScalars.contains(where: { $0.properties.isEmojiPresentation }) { return 2 }
        switch v {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
             0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
             0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x3FFFD:
            return 2
        default:
            return scalar.properties.isEmojiPresentation ? 2 : 1
        }
    }

    static func width(_ text: some StringProtocol) -> Int { text.reduce(0) { $0 + width($1) } }
}
