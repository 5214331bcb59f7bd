import Foundation
import ParleyCore
import ParleySQLite

/// `parley backup --data DIR --to NEWDIR`: a consistent copy of a data directory, taken
/// while the server runs. The database is copied with SQLite's online backup API in one read
/// transaction (so it holds exactly what was committed at one instant, every room's offsets
/// 1…n without a gap), and the bans' database the same way; the directory's other files
/// (attachments) are copied after them, so
/// everything the copied messages refer to is there. `parley serve --data NEWDIR` serves it.
public enum DataBackup {
    /// What a backup wrote.
    public struct Summary: Sendable, CustomStringConvertible {
        public let rooms: Int
        public let messages: Int
        public let databaseBytes: Int
        public let otherFiles: Int

        public var description: String {
            "\(rooms) rooms, \(messages) messages, database \(databaseBytes) bytes, \(otherFiles) other files"
        }
    }

    /// The database file's name in a data directory, and the files SQLite keeps beside it
    /// (never copied: the backup is a whole database of its own).
    static let databaseName = "parley.sqlite3"
    /// The bans' own database beside it (``SQLiteBanStore``), copied the same way.
    static let bansName = "bans.sqlite3"
    static let sidecarSuffixes = ["-wal", "-shm", "-journal"]

    /// Copies `dataDirectory` to `destination`, which must not exist or be an empty directory.
    public static func run(dataDirectory: String, to destination: String) throws(ParleyError) -> Summary {
        let fileManager = FileManager.default
        let source = dataDirectory + "/" + databaseName
        guard fileManager.fileExists(atPath: source) else {
            throw ParleyError(.notFound, "\(dataDirectory) holds no \(databaseName): is it a Parley data directory?")
        }
        var isDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: destination, isDirectory: &isDirectory) {
            guard isDirectory.boolValue, (try? fileManager.contentsOfDirectory(atPath: destination))?.isEmpty == true else {
                throw ParleyError(.conflict, "\(destination) already exists and is not an empty directory")
            }
        } else {
            do {
                try fileManager.createDirectory(atPath: destination, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
            } catch {
                throw ParleyError(.internalError, "cannot create \(destination): \(error.localizedDescription)")
            }
        }
        let database = try SQLiteBackup.copy(from: source, to: destination + "/" + databaseName)
        var others = 0
        if fileManager.fileExists(atPath: dataDirectory + "/" + bansName) {
            _ = try SQLiteBackup.copy(from: dataDirectory + "/" + bansName, to: destination + "/" + bansName, countMessages: false)
            others += 1
        }
        do {
            for name in try fileManager.contentsOfDirectory(atPath: dataDirectory).sorted() {
                let copiedAlready = [databaseName, bansName].contains { database in
                    name == database || sidecarSuffixes.contains { name == database + $0 }
                }
                guard !copiedAlready else { continue }
                try fileManager.copyItem(atPath: dataDirectory + "/" + name, toPath: destination + "/" + name)
                others += countFiles(at: destination + "/" + name)
            }
        } catch {
            throw ParleyError(.internalError, "the database was copied, but not every other file of \(dataDirectory): \(error.localizedDescription)")
        }
        return Summary(rooms: database.rooms, messages: database.messages, databaseBytes: database.bytes, otherFiles: others)
    }

    private static func countFiles(at path: String) -> Int {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return 0 }
        guard isDirectory.boolValue else { return 1 }
        let enumerator = FileManager.default.enumerator(atPath: path)
        var count = 0
        while let item = enumerator?.nextObject() as? String {
            var inner: ObjCBool = false
            if FileManager.default.fileExists(atPath: path + "/" + item, isDirectory: &inner), !inner.boolValue { count += 1 }
        }
        return count
    }

    /// `parley backup --help`.
    public static let usage = """
        usage: parley backup --data DIR --to NEWDIR

        Writes a consistent copy of the data directory DIR (default: $PARLEY_DATA, else
        ./parley-data) to NEWDIR, which must not exist or be empty. Safe while the server
        runs: the database is copied with SQLite's online backup API at one instant.
        Serve the copy with: parley serve --data NEWDIR
        """
}
