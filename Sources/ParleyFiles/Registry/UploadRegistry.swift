import ParleyCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The uploads this server (or any node sharing its files directory) issued, on disk beside
/// the content: `files/uploads/<sha256 of the channel>/<id>` holds an ``UploadRecord`` as
/// JSON, and `<id>.refs/` one small file per room whose messages carry the upload, for the
/// newest of them (``UploadReference``).
///
/// Kept in the files directory rather than in memory or SQLite because cluster nodes share
/// that directory and nothing else on disk: every node must validate every id and serve every
/// file. Records are written once (temporary file, fsync, rename) and never changed; a
/// publish refreshes a record's modification time, which is what garbage collection's grace
/// periods look at. Each reference is its own file, written once: a newer reference of the
/// room is a new file and the older ones are removed (by whichever node wrote the newer), so
/// no file is ever rewritten in place.
///
/// Blocking I/O: call it on a ``FileWorkerPool``.
public final class UploadRegistry: Sendable {
    /// `files/uploads`.
    public let directory: String
    private let temporaryDirectory: String
    /// Largest record file read.
    static let maxRecordBytes = 16 * 1024

    /// Opens (creating as needed) the registry of `store`'s directory.
    public init(store: FileStore, maxRoomsPerUpload: Int = UploadRegistry.maxRoomsPerUpload) throws(FileError) {
        directory = store.filesDirectory + "/uploads"
        temporaryDirectory = store.temporaryDirectory
        roomsPerUpload = max(1, maxRoomsPerUpload)
        try POSIX.makeDirectory(directory)
    }

    // MARK: ids

    /// A fresh upload id: 128 random bits as 32 lowercase hex digits.
    public static func makeID() -> String {
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

    /// Whether `id` has the form of an upload id (so it can never name another path).
    public static func isValidID(_ id: some StringProtocol) -> Bool {
        let utf8 = id.utf8
        return utf8.count == 32 && utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    // MARK: records

    /// Records an upload (durably: the record is complete or absent after a crash).
    public func register(_ record: UploadRecord) throws(FileError) {
        let channel = channelDirectory(record.channel)
        // Garbage collection removes a channel's directory once it has stayed empty for a
        // while: when it went between the two steps, make it again and write once more.
        for attempt in 0..<2 {
            if try POSIX.makeDirectory(channel) { try POSIX.syncDirectory(directory) }
            do throws(FileError) {
                try POSIX.writeDurably(record.jsonValue.serialized(), to: channel + "/" + record.id,
                                       temporaryDirectory: temporaryDirectory)
                return
            } catch {
                if attempt == 1 || POSIX.modificationMillis(channel) != nil { throw error }
            }
        }
    }

    /// The record of upload `id` in `channel`; nil when this channel has no such upload.
    public func record(id: String, channel: String) throws(FileError) -> UploadRecord? {
        guard UploadRegistry.isValidID(id) else { return nil }
        return try readRecord(channelDirectory(channel) + "/" + id, channel: channel)
    }

    /// Refreshes the record's modification time (a publish is about to refer to it), so no
    /// garbage collection running meanwhile takes it away. False when there is no record.
    @discardableResult
    public func touch(id: String, channel: String) -> Bool {
        guard UploadRegistry.isValidID(id) else { return false }
        return utimensat(AT_FDCWD, channelDirectory(channel) + "/" + id, nil, 0) == 0
    }

    // MARK: references

    /// Notes that the message at `reference` carries upload `id` (idempotent).
    ///
    /// One reference per room is enough: garbage collection keeps an upload while the newest
    /// message of a room that carries it is kept (offsets grow, and retention drops a room's
    /// oldest first). So a reference to a newer message of the room replaces the older
    /// ones, and one to an older message (or a retry) writes nothing: an upload named in
    /// every message of a busy room keeps one small file per room, not one per message.
    /// Two at once for one room may both stay for a while; the newest is never removed.
    public func addReference(_ reference: UploadReference, to id: String, channel: String) throws(FileError) {
        guard UploadRegistry.isValidID(id) else { throw FileError(.notFound, "no such upload") }
        let refs = channelDirectory(channel) + "/" + id + ".refs"
        try POSIX.makeDirectory(refs)
        let prefix = Self.roomHash(reference.room) + "-"
        let held = POSIX.entries(refs).compactMap { name -> (name: String, offset: Int64)? in
            guard name.hasPrefix(prefix), let offset = Int64(name.dropFirst(prefix.count)) else { return nil }
            return (name, offset)
        }
        guard !held.contains(where: { $0.offset >= reference.offset }) else { return }
        let body: JSONValue = ["room": .string(reference.room), "offset": .number(JSONNumber(Int(reference.offset)))]
        try POSIX.writeDurably(body.serialized(), to: refs + "/" + prefix + String(reference.offset),
                               temporaryDirectory: temporaryDirectory)
        for older in held { _ = try? POSIX.remove(refs + "/" + older.name) }
    }

    /// Most rooms one upload may be published in (a reference file each) by default; past
    /// it a publish naming it in another room is refused (``admitsReferences(to:inRooms:channel:)``).
    public static let maxRoomsPerUpload = 1_000
    /// This registry's bound (tests make it small).
    public let roomsPerUpload: Int

    /// Whether upload `id` may be published in `rooms`: the rooms it has references in and
    /// the new ones among `rooms` are at most ``roomsPerUpload``. Racing publishes may
    /// pass it by a few.
    public func admitsReferences(to id: String, inRooms rooms: [String], channel: String) -> Bool {
        guard UploadRegistry.isValidID(id) else { return true }
        let held = Set(POSIX.entries(channelDirectory(channel) + "/" + id + ".refs").map { $0.prefix(32) })
        let added = Set(rooms.map { Substring(Self.roomHash($0)) }).subtracting(held)
        return held.count + added.count <= roomsPerUpload
    }

    /// A reference file's name starts with its room's hash (room names may hold any
    /// character), then `-` and the message's offset.
    private static func roomHash(_ room: String) -> String {
        String(SHA256Hasher.contentID(of: Array(room.utf8)).hex.prefix(32))
    }

    /// The messages known to carry upload `id`.
    public func references(of id: String, channel: String) -> [UploadReference] {
        guard UploadRegistry.isValidID(id) else { return [] }
        return referenceFiles(channelDirectory(channel) + "/" + id + ".refs").map(\.reference)
    }

    // MARK: usage

    /// Bytes of every upload recorded in `channel` (each upload counts, deduplicated or not).
    public func usage(of channel: String) -> Int {
        let directory = channelDirectory(channel)
        var total = 0
        for name in POSIX.entries(directory) where UploadRegistry.isValidID(name) {
            if let record = try? readRecord(directory + "/" + name, channel: channel) {
                total += record.file.metadata.size
            }
        }
        return total
    }

    // MARK: for garbage collection

    /// One record file as garbage collection sees it.
    struct Entry {
        let path: String
        let record: UploadRecord
        let modifiedMillis: Int64
    }

    /// Every channel directory.
    func channelDirectories() -> [String] {
        POSIX.entries(directory).filter { $0.utf8.count == 64 }.map { directory + "/" + $0 }
    }

    /// The readable records of a channel directory, and the names of leftovers that belong
    /// to no record (reference directories whose record is gone).
    func entries(in channelDirectory: String) -> (records: [Entry], orphans: [String]) {
        var records: [Entry] = []
        var names = Set<String>()
        var others: [String] = []
        for name in POSIX.entries(channelDirectory) {
            if UploadRegistry.isValidID(name) {
                let path = channelDirectory + "/" + name
                guard let modified = POSIX.modificationMillis(path),
                      let bytes = try? POSIX.readSmallFile(path, limit: UploadRegistry.maxRecordBytes),
                      let json = try? JSONParser.parse(bytes), let record = UploadRecord(json: json) else { continue }
                records.append(Entry(path: path, record: record, modifiedMillis: modified))
                names.insert(name)
            } else {
                others.append(name)
            }
        }
        let orphans = others.filter { name in
            guard name.hasSuffix(".refs") else { return false }
            return !names.contains(String(name.dropLast(".refs".count)))
        }
        return (records, orphans)
    }

    /// The reference files of a record (path and what it says).
    func referenceFiles(_ refsDirectory: String) -> [(path: String, reference: UploadReference)] {
        POSIX.entries(refsDirectory).compactMap { name in
            let path = refsDirectory + "/" + name
            guard let bytes = try? POSIX.readSmallFile(path, limit: 4096), let json = try? JSONParser.parse(bytes),
                  let room = json["room"]?.stringValue, let offset = json["offset"]?.intValue else { return nil }
            return (path, UploadReference(room: room, offset: Int64(offset)))
        }
    }

    /// Removes a record and its references.
    func remove(recordAt path: String) {
        removeReferences(path + ".refs")
        _ = try? POSIX.remove(path)
    }

    /// Removes a reference directory and what it holds.
    func removeReferences(_ refsDirectory: String) {
        for name in POSIX.entries(refsDirectory) { _ = try? POSIX.remove(refsDirectory + "/" + name) }
        POSIX.removeDirectory(refsDirectory)
    }

    // MARK: paths

    /// The directory of a channel's uploads: named by the SHA-256 of the channel name, so
    /// any name (up to 128 bytes, spaces included) makes a safe, fixed-length file name.
    func channelDirectory(_ channel: String) -> String {
        directory + "/" + SHA256Hasher.contentID(of: Array(channel.utf8)).hex
    }

    private func readRecord(_ path: String, channel: String) throws(FileError) -> UploadRecord? {
        guard let bytes = try POSIX.readSmallFile(path, limit: UploadRegistry.maxRecordBytes) else { return nil }
        guard let json = try? JSONParser.parse(bytes), let record = UploadRecord(json: json) else {
            throw FileError(.io, "unreadable upload record \(path)")
        }
        // The directory is named by a hash: the record itself says whose it is.
        return record.channel == channel ? record : nil
    }
}
