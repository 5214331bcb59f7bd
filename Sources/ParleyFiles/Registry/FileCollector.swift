import ParleyCore

/// How much of a room's history the message store still keeps.
public enum RoomRetention: Sendable, Hashable {
    /// Messages from this offset on are kept (older ones were dropped by retention).
    case keepsFrom(Int64)
    /// No message of the room is kept.
    case empty
    /// The store could not say: everything is assumed kept (nothing is deleted on an error).
    case unknown
}

/// The grace periods of garbage collection.
public struct FileCollectionPolicy: Sendable, Hashable {
    /// An upload no message ever referred to is kept this long after its upload (or after
    /// the last publish that named it), so a client can upload first and publish later.
    public var unpublishedGraceMillis: Int64
    /// An upload whose messages are all gone is kept this long after the last publish that
    /// named it: a publish in flight (its reference not written yet) never loses its file.
    public var publishedGraceMillis: Int64
    /// Temporary files older than this are left over from a crash.
    public var temporaryGraceMillis: Int64

    public init(unpublishedGraceMillis: Int64 = 86_400_000, publishedGraceMillis: Int64 = 600_000,
                temporaryGraceMillis: Int64 = 3_600_000) {
        self.unpublishedGraceMillis = unpublishedGraceMillis
        self.publishedGraceMillis = publishedGraceMillis
        self.temporaryGraceMillis = temporaryGraceMillis
    }
}

/// What one garbage collection did.
public struct FileCollectionReport: Sendable, Hashable {
    /// Upload records removed (with their references).
    public var uploadsRemoved = 0
    /// Upload records kept.
    public var uploadsKept = 0
    /// Stored contents (files, thumbnails, renditions) removed.
    public var filesRemoved = 0
    /// Temporary files of crashed uploads removed.
    public var temporaryFilesRemoved = 0
    /// Channel directories left empty (every upload of the channel gone) and removed.
    public var channelDirectoriesRemoved = 0
    /// Bytes of uploads each channel still holds after the run.
    public var channelUsage: [String: Int] = [:]

    public init() {}
}

/// Garbage collection of uploads and stored content: an upload goes when no retained message
/// refers to it (message retention by count or age) and its grace period is over; content
/// goes when no remaining upload refers to it and it was not stored again within the grace
/// period for unpublished uploads.
///
/// Safe with several nodes sharing the directory and running it at the same time: every
/// step is a deletion that is harmless to repeat, and every decision to delete is guarded
/// by a modification time that uploads and publishes refresh. Blocking: run it on a
/// ``FileWorkerPool``.
public struct FileCollector: Sendable {
    public let store: FileStore
    public let registry: UploadRegistry
    public let policy: FileCollectionPolicy

    public init(store: FileStore, registry: UploadRegistry, policy: FileCollectionPolicy) {
        self.store = store
        self.registry = registry
        self.policy = policy
    }

    /// One pass. `retention` says how much of a room the message store keeps; it is asked
    /// once per room per pass.
    public func collect(nowMillis: Int64, retention: (RoomKey) -> RoomRetention) -> FileCollectionReport {
        var report = FileCollectionReport()
        var retained: [RoomKey: RoomRetention] = [:]
        var liveContent = Set<ContentID>()
        for channelDirectory in registry.channelDirectories() {
            let (records, orphans) = registry.entries(in: channelDirectory)
            for orphan in orphans { registry.removeReferences(channelDirectory + "/" + orphan) }
            defer {
                // A channel with no upload left: its directory goes once nothing was written in
                // it for the unpublished grace period (rmdir takes only an empty one; an upload
                // that finds it gone makes it again, UploadRegistry.register).
                if let modified = POSIX.modificationMillis(channelDirectory), nowMillis - modified >= policy.unpublishedGraceMillis,
                   POSIX.removeDirectory(channelDirectory) {
                    report.channelDirectoriesRemoved += 1
                }
            }
            for entry in records {
                let record = entry.record
                var live = false
                var referenced = false
                // References to dropped messages stay until the upload goes: they say it was
                // published (the shorter grace period applies).
                for (_, reference) in registry.referenceFiles(entry.path + ".refs") where !live {
                    referenced = true
                    guard let room = validKey(record.channel, reference.room) else {
                        continue
                    }
                    let kept: RoomRetention
                    if let known = retained[room] {
                        kept = known
                    } else {
                        kept = retention(room)
                        retained[room] = kept
                    }
                    switch kept {
                    case .unknown:
                        live = true
                    case .keepsFrom(let oldest) where reference.offset >= oldest:
                        live = true
                    case .keepsFrom, .empty:
                        break
                    }
                }
                let age = nowMillis - entry.modifiedMillis
                let grace = referenced ? policy.publishedGraceMillis : policy.unpublishedGraceMillis
                if !live && age >= grace {
                    registry.remove(recordAt: entry.path)
                    report.uploadsRemoved += 1
                    continue
                }
                report.uploadsKept += 1
                report.channelUsage[record.channel, default: 0] += record.file.metadata.size
                liveContent.insert(record.file.id)
                if let thumbnail = record.thumbnail { liveContent.insert(thumbnail.id) }
            }
        }
        // Content is written before its record: a fresh modification time protects an upload
        // whose record is not there yet (and a second upload of the same bytes refreshes it).
        for (id, modified) in store.storedFiles() where !liveContent.contains(id) {
            guard nowMillis - modified >= policy.unpublishedGraceMillis else { continue }
            if (try? store.delete(id)) == true { report.filesRemoved += 1 }
        }
        report.temporaryFilesRemoved = store.removeAbandonedTemporaryFiles(
            olderThanSeconds: Int(policy.temporaryGraceMillis / 1000), nowMillis: nowMillis)
        return report
    }

    /// The room of a reference; nil for a name no room can have (a damaged file).
    private func validKey(_ channel: String, _ room: String) -> RoomKey? {
        RoomKey.isValidName(channel) && RoomKey.isValidName(room) ? RoomKey(channel: channel, room: room) : nil
    }
}
