import Dispatch
import Foundation
import ParleyClient
import ParleyCore
#if canImport(Glibc)
import Glibc
#endif

/// The full-screen terminal client: a status bar, the scrolling transcript with names in
/// their member colors, a typing line, and an input line with editing and history.
@MainActor final class ChatScreen {
    let options: ChatOptions
    private(set) var model: ChatRoomModel
    private var editor = LineEditor()
    private var decoder = KeyDecoder()
    private var scrollBack = 0
    private var renderPending = false
    private var resizeSource: DispatchSourceSignal?
    private var quitting = false

    init(options: ChatOptions) {
        self.options = options
        model = ChatCommand.makeModel(options)
    }

    func run() async {
        guard Terminal.enterRawMode() else {
            FileHandle.standardError.write(Data("parley chat: cannot switch the terminal to raw mode\n".utf8))
            exit(1)
        }
        let resize = DispatchSource.makeSignalSource(signal: SIGWINCH, queue: .main)
        resize.setEventHandler { MainActor.assumeIsolated { self.scheduleRender() } }
        resize.resume()
        resizeSource = resize
        observe { [self] in
            // Read everything the screen shows so any change schedules a redraw.
            _ = (model.lines, model.members, model.typingText, model.connection, model.roomName, model.name, model.upload?.progress)
            scheduleRender()
        }
        render()
        do {
            try await model.start()
        } catch {
            Terminal.restore()
            FileHandle.standardError.write(Data("parley chat: \(error.message)\n".utf8))
            exit(1)
        }
        for await chunk in standardInputChunks() {
            for key in decoder.feed(chunk) { await handle(key) }
            scheduleRender()
        }
        await quit()
    }

    private func handle(_ key: Key) async {
        switch key {
        case .interrupt:
            await quit()
        case .endOfInput where editor.characters.isEmpty:
            await quit()
        case .pageUp:
            scrollBack += max(1, Terminal.size().rows - 4)
        case .pageDown:
            scrollBack = max(0, scrollBack - max(1, Terminal.size().rows - 4))
        case .redraw:
            Terminal.write("\u{1B}[2J")
        default:
            let before = editor.text
            if let line = editor.apply(key) {
                scrollBack = 0
                model.inputChanged("")
                await submit(line)
            } else if editor.text != before {
                model.inputChanged(editor.text.hasPrefix("/") ? "" : editor.text)
            }
        }
    }

    private func submit(_ line: String) async {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return }
        guard trimmed.hasPrefix("/") else {
            do { try await model.send(trimmed) } catch { model.note("not sent: \(error.message)") }
            return
        }
        if let answer = await ChatActions.run(trimmed, with: model) {
            for part in answer.split(separator: "\n") { model.note(String(part)) }
            return
        }
        let parts = trimmed.split(separator: " ", maxSplits: 1).map(String.init)
        let argument = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
        switch parts[0] {
        case "/quit", "/exit":
            await quit()
        case "/members":
            let names = model.members.map { $0.isMe ? "\($0.displayName) (you)" : $0.displayName }
            model.note("\(names.count) online: \(names.joined(separator: ", "))")
        case "/room" where !argument.isEmpty:
            do { try await model.switchRoom(to: argument) } catch { model.note("cannot join \(argument): \(error.message)") }
        case "/name" where !argument.isEmpty:
            do { try await model.rename(to: argument) } catch { model.note("cannot rename: \(error.message)") }
        case "/upload" where !argument.isEmpty:
            await ChatUpload.send(argument, with: model) { _ in }
        case "/help":
            model.note("commands: /members, /room NAME, /name NAME, /upload PATH [caption], \(ChatActions.help), /quit; PgUp/PgDn scroll")
        default:
            model.note("unknown command \(parts[0]) (try /help)")
        }
    }

    private func quit() async {
        guard !quitting else { return }
        quitting = true
        Terminal.restore()
        await model.stop()
        exit(0)
    }

    // MARK: drawing

    private func scheduleRender() {
        guard !renderPending else { return }
        renderPending = true
        Task { @MainActor in
            renderPending = false
            render()
        }
    }

    private func render() {
        guard !quitting else { return }
        let (rows, columns) = Terminal.size()
        var out = "\u{1B}[?25l\u{1B}[H"
        // Status bar.
        let online = model.members.count
        let unread = model.unread?.badge.map { " │ \($0) unread" } ?? ""
        let status = " #\(model.roomName) │ \(online) online\(unread) │ \(model.connection.label) │ \(model.name) "
        out += "\u{1B}[7m" + fit(status, columns) + "\u{1B}[0m"
        // Transcript.
        let paneHeight = max(1, rows - 3)
        var pane: [String] = []
        for line in model.lines { pane += format(line, columns: columns) }
        let maxScroll = max(0, pane.count - paneHeight)
        scrollBack = min(scrollBack, maxScroll)
        let end = pane.count - scrollBack
        let visible = Array(pane[max(0, end - paneHeight)..<end])
        for row in 0..<paneHeight {
            out += "\u{1B}[\(row + 2);1H\u{1B}[2K"
            if row < visible.count { out += visible[row] }
        }
        // Typing line.
        out += "\u{1B}[\(rows - 1);1H\u{1B}[2K"
        let typing = scrollBack > 0 ? "(\(scrollBack) lines up; PgDn to return)"
            : model.upload.map { ChatUpload.progressText($0.name, $0.progress) } ?? model.typingText
        if !typing.isEmpty { out += "\u{1B}[2;3m" + fit(typing, columns, pad: false) + "\u{1B}[0m" }
        // Input line, scrolled horizontally so the cursor stays visible.
        let prompt = "> "
        let room = max(1, columns - prompt.count - 1)
        var start = 0
        while Terminal.width(editor.characters[start..<editor.cursor].map { String($0) }.joined()) > room { start += 1 }
        var shown = ""
        var width = 0
        for character in editor.characters[start...] {
            let w = Terminal.width(character)
            if width + w > room { break }
            shown.append(character)
            width += w
        }
        let cursorColumn = prompt.count + Terminal.width(String(editor.characters[start..<editor.cursor])) + 1
        out += "\u{1B}[\(rows);1H\u{1B}[2K\u{1B}[1m\(prompt)\u{1B}[0m\(shown)"
        out += "\u{1B}[\(rows);\(cursorColumn)H\u{1B}[?25h"
        Terminal.write(out)
    }

    /// `text` cut (and padded) to `columns` display cells.
    private func fit(_ text: String, _ columns: Int, pad: Bool = true) -> String {
        let text = TerminalText.sanitized(text)
        var out = ""
        var width = 0
        for character in text {
            let w = Terminal.width(character)
            if width + w > columns { break }
            out.append(character)
            width += w
        }
        return pad ? out + String(repeating: " ", count: max(0, columns - width)) : out
    }

    /// One transcript line as screen rows: `HH:MM name: text`, the name in its member color
    /// (24-bit), bold with a `›` marker for my own messages, history dimmed, notices in italics.
    private func format(_ line: ChatLine, columns: Int) -> [String] {
        let time = Self.timeFormatter.string(from: line.date)
        if line.kind == .notice {
            return wrap("\(time) * \(TerminalText.sanitized(line.text))", columns: columns).map { "\u{1B}[2;3m\($0)\u{1B}[0m" }
        }
        let marker = line.isMine ? "›" : " "
        let head = "\(time)\(marker)"
        // What other people wrote, names included, must not move our cursor or reorder the text.
        let name = TerminalText.sanitized(line.name)
        // `(reply to bob: "…", edited)` after the name, in the text's style.
        let notes = TerminalText.sanitized(String(line.heading.dropFirst(line.name.count)))
        // A message with files: the caption (if any), then `[image cat.jpg 1.2 MB] URL` each.
        let parts = ((line.text.isEmpty && !line.attachments.isEmpty ? [] : [line.text]) + line.attachmentLines)
            .map(TerminalText.sanitized)
        let rows = wrap("\(head)\(name)\(notes): \(parts.first ?? "")", columns: columns)
        var colored = rows
        let (r, g, b) = RandomIdentity.rgb(line.color) ?? (200, 200, 200)
        let nameStyle = "\u{1B}[\(line.isMine ? "1;" : "")38;2;\(r);\(g);\(b)m"
        let dim = if case .history = line.kind { "\u{1B}[2m" } else { "" }
        if let first = rows.first, first.count >= head.count + name.count {
            let rest = first.dropFirst(head.count + name.count)
            colored[0] = "\u{1B}[2m\(head)\u{1B}[0m\(nameStyle)\(name)\u{1B}[0m\(dim)\(rest)\u{1B}[0m"
        }
        if !dim.isEmpty { for i in colored.indices.dropFirst() { colored[i] = dim + colored[i] + "\u{1B}[0m" } }
        for part in parts.dropFirst() {
            colored += wrap("      " + part, columns: columns).map { dim + $0 + "\u{1B}[0m" }
        }
        if !line.reactions.isEmpty {
            colored += wrap("      " + TerminalText.sanitized(line.reactionsText), columns: columns).map { "\u{1B}[2m" + $0 + "\u{1B}[0m" }
        }
        return colored
    }

    private func wrap(_ text: String, columns: Int) -> [String] {
        var rows: [String] = []
        var current = ""
        var width = 0
        for character in text {
            let w = Terminal.width(character)
            if width + w > columns, !current.isEmpty {
                rows.append(current)
                current = "      "
                width = 6
            }
            current.append(character)
            width += w
        }
        rows.append(current)
        return rows
    }

    private static let timeFormatter: DateFormatter = {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm"
        return formatter
    }()
}
