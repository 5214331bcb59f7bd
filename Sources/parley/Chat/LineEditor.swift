/// A key press decoded from raw terminal bytes.
enum Key: Equatable {
    case character(Character)
    case enter, backspace, delete, left, right, up, down, home, end, pageUp, pageDown
    case interrupt          // Ctrl-C
    case endOfInput         // Ctrl-D
    case clearLine          // Ctrl-U
    case deleteWord         // Ctrl-W
    case redraw             // Ctrl-L
}

/// Turns raw terminal bytes into keys: UTF-8 sequences into characters, CSI / SS3 escape
/// sequences into arrows and friends. Bytes may arrive split anywhere.
struct KeyDecoder {
    private var pending: [UInt8] = []

    mutating func feed(_ bytes: [UInt8]) -> [Key] {
        pending += bytes
        var keys: [Key] = []
        var i = 0
        decoding: while i < pending.count {
            let byte = pending[i]
            switch byte {
            case 0x1B:
                guard i + 1 < pending.count else { break decoding }      // wait for the rest
                let next = pending[i + 1]
                if next == UInt8(ascii: "[") || next == UInt8(ascii: "O") {
                    // Parameters, then one final byte in 0x40...0x7E.
                    var j = i + 2
                    while j < pending.count, !(0x40...0x7E).contains(pending[j]) { j += 1 }
                    guard j < pending.count else {
                        if j - i > 16 { i = j; continue }                // garbage: drop it
                        break decoding
                    }
                    let parameters = String(decoding: pending[(i + 2)..<j], as: UTF8.self)
                    switch (pending[j], parameters) {
                    case (UInt8(ascii: "A"), _): keys.append(.up)
                    case (UInt8(ascii: "B"), _): keys.append(.down)
                    case (UInt8(ascii: "C"), _): keys.append(.right)
                    case (UInt8(ascii: "D"), _): keys.append(.left)
                    case (UInt8(ascii: "H"), _): keys.append(.home)
                    case (UInt8(ascii: "F"), _): keys.append(.end)
                    case (UInt8(ascii: "~"), "1"), (UInt8(ascii: "~"), "7"): keys.append(.home)
                    case (UInt8(ascii: "~"), "4"), (UInt8(ascii: "~"), "8"): keys.append(.end)
                    case (UInt8(ascii: "~"), "3"): keys.append(.delete)
                    case (UInt8(ascii: "~"), "5"): keys.append(.pageUp)
                    case (UInt8(ascii: "~"), "6"): keys.append(.pageDown)
                    default: break
                    }
                    i = j + 1
                } else {
                    i += 2                                                // Alt+key: ignored
                }
            case 0x0D, 0x0A: keys.append(.enter); i += 1
            case 0x7F, 0x08: keys.append(.backspace); i += 1
            case 0x03: keys.append(.interrupt); i += 1
            case 0x04: keys.append(.endOfInput); i += 1
            case 0x15: keys.append(.clearLine); i += 1
            case 0x17: keys.append(.deleteWord); i += 1
            case 0x0C: keys.append(.redraw); i += 1
            case 0x01: keys.append(.home); i += 1
            case 0x05: keys.append(.end); i += 1
            case 0x02: keys.append(.left); i += 1
            case 0x06: keys.append(.right); i += 1
            case 0x00..<0x20: i += 1
            default:
                let length = byte < 0x80 ? 1 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1
                guard i + length <= pending.count else { break decoding }
                let text = String(decoding: pending[i..<(i + length)], as: UTF8.self)
                for character in text { keys.append(.character(character)) }
                i += length
            }
        }
        pending.removeFirst(i)
        return keys
    }
}

/// The input line: characters, a cursor, and the history of sent lines (up/down).
struct LineEditor {
    private(set) var characters: [Character] = []
    private(set) var cursor = 0
    private var history: [String] = []
    private var historyIndex: Int?
    private var draft: [Character] = []

    var text: String { String(characters) }

    /// Applies an editing key; returns the line when Enter was pressed.
    mutating func apply(_ key: Key) -> String? {
        switch key {
        case .character(let character):
            characters.insert(character, at: cursor)
            cursor += 1
        case .backspace:
            if cursor > 0 {
                cursor -= 1
                characters.remove(at: cursor)
            }
        case .delete:
            if cursor < characters.count { characters.remove(at: cursor) }
        case .left: cursor = max(0, cursor - 1)
        case .right: cursor = min(characters.count, cursor + 1)
        case .home: cursor = 0
        case .end: cursor = characters.count
        case .clearLine:
            characters.removeFirst(cursor)
            cursor = 0
        case .deleteWord:
            var start = cursor
            while start > 0, characters[start - 1] == " " { start -= 1 }
            while start > 0, characters[start - 1] != " " { start -= 1 }
            characters.removeSubrange(start..<cursor)
            cursor = start
        case .up:
            guard !history.isEmpty else { break }
            if historyIndex == nil { draft = characters }
            let index = max(0, (historyIndex ?? history.count) - 1)
            historyIndex = index
            characters = Array(history[index])
            cursor = characters.count
        case .down:
            guard let index = historyIndex else { break }
            if index + 1 < history.count {
                historyIndex = index + 1
                characters = Array(history[index + 1])
            } else {
                historyIndex = nil
                characters = draft
            }
            cursor = characters.count
        case .enter:
            let line = text
            if !line.trimmingCharacters(in: .whitespaces).isEmpty, history.last != line { history.append(line) }
            characters = []
            cursor = 0
            historyIndex = nil
            draft = []
            return line
        default:
            break
        }
        return nil
    }
}
