import Dispatch
import Foundation
import ParleyCore
import ParleyFiles
@testable import ParleyServer
import Synchronization
import Testing

/// The checks of a publish with attachments (registry look-ups) run on a thread of their
/// own: they never wait behind image decoding on the file workers.
@Suite struct AttachmentCheckPoolTests {
    @Test func aPublishWithAttachmentsIsCheckedWhileEveryFileWorkerIsBusy() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-checks-\(UUID().uuidString)").path
        var configuration = ServerConfiguration()
        configuration.dataDirectory = directory
        configuration.fileWorkers = 1
        let files = try ServerFiles(configuration: configuration)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The only file worker is stuck in a long job (as in decoding a huge image).
        let release = DispatchSemaphore(value: 0)
        try files.pool.submit { _ = release.wait(timeout: .now() + 30) }
        defer {
            release.signal()
            files.shutdown()
        }
        let body = try JSONParser.parse("{\"text\":\"look\",\"attachments\":[\"\(UploadRegistry.makeID())\"]}")
        let answered = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<ResolvedPublish, ParleyError>?>(nil)
        files.resolve(body, channel: "demo", rooms: ["lobby"]) { result in
            outcome.withLock { $0 = result }
            answered.signal()
        }
        #expect(answered.wait(timeout: .now() + 5) == .success, "the check waited behind the busy file worker")
        // An id this channel never issued is refused, with a reason.
        guard case .failure(let error) = outcome.withLock({ $0 }) else {
            Issue.record("an unknown upload id was accepted")
            return
        }
        #expect(!error.message.isEmpty)
    }

    /// A publish naming an upload already published in as many rooms as an upload may be,
    /// in yet another room, is refused with the reason; in a room it is already in, it goes.
    @Test func anUploadInTooManyRoomsIsRefusedInAnother() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-checks-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try FileStore(directory: directory)
        let registry = try UploadRegistry(store: store, maxRoomsPerUpload: 1)
        let file = try store.store(Array("hello".utf8), mime: "text/plain")
        let record = UploadRecord(id: UploadRegistry.makeID(), channel: "demo", room: "lobby", name: "hello.txt", file: file,
                                  thumbnail: nil, baseURL: "http://h:1", uploadedMillis: 1)
        try registry.register(record)
        try registry.addReference(UploadReference(room: "lobby", offset: 1), to: record.id, channel: "demo")
        let body = try JSONParser.parse("{\"attachments\":[\"\(record.id)\"]}")
        #expect(try ServerFiles.fill(body, ids: [record.id], channel: "demo", rooms: ["lobby"], registry: registry).ids == [record.id])
        do {
            _ = try ServerFiles.fill(body, ids: [record.id], channel: "demo", rooms: ["elsewhere"], registry: registry)
            Issue.record("published in a second room past the bound")
        } catch {
            #expect(error.code == .limitReached)
            #expect(error.message.contains("already attached in 1 rooms"))
        }
    }

    /// The per-channel usage table keeps only channels with uploads on the disk: a
    /// collection that found none in a channel forgets it (open mode makes channels for free).
    @Test func aChannelHoldingNothingLeavesTheUsageTable() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-usage-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = ServerConfiguration()
        configuration.dataDirectory = directory
        let files = try ServerFiles(configuration: configuration)
        defer { files.shutdown() }
        #expect(files.currentUsage(of: "made-up", nowMillis: 1_000) == 0)
        #expect(files.knownUsage(of: "made-up") == 0)
        var report = FileCollectionReport()
        report.channelUsage = ["demo": 42]
        files.counted(report, nowMillis: 2_000)
        #expect(files.knownUsage(of: "made-up") == nil)
        #expect(files.knownUsage(of: "demo") == 42)
    }
}


/// The per-address upload rate stays bounded however many addresses come.
@Suite struct UploadRateLimiterBoundTests {
    @Test func everNewAddressesKeepTheTableAtItsBound() {
        let limiter = UploadRateLimiter()
        for _ in 0..<3 { _ = limiter.allow(key: "busy", perMinute: 3, nowMillis: 0) }
        for n in 0..<(UploadRateLimiter.maxKeys + 2_000) { _ = limiter.allow(key: "a\(n)", perMinute: 3, nowMillis: 0) }
        #expect(limiter.keyCount <= UploadRateLimiter.maxKeys)
        #expect(!limiter.allow(key: "busy", perMinute: 3, nowMillis: 0), "an address that used its minute stays refused")
    }
}
