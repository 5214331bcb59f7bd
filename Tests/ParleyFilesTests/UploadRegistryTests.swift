import Foundation
import ParleyCore
import Testing
@testable import ParleyFiles

@Suite struct UploadRegistryTests {
    func makeRecord(_ store: FileStore, channel: String = "demo", room: String? = "lobby", bytes: [UInt8] = Array("hello".utf8),
                    nowMillis: Int64 = 1_000) throws -> UploadRecord {
        let file = try store.store(bytes, mime: "text/plain")
        return UploadRecord(id: UploadRegistry.makeID(), channel: channel, room: room, name: "hello.txt", file: file,
                            thumbnail: nil, baseURL: "http://h:1", uploadedMillis: nowMillis)
    }

    @Test func idsAreRandomHexAndOnlyHexIsAccepted() {
        let a = UploadRegistry.makeID(), b = UploadRegistry.makeID()
        #expect(a != b && UploadRegistry.isValidID(a) && UploadRegistry.isValidID(b))
        for bad in ["", "../etc/passwd", String(repeating: "A", count: 32), String(repeating: "a", count: 31),
                    String(repeating: "g", count: 32), String(repeating: "a", count: 30) + "/."] {
            #expect(!UploadRegistry.isValidID(bad), "\(bad)")
        }
    }

    @Test func recordsRoundTripPerChannelOnly() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = try FileStore(directory: directory.path)
        let registry = try UploadRegistry(store: store)
        let image = try store.store([1, 2, 3], mime: "image/png", width: 4, height: 2)
        let thumb = try store.store([4, 5], mime: "image/webp", width: 2, height: 1)
        let record = UploadRecord(id: UploadRegistry.makeID(), channel: "my channel/ü", room: "r 1", name: "cat.png",
                                  file: image, thumbnail: thumb, baseURL: "https://chat.example", uploadedMillis: 42)
        try registry.register(record)
        #expect(try registry.record(id: record.id, channel: "my channel/ü") == record)
        // Issued in one channel only: another channel, or a mangled id, knows nothing of it.
        #expect(try registry.record(id: record.id, channel: "demo") == nil)
        #expect(try registry.record(id: "../" + record.id, channel: "my channel/ü") == nil)
        #expect(try registry.record(id: UploadRegistry.makeID(), channel: "my channel/ü") == nil)

        let attachment = record.attachment
        #expect(attachment.url == "https://chat.example/my%20channel%2F%C3%BC/files/\(record.id)")
        #expect(attachment.thumbnail == Attachment.Thumbnail(url: attachment.url + "/thumbnail", width: 2, height: 1))
        #expect(attachment.width == 4 && attachment.height == 2 && attachment.mime == "image/png" && attachment.size == 3)
        // What a message carries is a valid attachment for every door.
        #expect(try Attachment(json: attachment.jsonValue) == attachment)
    }

    @Test func referencesAndUsage() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = try FileStore(directory: directory.path)
        let registry = try UploadRegistry(store: store)
        let one = try makeRecord(store, bytes: Array(repeating: 1, count: 100))
        let two = try makeRecord(store, bytes: Array(repeating: 2, count: 50))
        let elsewhere = try makeRecord(store, channel: "other", bytes: Array(repeating: 3, count: 7))
        for record in [one, two, elsewhere] { try registry.register(record) }
        #expect(registry.usage(of: "demo") == 150)
        #expect(registry.usage(of: "other") == 7)
        #expect(registry.usage(of: "nobody") == 0)

        #expect(registry.references(of: one.id, channel: "demo").isEmpty)
        try registry.addReference(UploadReference(room: "lobby", offset: 3), to: one.id, channel: "demo")
        try registry.addReference(UploadReference(room: "lobby", offset: 3), to: one.id, channel: "demo")  // a retry
        try registry.addReference(UploadReference(room: "other room", offset: 9), to: one.id, channel: "demo")
        let references = registry.references(of: one.id, channel: "demo")
        #expect(Set(references) == [UploadReference(room: "lobby", offset: 3), UploadReference(room: "other room", offset: 9)])
        #expect(registry.touch(id: one.id, channel: "demo"))
        #expect(!registry.touch(id: one.id, channel: "other"))
    }

    @Test func collectionKeepsWhatRetainedMessagesNeed() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = try FileStore(directory: directory.path)
        let registry = try UploadRegistry(store: store)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let hour: Int64 = 3_600_000
        let collector = FileCollector(store: store, registry: registry, policy: FileCollectionPolicy(
            unpublishedGraceMillis: hour, publishedGraceMillis: hour / 6, temporaryGraceMillis: hour))
        // Published in a message the store still keeps (offset 5, kept from 3).
        let kept = try makeRecord(store, bytes: Array("kept".utf8))
        // Published in a message retention dropped (offset 1).
        let dropped = try makeRecord(store, bytes: Array("dropped".utf8))
        // Never published.
        let fresh = try makeRecord(store, bytes: Array("fresh".utf8))
        // Shares its bytes with `dropped`: the content must stay while this upload does.
        let twin = try makeRecord(store, room: "elsewhere", bytes: Array("dropped".utf8))
        for record in [kept, dropped, fresh, twin] { try registry.register(record) }
        try registry.addReference(UploadReference(room: "lobby", offset: 5), to: kept.id, channel: "demo")
        try registry.addReference(UploadReference(room: "lobby", offset: 1), to: dropped.id, channel: "demo")
        let retention: (RoomKey) -> RoomRetention = { room in room.room == "lobby" ? .keepsFrom(3) : .empty }

        // Right away: everything is within its grace period.
        var report = collector.collect(nowMillis: now, retention: retention)
        #expect(report.uploadsRemoved == 0 && report.uploadsKept == 4)
        #expect(report.channelUsage["demo"] == 4 + 7 + 5 + 7)

        // After the published grace: the upload whose message is gone goes; its bytes stay
        // (the twin still refers to them).
        report = collector.collect(nowMillis: now + hour / 6 + 1000, retention: retention)
        #expect(report.uploadsRemoved == 1 && report.filesRemoved == 0)
        #expect(try registry.record(id: dropped.id, channel: "demo") == nil)
        #expect(store.contains(dropped.file.id))

        // After the unpublished grace: the never-published uploads go, and with them the
        // content nothing refers to any more; the retained one stays.
        report = collector.collect(nowMillis: now + hour + 1000, retention: retention)
        #expect(report.uploadsRemoved == 2 && report.uploadsKept == 1)
        #expect(try registry.record(id: kept.id, channel: "demo") != nil)
        #expect(store.contains(kept.file.id))
        #expect(!store.contains(fresh.file.id) && !store.contains(dropped.file.id))

        // A store that cannot answer keeps everything.
        report = collector.collect(nowMillis: now + 100 * hour) { _ in .unknown }
        #expect(report.uploadsRemoved == 0 && report.uploadsKept == 1)
        // Once retention drops its message too, it goes.
        report = collector.collect(nowMillis: now + 100 * hour) { _ in .keepsFrom(6) }
        #expect(report.uploadsRemoved == 1 && report.filesRemoved == 1)
        #expect(store.storedFiles().isEmpty)
        #expect(FileManager.default.subpaths(atPath: registry.directory)?.filter { !$0.hasSuffix("/") }.allSatisfy { $0.utf8.count == 64 } == true)
    }

    /// An upload named in every message of a busy room keeps one reference per room (the
    /// newest message's), not a file per message; rooms per upload are bounded.
    @Test func oneReferencePerRoomAndBoundedRooms() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = try FileStore(directory: directory.path)
        let registry = try UploadRegistry(store: store, maxRoomsPerUpload: 2)
        let upload = try makeRecord(store)
        try registry.register(upload)
        for offset: Int64 in [3, 5, 4, 5, 9] {
            try registry.addReference(UploadReference(room: "lobby", offset: offset), to: upload.id, channel: "demo")
        }
        #expect(registry.references(of: upload.id, channel: "demo") == [UploadReference(room: "lobby", offset: 9)])
        let refs = registry.channelDirectory("demo") + "/" + upload.id + ".refs"
        #expect(try FileManager.default.contentsOfDirectory(atPath: refs).count == 1)
        // A second room; then a third is refused, the two held ones are not.
        #expect(registry.admitsReferences(to: upload.id, inRooms: ["other"], channel: "demo"))
        try registry.addReference(UploadReference(room: "other", offset: 1), to: upload.id, channel: "demo")
        #expect(!registry.admitsReferences(to: upload.id, inRooms: ["third"], channel: "demo"))
        #expect(!registry.admitsReferences(to: upload.id, inRooms: ["lobby", "third"], channel: "demo"))
        #expect(registry.admitsReferences(to: upload.id, inRooms: ["lobby", "other"], channel: "demo"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: refs).count == 2)
    }

    /// A channel whose uploads are all gone leaves no directory behind (open mode makes
    /// channels for free), and a later upload to it makes the directory again.
    @Test func anEmptiedChannelDirectoryIsRemovedAndComesBack() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = try FileStore(directory: directory.path)
        let registry = try UploadRegistry(store: store)
        let hour: Int64 = 3_600_000
        let collector = FileCollector(store: store, registry: registry, policy: FileCollectionPolicy(
            unpublishedGraceMillis: hour, publishedGraceMillis: hour, temporaryGraceMillis: hour))
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try registry.register(try makeRecord(store, channel: "passing"))
        try registry.register(try makeRecord(store, channel: "demo"))
        // Within the grace period nothing goes.
        #expect(collector.collect(nowMillis: now, retention: { _ in .empty }).channelDirectoriesRemoved == 0)
        #expect(registry.channelDirectories().count == 2)
        // Past it both unpublished uploads go, and their channels' directories with them.
        let report = collector.collect(nowMillis: now + 2 * hour, retention: { _ in .empty })
        #expect(report.uploadsRemoved == 2)
        #expect(report.channelDirectoriesRemoved == 2)
        #expect(registry.channelDirectories().isEmpty)
        let again = try makeRecord(store, channel: "passing")
        try registry.register(again)
        #expect(try registry.record(id: again.id, channel: "passing") == again)
    }
}

