import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An upload being streamed to disk: chunks are appended to a temporary file in the store's
/// filesystem and hashed as they arrive, with the size limit enforced on every chunk.
///
/// Nothing is visible in the store until ``finish()`` and ``FileStore/commit(_:mime:width:height:thumbnail:)``.
/// ``abort()`` (or dropping the upload unfinished) removes the temporary file, so a client
/// that disconnects halfway leaves nothing behind. Blocking I/O: call it on a
/// ``FileWorkerPool`` lane, one call at a time, in order.
public final class FileUpload: Sendable {
    /// The most bytes this upload may have.
    public let maxBytes: Int
    /// How many of the first bytes ``PendingFile/leadingBytes`` keeps for type detection.
    public static let leadingByteCount = 512

    private struct State {
        enum Phase { case open, finished, aborted }
        var phase = Phase.open
        var fd: Int32
        let hasher = SHA256Hasher()
        var count = 0
        var leading: [UInt8] = []
    }
    // The hasher is a class but only ever touched under this lock.
    private let state: Mutex<State>
    let path: String

    init(path: String, fd: Int32, maxBytes: Int) {
        self.path = path
        self.maxBytes = maxBytes
        state = Mutex(State(fd: fd))
    }

    deinit {
        abort()
    }

    /// Bytes appended so far.
    public var byteCount: Int { state.withLock { $0.count } }

    /// Appends a chunk. Over ``maxBytes`` the upload aborts itself and throws `tooLarge`;
    /// after a failure or ``abort()`` every call throws.
    public func append(_ chunk: [UInt8]) throws(FileError) {
        let result: Result<Void, FileError> = state.withLock { state in
            guard state.phase == .open else { return .failure(FileError(.badRequest, "the upload is closed")) }
            guard chunk.count <= maxBytes - state.count else {
                close(state.fd)
                state.phase = .aborted
                unlink(path)
                return .failure(FileError(.tooLarge, "the file is larger than \(maxBytes) bytes"))
            }
            let written = chunk.withUnsafeBytes { raw in
                Result { () throws(FileError) in
                    try POSIX.writeAll(state.fd, raw, path: path)
                    state.hasher.update(raw)
                }
            }
            if case .failure = written {
                close(state.fd)
                state.phase = .aborted
                unlink(path)
                return written
            }
            if state.leading.count < FileUpload.leadingByteCount {
                state.leading += chunk.prefix(FileUpload.leadingByteCount - state.leading.count)
            }
            state.count += chunk.count
            return .success(())
        }
        try result.get()
    }

    /// Ends the upload: the data is fsynced and hashed. The result is still temporary until
    /// the store commits it (or it is discarded).
    public func finish() throws(FileError) -> PendingFile {
        let result: Result<PendingFile, FileError> = state.withLock { state in
            guard state.phase == .open else { return .failure(FileError(.badRequest, "the upload is closed")) }
            do throws(FileError) {
                try POSIX.sync(state.fd, path: path)
            } catch {
                close(state.fd)
                state.phase = .aborted
                unlink(path)
                return .failure(error)
            }
            close(state.fd)
            state.phase = .finished
            let id = ContentID(digest: state.hasher.finish())
            return .success(PendingFile(path: path, id: id, size: state.count, leadingBytes: state.leading))
        }
        return try result.get()
    }

    /// Drops the upload and its temporary file; harmless after finish or a second time.
    public func abort() {
        state.withLock { state in
            guard state.phase == .open else { return }
            close(state.fd)
            unlink(path)
            state.phase = .aborted
        }
    }
}

/// A complete, fsynced upload in a temporary file, with its content id, waiting to be
/// committed to the store or discarded. Dropping it unconsumed removes the file.
public final class PendingFile: Sendable {
    /// SHA-256 of the content.
    public let id: ContentID
    /// Bytes.
    public let size: Int
    /// The first bytes (up to ``FileUpload/leadingByteCount``), for type detection.
    public let leadingBytes: [UInt8]
    let path: String
    private let consumed = Mutex(false)

    init(path: String, id: ContentID, size: Int, leadingBytes: [UInt8]) {
        self.path = path
        self.id = id
        self.size = size
        self.leadingBytes = leadingBytes
    }

    deinit { discard() }

    /// The whole content (blocking; uploads are bounded by the store's size limit).
    public func readAll() throws(FileError) -> [UInt8] {
        let fd = try POSIX.openFile(path, O_RDONLY)
        defer { close(fd) }
        return try POSIX.readAll(fd, offset: 0, count: size, path: path)
    }

    /// Removes the temporary file without storing it.
    public func discard() {
        guard take() else { return }
        unlink(path)
    }

    /// Marks the file as used; false if it already was.
    func take() -> Bool {
        consumed.withLock { used in
            if used { return false }
            used = true
            return true
        }
    }
}
