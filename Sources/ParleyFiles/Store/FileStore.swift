import ParleyCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Content-addressed file storage under one directory.
///
/// Layout: `<directory>/files/ab/cdef…` holds the bytes whose SHA-256 is `abcdef…`, with
/// `…cdef….meta` beside it (``FileMetadata`` as JSON); `<directory>/files/tmp/` holds uploads
/// in progress, in the same filesystem so that committing is a rename. Every write reaches
/// the disk before it becomes visible: temporary file, fsync, rename, fsync of the directory.
/// The same bytes stored twice are stored once.
///
/// All calls block on disk I/O: run them on a ``FileWorkerPool``, never on an event loop.
/// Several processes (cluster nodes) may share one directory.
public final class FileStore: Sendable {
    /// The directory given at creation.
    public let directory: String
    let filesDirectory: String
    let temporaryDirectory: String

    /// Opens (creating as needed) the store under `directory`.
    public init(directory: String) throws(FileError) {
        self.directory = directory
        filesDirectory = directory + "/files"
        temporaryDirectory = filesDirectory + "/tmp"
        for path in [directory, filesDirectory, temporaryDirectory] {
            try POSIX.makeDirectory(path)
        }
    }

    // MARK: Writing

    /// Starts a streaming upload of at most `maxBytes` bytes.
    public func beginUpload(maxBytes: Int) throws(FileError) -> FileUpload {
        let path = temporaryDirectory + "/" + POSIX.randomName() + ".part"
        let fd = try POSIX.openFile(path, O_WRONLY | O_CREAT | O_EXCL, mode: 0o644)
        return FileUpload(path: path, fd: fd, maxBytes: maxBytes)
    }

    /// Makes a finished upload part of the store, under its content id, with these facts.
    ///
    /// When the content is already stored the upload is dropped (deduplicated), the existing
    /// metadata wins, and the file's modification time is refreshed so that garbage
    /// collection's grace period for unpublished uploads starts again.
    @discardableResult
    public func commit(_ file: PendingFile, mime: String, width: Int? = nil, height: Int? = nil,
                       thumbnail: ContentID? = nil) throws(FileError) -> StoredFile {
        guard file.take() else { throw FileError(.badRequest, "the upload was already committed or discarded") }
        defer { unlink(file.path) }  // a no-op after the rename
        let metadata = FileMetadata(mime: mime, size: file.size, width: width, height: height, thumbnail: thumbnail)
        let paths = self.paths(of: file.id)
        if try POSIX.makeDirectory(paths.directory) {
            try POSIX.syncDirectory(filesDirectory)
        }
        if POSIX.exists(paths.content), let existing = try? readMetadata(paths.metadata) {
            POSIX.touch(paths.content)
            return StoredFile(id: file.id, metadata: existing)
        }
        // Sidecar first: content without metadata would be unreadable, metadata without
        // content is just not found (and collected).
        try writeSidecar(metadata, to: paths.metadata)
        try POSIX.move(file.path, paths.content)
        try POSIX.syncDirectory(paths.directory)
        return StoredFile(id: file.id, metadata: metadata)
    }

    /// Stores bytes already in memory (a rendition, a thumbnail, a small upload).
    @discardableResult
    public func store(_ bytes: [UInt8], mime: String, width: Int? = nil, height: Int? = nil,
                      thumbnail: ContentID? = nil) throws(FileError) -> StoredFile {
        let upload = try beginUpload(maxBytes: bytes.count)
        try upload.append(bytes)
        let pending = try upload.finish()
        return try commit(pending, mime: mime, width: width, height: height, thumbnail: thumbnail)
    }

    // MARK: Reading

    /// Whether the content is stored.
    public func contains(_ id: ContentID) -> Bool {
        let paths = self.paths(of: id)
        return POSIX.exists(paths.content) && POSIX.exists(paths.metadata)
    }

    /// The facts about stored content; `notFound` if it is not stored.
    public func metadata(of id: ContentID) throws(FileError) -> FileMetadata {
        let paths = self.paths(of: id)
        guard POSIX.exists(paths.content) else { throw FileError(.notFound, "no such file") }
        return try readMetadata(paths.metadata)
    }

    /// Opens stored content for reading (for downloads: read it in chunks, by range).
    public func open(_ id: ContentID) throws(FileError) -> FileReader {
        let path = paths(of: id).content
        let fd = try POSIX.openFile(path, O_RDONLY)
        do {
            return FileReader(fd: fd, size: try POSIX.size(of: fd, path: path), path: path)
        } catch {
            close(fd)
            throw error
        }
    }

    /// The stored bytes, or the bytes in `range` (byte offsets, inclusive).
    public func read(_ id: ContentID, range: ClosedRange<Int>? = nil) throws(FileError) -> [UInt8] {
        let reader = try open(id)
        guard let range else { return try reader.read(offset: 0, count: reader.size) }
        guard range.lowerBound >= 0, range.upperBound < reader.size else {
            throw FileError(.rangeNotSatisfiable, "range \(range) is outside \(reader.size) bytes")
        }
        return try reader.read(offset: range.lowerBound, count: range.count)
    }

    // MARK: Garbage collection

    /// Stored content, for garbage collection: each id with the time it was last stored
    /// (milliseconds since the epoch).
    public func storedFiles() -> [(id: ContentID, modifiedMillis: Int64)] {
        var result: [(id: ContentID, modifiedMillis: Int64)] = []
        for prefix in POSIX.entries(filesDirectory) where prefix.utf8.count == 2 {
            let directory = filesDirectory + "/" + prefix
            for name in POSIX.entries(directory) where name.utf8.count == 62 {
                guard let id = ContentID(hex: prefix + name),
                      let modified = POSIX.modificationMillis(directory + "/" + name) else { continue }
                result.append((id, modified))
            }
        }
        return result.sorted { $0.id < $1.id }
    }

    /// Deletes stored content and its metadata; false if it was not stored.
    ///
    /// Whoever calls this decides nothing refers to the file any more; a concurrent upload of
    /// the same bytes refreshes the modification time, so compare it before deleting.
    @discardableResult
    public func delete(_ id: ContentID) throws(FileError) -> Bool {
        let paths = self.paths(of: id)
        let removed = try POSIX.remove(paths.content)
        try POSIX.remove(paths.metadata)
        return removed
    }

    /// Removes temporary files older than `seconds` (left by a crash mid-upload); returns how
    /// many. Uploads in progress are younger than any sane age.
    @discardableResult
    public func removeAbandonedTemporaryFiles(olderThanSeconds seconds: Int, nowMillis: Int64) -> Int {
        var removed = 0
        for name in POSIX.entries(temporaryDirectory) {
            let path = temporaryDirectory + "/" + name
            guard let modified = POSIX.modificationMillis(path), nowMillis - modified >= Int64(seconds) * 1000 else {
                continue
            }
            if (try? POSIX.remove(path)) == true { removed += 1 }
        }
        return removed
    }

    // MARK: Paths

    struct Paths {
        let directory: String
        let content: String
        let metadata: String
    }

    func paths(of id: ContentID) -> Paths {
        let hex = id.hex
        let directory = filesDirectory + "/" + hex.prefix(2)
        let content = directory + "/" + hex.dropFirst(2)
        return Paths(directory: directory, content: content, metadata: content + ".meta")
    }

    /// Names in the temporary directory (for tests: an aborted upload leaves none).
    var temporaryFileNames: [String] { POSIX.entries(temporaryDirectory) }

    private func writeSidecar(_ metadata: FileMetadata, to path: String) throws(FileError) {
        let temporary = temporaryDirectory + "/" + POSIX.randomName() + ".meta"
        let fd = try POSIX.openFile(temporary, O_WRONLY | O_CREAT | O_EXCL, mode: 0o644)
        var written = false
        defer {
            close(fd)
            if !written { unlink(temporary) }
        }
        let bytes = metadata.jsonValue.serialized()
        let result: Result<Void, FileError> = bytes.withUnsafeBytes { raw in
            do throws(FileError) {
                try POSIX.writeAll(fd, raw, path: temporary)
                try POSIX.sync(fd, path: temporary)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
        try POSIX.move(temporary, path)
        written = true
    }

    private func readMetadata(_ path: String) throws(FileError) -> FileMetadata {
        let fd = try POSIX.openFile(path, O_RDONLY)
        defer { close(fd) }
        let bytes = try POSIX.readAll(fd, offset: 0, count: 4096, path: path)
        guard let json = try? JSONParser.parse(bytes), let metadata = FileMetadata(json: json) else {
            throw FileError(.io, "unreadable metadata \(path)")
        }
        return metadata
    }
}

/// Stored content opened for reading. Reads are positioned (`pread`), so one reader may
/// serve several ranges; the file closes when the reader is released.
public final class FileReader: Sendable {
    /// Bytes in the file.
    public let size: Int
    private let fd: Int32
    private let path: String

    init(fd: Int32, size: Int, path: String) {
        self.fd = fd
        self.size = size
        self.path = path
    }

    deinit { close(fd) }

    /// Up to `count` bytes from `offset` (fewer only at the end of the file).
    public func read(offset: Int, count: Int) throws(FileError) -> [UInt8] {
        try POSIX.readAll(fd, offset: offset, count: max(0, min(count, size - offset)), path: path)
    }
}
