import Dispatch
import Foundation
import Observation
import ParleyClient
import ParleyCore
#if canImport(Glibc)
import Glibc
#endif

/// `parley chat`: picks the full-screen client or the plain line mode and runs it on the main actor.
enum ChatCommand {
    static func run(_ arguments: [String]) -> Never {
        let options: ChatOptions
        do {
            guard let parsed = try ChatOptions.parse(arguments) else {
                FileHandle.standardOutput.write(Data((ChatOptions.usage + "\n").utf8))
                exit(0)
            }
            options = parsed
        } catch {
            FileHandle.standardError.write(Data("parley chat: \(error.message)\n\n\(ChatOptions.usage)\n".utf8))
            exit(2)
        }
        let fullScreen = !options.plain && isatty(0) == 1 && isatty(1) == 1
        Task { @MainActor in
            if fullScreen {
                await ChatScreen(options: options).run()
            } else {
                await PlainChat(options: options).run()
            }
        }
        dispatchMain()
    }

    @MainActor static func makeModel(_ options: ChatOptions) -> ChatRoomModel {
        var transport: (any ParleyTransport)?
        var uploader = FileUploader()
        if let caFile = options.caFile {
            var libuv = LibUVWebSocketTransport()
            libuv.trustedCertificatesFile = caFile
            transport = libuv
            uploader.trustedCertificatesFile = caFile
        }
        return ChatRoomModel(url: URL(string: options.url)!, channel: options.channel, room: options.room,
                             name: options.name, color: options.color, token: options.token, historyCount: options.history,
                             transport: transport, uploader: uploader, userID: options.user)
    }
}

/// Re-runs `body` (on the main actor) every time something it read from an `@Observable` changes.
@MainActor func observe(_ body: @escaping @MainActor () -> Void) {
    withObservationTracking(body) {
        Task { @MainActor in observe(body) }
    }
}

/// Blocking reads of fd 0 on their own thread, delivered as a stream (finished at EOF).
func standardInputChunks() -> AsyncStream<[UInt8]> {
    let (stream, continuation) = AsyncStream.makeStream(of: [UInt8].self)
    let thread = Thread {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            continuation.yield(Array(buffer[..<n]))
        }
        continuation.finish()
    }
    thread.start()
    return stream
}

/// Line mode for pipes and scripts: stdin lines are sent; others' messages go to stdout as
/// `NAME: TEXT`; notices and errors go to stderr. Exits 0 at EOF once every line is acknowledged.
@MainActor final class PlainChat {
    let options: ChatOptions
    let model: ChatRoomModel
    /// Every line printed (or skipped), as it was then, so a later edit, delete or reaction
    /// prints what changed.
    private var printed: [String: ChatLine] = [:]

    init(options: ChatOptions) {
        self.options = options
        model = ChatCommand.makeModel(options)
    }

    func run() async {
        do {
            try await model.start()
        } catch {
            FileHandle.standardError.write(Data("parley chat: \(error.message)\n".utf8))
            exit(1)
        }
        // History shown on join is not "received": skip what is already there.
        observe { [self] in printNew() }
        var pending: [UInt8] = []
        for await chunk in standardInputChunks() {
            pending += chunk
            while let newline = pending.firstIndex(of: 10) {
                var line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeFirst(newline + 1)
                if line.hasSuffix("\r") { line.removeLast() }
                await send(line)
            }
        }
        if !pending.isEmpty { await send(String(decoding: pending, as: UTF8.self)) }
        await model.stop()
        exit(0)
    }

    private func send(_ line: String) async {
        if line.hasPrefix("/upload ") {
            // Progress on stderr, a line per tenth.
            var shown = -1
            await ChatUpload.send(String(line.dropFirst("/upload ".count)), with: model) { progress in
                let tenth = Int(progress.fraction * 10)
                guard tenth != shown else { return }
                shown = tenth
                FileHandle.standardError.write(Data("* uploading \(tenth * 10)%\n".utf8))
            }
            return
        }
        if let answer = await ChatActions.run(line, with: model) {
            for part in answer.split(separator: "\n") { FileHandle.standardError.write(Data("* \(TerminalText.sanitized(String(part)))\n".utf8)) }
            return
        }
        do {
            try await model.send(line)
        } catch {
            FileHandle.standardError.write(Data("parley chat: not sent: \(error.message)\n".utf8))
        }
    }

    private func printNew() {
        for line in model.lines {
            if let old = printed[line.id] {
                guard old != line else { continue }
                printed[line.id] = line
                for change in ChatActions.changes(from: old, to: line, myName: model.name) {
                    FileHandle.standardOutput.write(Data("\(TerminalText.sanitized(change))\n".utf8))
                }
                continue
            }
            printed[line.id] = line
            switch line.kind {
            case .message(isMine: false):
                // A message with files: its caption (if any), then a line per file.
                let parts = (line.text.isEmpty && !line.attachments.isEmpty ? [] : [line.text]) + line.attachmentLines
                // Names and text come from other people: nothing in them may reach the terminal raw.
                let name = TerminalText.sanitized(line.heading)
                for part in parts { FileHandle.standardOutput.write(Data("\(name): \(TerminalText.sanitized(part))\n".utf8)) }
            case .notice:
                FileHandle.standardError.write(Data("* \(TerminalText.sanitized(line.text))\n".utf8))
            case .message(isMine: true), .history:
                break
            }
        }
        if case .disconnected(.rejected(let why)) = model.connection {
            FileHandle.standardError.write(Data("parley chat: rejected: \(TerminalText.sanitized(why))\n".utf8))
            exit(1)
        }
    }
}
