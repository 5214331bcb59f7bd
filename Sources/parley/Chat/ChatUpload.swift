import Foundation
import ParleyClient
import ParleyCore

/// `/upload PATH [caption]` in `parley chat`.
@MainActor enum ChatUpload {
    /// Splits `PATH [caption]` (a path with spaces goes in quotes), uploads the file and sends
    /// it; notes what happened in the transcript. `progress` sees each step of the upload.
    static func send(_ argument: String, with model: ChatRoomModel,
                     progress: @escaping @MainActor (UploadProgress) -> Void) async {
        let (path, caption) = split(argument)
        guard !path.isEmpty else {
            model.note("usage: /upload PATH [caption]")
            return
        }
        let expanded = (path as NSString).expandingTildeInPath
        guard FileManager.default.isReadableFile(atPath: expanded) else {
            model.note("cannot read \(path)")
            return
        }
        let watcher = Task { @MainActor in
            var last: UploadProgress?
            while !Task.isCancelled {
                if let step = model.upload?.progress, step != last {
                    last = step
                    progress(step)
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        defer { watcher.cancel() }
        do {
            try await model.send(file: URL(fileURLWithPath: expanded), caption: caption)
        } catch {
            model.note("not sent: \(error.message)")
        }
    }

    /// `cat.jpg` / `"my photo.jpg" look at this` → path and caption.
    static func split(_ argument: String) -> (path: String, caption: String?) {
        let text = argument.trimmingCharacters(in: .whitespaces)
        var path: Substring
        var rest: Substring
        if let quote = text.first, quote == "\"" || quote == "'", let end = text.dropFirst().firstIndex(of: quote) {
            path = text[text.index(after: text.startIndex)..<end]
            rest = text[text.index(after: end)...]
        } else if let space = text.firstIndex(of: " ") {
            path = text[..<space]
            rest = text[space...]
        } else {
            path = text[...]
            rest = ""
        }
        let caption = rest.trimmingCharacters(in: .whitespaces)
        return (String(path), caption.isEmpty ? nil : caption)
    }

    /// `uploading cat.jpg 45% (1.2 MB of 2.6 MB)`.
    static func progressText(_ name: String, _ progress: UploadProgress) -> String {
        "uploading \(name) \(Int(progress.fraction * 100))% (\(ByteCount.humanReadable(progress.sentBytes)) of \(ByteCount.humanReadable(progress.totalBytes)))"
    }
}
