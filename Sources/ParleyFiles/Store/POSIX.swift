#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Thin, throwing wrappers over the POSIX calls the store needs: it controls exactly when
/// data reaches the disk (fsync of file, then directory), which Foundation does not expose.
enum POSIX {
    static func failure(_ what: String, _ path: String, _ code: Int32 = errno) -> FileError {
        FileError(.io, "\(what) \(path): \(String(cString: strerror(code)))")
    }

    static func openFile(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws(FileError) -> Int32 {
        while true {
            let fd = open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno == EINTR { continue }
            if errno == ENOENT { throw FileError(.notFound, "no such file") }
            throw failure("cannot open", path)
        }
    }

    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws(FileError) {
        guard var base = bytes.baseAddress else { return }
        var left = bytes.count
        while left > 0 {
            let written = write(fd, base, left)
            if written < 0 {
                if errno == EINTR { continue }
                throw failure("cannot write", path)
            }
            left -= written
            base += written
        }
    }

    /// Reads up to `count` bytes at `offset` (fewer only at the end of the file).
    static func readAll(_ fd: Int32, offset: Int, count: Int, path: String) throws(FileError) -> [UInt8] {
        guard count > 0 else { return [] }
        var result = [UInt8](repeating: 0, count: count)
        var filled = 0
        var failure: FileError?
        result.withUnsafeMutableBytes { buffer in
            while filled < count {
                let got = pread(fd, buffer.baseAddress! + filled, count - filled, off_t(offset + filled))
                if got < 0 {
                    if errno == EINTR { continue }
                    failure = POSIX.failure("cannot read", path)
                    return
                }
                if got == 0 { break }
                filled += got
            }
        }
        if let failure { throw failure }
        if filled < count { result.removeLast(count - filled) }
        return result
    }

    static func sync(_ fd: Int32, path: String) throws(FileError) {
        while fsync(fd) != 0 {
            if errno == EINTR { continue }
            throw failure("cannot fsync", path)
        }
    }

    /// Makes a rename or a new entry in `path` durable.
    static func syncDirectory(_ path: String) throws(FileError) {
        let fd = try openFile(path, O_RDONLY | O_DIRECTORY)
        defer { close(fd) }
        try sync(fd, path: path)
    }

    /// Creates the directory; true if it did not exist before.
    @discardableResult
    static func makeDirectory(_ path: String) throws(FileError) -> Bool {
        if mkdir(path, 0o755) == 0 { return true }
        if errno == EEXIST { return false }
        if errno == ENOENT, let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            // The parent is missing too (a fresh data directory): make it first.
            try makeDirectory(String(path[..<slash]))
            if mkdir(path, 0o755) == 0 || errno == EEXIST { return true }
        }
        throw failure("cannot create directory", path)
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    static func size(of fd: Int32, path: String) throws(FileError) -> Int {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure("cannot stat", path) }
        return Int(info.st_size)
    }

    /// Modification time in milliseconds since the epoch; nil when the file is gone.
    static func modificationMillis(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        #if canImport(Darwin)
        let time = info.st_mtimespec
        #else
        let time = info.st_mtim
        #endif
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }

    /// Sets the modification time to now.
    static func touch(_ path: String) {
        _ = utimensat(AT_FDCWD, path, nil, 0)
    }

    /// Atomically replaces `to` with `from` (same filesystem).
    static func move(_ from: String, _ to: String) throws(FileError) {
        guard rename(from, to) == 0 else { throw failure("cannot rename to", to) }
    }

    /// Removes a file; false if it was not there.
    @discardableResult
    static func remove(_ path: String) throws(FileError) -> Bool {
        if unlink(path) == 0 { return true }
        if errno == ENOENT { return false }
        throw failure("cannot remove", path)
    }

    /// Names in a directory (without `.` and `..`); empty when it does not exist.
    static func entries(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Writes `bytes` to `path` so that it is complete or absent after a crash: a temporary
    /// file in `temporaryDirectory` (same filesystem), fsync, rename over `path`, fsync of the
    /// directory holding `path`.
    static func writeDurably(_ bytes: [UInt8], to path: String, temporaryDirectory: String) throws(FileError) {
        let temporary = temporaryDirectory + "/" + randomName() + ".new"
        let fd = try openFile(temporary, O_WRONLY | O_CREAT | O_EXCL, mode: 0o644)
        var written = false
        defer {
            close(fd)
            if !written { unlink(temporary) }
        }
        let result: Result<Void, FileError> = bytes.withUnsafeBytes { raw in
            do throws(FileError) {
                try writeAll(fd, raw, path: temporary)
                try sync(fd, path: temporary)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
        try move(temporary, path)
        written = true
        if let slash = path.lastIndex(of: "/") { try syncDirectory(String(path[..<slash])) }
    }

    /// A small file's bytes (at most `limit`); nil when it does not exist.
    static func readSmallFile(_ path: String, limit: Int) throws(FileError) -> [UInt8]? {
        let fd: Int32
        do throws(FileError) {
            fd = try openFile(path, O_RDONLY)
        } catch {
            if error.code == .notFound { return nil }
            throw error
        }
        defer { close(fd) }
        return try readAll(fd, offset: 0, count: limit, path: path)
    }

    /// Removes an empty directory; false if it was not there.
    @discardableResult
    static func removeDirectory(_ path: String) -> Bool {
        rmdir(path) == 0
    }

    /// 16 random bytes as hex: temporary file names that never collide.
    static func randomName() -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for _ in 0..<16 {
            let byte = UInt8.random(in: 0...255, using: &generator)
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

