import ParleyCore
import ParleyFiles
import ParleyHTTP
import ParleyIO

/// Answers one download (`GET|HEAD /{channel}/files/{id}[/thumbnail]`), streaming the file
/// from disk: a chunk is read on a worker thread, written, and the next one is read once the
/// connection has drained below ``lowWater`` (``TCPConnection/whenDrained(below:_:)``), so a
/// download holds at most a few chunks in memory however slow the client.
///
/// Loop-confined. Headers come from ``DownloadResponse`` (ETag, Range, `nosniff`,
/// `Content-Security-Policy: sandbox`, `Content-Disposition: attachment` for anything that
/// is not a raster image).
final class DownloadStreamer {
    static let chunkBytes = 64 * 1024
    static let lowWater = 128 * 1024

    private let connection: TCPConnection
    private let core: ServerCore
    private let head: HTTPRequestHead
    private let keepAlive: Bool
    /// Called after each chunk (the session's idle timer measures progress, not the whole).
    private let progress: () -> Void
    /// Called once: with a response to send, or nil when everything was written here.
    private var done: ((HTTPResponse?) -> Void)?
    private var reader: FileReader?
    private var offset = 0
    private var remaining = 0

    private init(connection: TCPConnection, core: ServerCore, head: HTTPRequestHead, keepAlive: Bool,
                 progress: @escaping () -> Void, done: @escaping (HTTPResponse?) -> Void) {
        self.connection = connection
        self.core = core
        self.head = head
        self.keepAlive = keepAlive
        self.progress = progress
        self.done = done
    }

    /// Starts answering `head` if it is a download; false otherwise. `done` runs on the loop
    /// with a response for the session to send (an error), or nil once the file was written
    /// (and the connection closed if it is not kept alive).
    static func start(_ head: HTTPRequestHead, connection: TCPConnection, core: ServerCore, keepAlive: Bool,
                      progress: @escaping () -> Void, done: @escaping (HTTPResponse?) -> Void) -> Bool {
        guard let route = FileRoutes.download(head) else { return false }
        // Paced per address before anything is looked up on the file workers.
        if let refusal = core.downloadRate.refusal(of: connection, "downloads", counting: .downloadRate, in: core) {
            done(refusal)
            return true
        }
        let streamer = DownloadStreamer(connection: connection, core: core, head: head, keepAlive: keepAlive,
                                        progress: progress, done: done)
        streamer.begin(channel: route.channel, id: route.id, thumbnail: route.thumbnail)
        return true
    }

    private func begin(channel: String, id: String, thumbnail: Bool) {
        let access: DownloadAccess
        switch DownloadAccess.check(head, channel: channel, core: core) {
        case .success(let granted): access = granted
        case .failure(let refusal): return finish(refusal.response)
        }
        let registry = core.files.registry, store = core.files.store
        let needsRooms: Bool
        if case .token = access { needsRooms = true } else { needsRooms = false }
        let me = LoopBound(self, on: connection.loop)
        do throws(FileError) {
            try core.files.pool.submit({ () throws(FileError) -> Opened in
                guard let record = try registry.record(id: id, channel: channel) else {
                    throw FileError(.notFound, "no such file")
                }
                let rooms = needsRooms ? [record.room].compactMap { $0 } + registry.references(of: id, channel: channel).map(\.room) : []
                guard let stored = thumbnail ? record.thumbnail : record.file else {
                    throw FileError(.notFound, "this file has no thumbnail")
                }
                let reader = try store.open(stored.id)
                return Opened(record: record, stored: stored, rooms: rooms, reader: reader)
            }, completion: { result in
                me.execute { $0.opened(result, access: access, thumbnail: thumbnail) }
            })
        } catch {
            finish(FileRoutes.response(error))
        }
    }

    private struct Opened: Sendable {
        let record: UploadRecord
        let stored: StoredFile
        let rooms: [String]
        let reader: FileReader
    }

    private func opened(_ result: Result<Opened, FileError>, access: DownloadAccess, thumbnail: Bool) {
        let file: Opened
        switch result {
        case .success(let value): file = value
        case .failure(let error): return finish(FileRoutes.response(error))
        }
        if let refusal = access.refusal(rooms: file.rooms) { return finish(refusal) }
        // The thumbnail is offered under the file's name with its own extension.
        let name = thumbnail ? thumbnailName(file.record.name, file.stored.metadata.mime) : file.record.name
        // Authenticated downloads must not sit in shared caches.
        let cache = core.configuration.settings(ofChannel: file.record.channel)?.requireAuth == true
            ? "private, max-age=31536000, immutable" : "public, max-age=31536000, immutable"
        let answer = DownloadResponse(id: file.stored.id, metadata: file.stored.metadata, name: name,
                                      rangeHeader: head.headers["Range"], ifRange: head.headers["If-Range"],
                                      ifNoneMatch: head.headers["If-None-Match"], cacheControl: cache)
        guard connection.state == .open else { return finish(nil) }
        var headers = HTTPHeaders()
        for (name, value) in answer.headers { headers.add(name, value) }
        if answer.range == nil && !HTTPResponse.statusForbidsBody(answer.status) && headers["Content-Length"] == nil {
            headers.set("Content-Length", "0")
        }
        connection.write(HTTPResponse(status: answer.status, headers: headers).encoded(keepAlive: keepAlive))
        guard head.method != "HEAD", let range = answer.range else { return complete() }
        reader = file.reader
        offset = range.lowerBound
        remaining = range.count
        readNext()
    }

    private func readNext() {
        guard connection.state == .open, let reader else { return finish(nil) }
        guard remaining > 0 else { return complete() }
        let (start, count) = (offset, min(DownloadStreamer.chunkBytes, remaining))
        let me = LoopBound(self, on: connection.loop)
        do throws(FileError) {
            try core.files.pool.submit({ () throws(FileError) -> [UInt8] in try reader.read(offset: start, count: count) },
                                      completion: { result in me.execute { $0.read(result) } })
        } catch {
            // The workers are swamped: try again shortly rather than fail a download halfway.
            connection.loop.schedule(after: 20) { [weak self] in self?.readNext() }
        }
    }

    private func read(_ result: Result<[UInt8], FileError>) {
        guard connection.state == .open else { return finish(nil) }
        guard case .success(let bytes) = result, !bytes.isEmpty else {
            // The headers are out: all that is left is to cut the response short.
            connection.close(flush: false)
            return finish(nil)
        }
        offset += bytes.count
        remaining -= bytes.count
        connection.write(bytes)
        progress()
        connection.whenDrained(below: DownloadStreamer.lowWater) { [self] in readNext() }
    }

    private func complete() {
        reader = nil
        if !keepAlive { connection.close() }
        finish(nil)
    }

    private func finish(_ response: HTTPResponse?) {
        reader = nil
        guard let done else { return }
        self.done = nil
        done(response)
    }

    private func thumbnailName(_ name: String, _ mime: String) -> String {
        let stem = name.lastIndex(of: ".").map { name[..<$0] } ?? name[...]
        let ext = ImageFormat.allCases.first { $0.mime == mime }?.fileExtension ?? "bin"
        return "\(stem)-thumbnail.\(ext)"
    }
}
