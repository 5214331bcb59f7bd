import Foundation
import Testing
@testable import ParleyFiles

@Suite struct FileStoreTests {
    func withStore(_ body: (FileStore, TemporaryDirectory) throws -> Void) throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        try body(try FileStore(directory: directory.path), directory)
    }

    @Test func contentIDIsTheSHA256() throws {
        try withStore { store, _ in
            let file = try store.store(Array("hello".utf8), mime: "text/plain")
            #expect(file.id.hex == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
            #expect(file.id.etag == "\"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\"")
            #expect(file.metadata == FileMetadata(mime: "text/plain", size: 5))
        }
    }

    @Test func layoutIsContentAddressedWithASidecar() throws {
        try withStore { store, directory in
            let file = try store.store(Array("layout".utf8), mime: "text/plain", width: nil)
            let hex = file.id.hex
            let content = "\(directory.path)/files/\(hex.prefix(2))/\(hex.dropFirst(2))"
            #expect(FileManager.default.contents(atPath: content) == Data("layout".utf8))
            let sidecar = try #require(FileManager.default.contents(atPath: content + ".meta"))
            #expect(String(decoding: sidecar, as: UTF8.self) == #"{"mime":"text/plain","size":6}"#)
            #expect(store.temporaryFileNames.isEmpty, "the temporary file was renamed, not copied")
        }
    }

    @Test func sameBytesAreStoredOnce() throws {
        try withStore { store, _ in
            let bytes = (0..<10_000).map { UInt8($0 & 0xFF) }
            let first = try store.store(bytes, mime: "application/pdf")
            let second = try store.store(bytes, mime: "text/plain")
            #expect(first.id == second.id)
            #expect(second.metadata.mime == "application/pdf", "the first upload's facts stay")
            #expect(store.storedFiles().map(\.id) == [first.id])
            _ = try store.store(bytes + [1], mime: "application/pdf")
            #expect(store.storedFiles().count == 2)
            #expect(store.temporaryFileNames.isEmpty)
        }
    }

    @Test func streamingUploadHashesWhileWriting() throws {
        try withStore { store, _ in
            let upload = try store.beginUpload(maxBytes: 1 << 20)
            var all: [UInt8] = []
            var generator = SeededGenerator(seed: 3)
            for _ in 0..<20 {
                let chunk = (0..<Int.random(in: 1...5000, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                try upload.append(chunk)
                all += chunk
            }
            #expect(upload.byteCount == all.count)
            #expect(store.temporaryFileNames.count == 1)
            let pending = try upload.finish()
            #expect(pending.id == SHA256Hasher.contentID(of: all))
            #expect(pending.leadingBytes == Array(all.prefix(FileUpload.leadingByteCount)))
            #expect(try pending.readAll() == all)
            #expect(!store.contains(pending.id), "nothing is visible before the commit")
            let file = try store.commit(pending, mime: "application/octet-stream")
            #expect(store.contains(file.id))
            #expect(try store.read(file.id) == all)
            #expect(store.temporaryFileNames.isEmpty)
        }
    }

    @Test func abortedUploadLeavesNothing() throws {
        try withStore { store, _ in
            let upload = try store.beginUpload(maxBytes: 100)
            try upload.append(Array(repeating: 7, count: 50))
            #expect(store.temporaryFileNames.count == 1)
            upload.abort()
            #expect(store.temporaryFileNames.isEmpty)
            #expect(throws: FileError.self) { try upload.append([1]) }
            #expect(throws: FileError.self) { try upload.finish() }
            upload.abort()  // twice is harmless
            #expect(store.storedFiles().isEmpty)
        }
    }

    @Test func droppedUploadsAndPendingFilesLeaveNothing() throws {
        try withStore { store, _ in
            do {
                let upload = try store.beginUpload(maxBytes: 100)
                try upload.append([1, 2, 3])
                // A connection that goes away without abort(): the upload is released.
            }
            #expect(store.temporaryFileNames.isEmpty)
            do {
                let upload = try store.beginUpload(maxBytes: 100)
                try upload.append([1, 2, 3])
                _ = try upload.finish()  // finished but never committed
            }
            #expect(store.temporaryFileNames.isEmpty)
            let upload = try store.beginUpload(maxBytes: 100)
            try upload.append([4])
            let pending = try upload.finish()
            pending.discard()
            #expect(store.temporaryFileNames.isEmpty)
            #expect(throws: FileError.self) { try store.commit(pending, mime: "text/plain") }
            #expect(store.storedFiles().isEmpty)
        }
    }

    @Test func maxSizeIsEnforcedWhileStreaming() throws {
        try withStore { store, _ in
            let upload = try store.beginUpload(maxBytes: 10)
            try upload.append(Array(repeating: 1, count: 6))
            try upload.append(Array(repeating: 1, count: 4))  // exactly at the limit
            let error = #expect(throws: FileError.self) { try upload.append([1]) }
            #expect(error?.code == .tooLarge)
            #expect(error?.code.httpStatus == 413)
            #expect(store.temporaryFileNames.isEmpty, "the over-size upload is gone at once")
            #expect(throws: FileError.self) { try upload.finish() }
        }
    }

    @Test func rangeReads() throws {
        try withStore { store, _ in
            let bytes = Array("0123456789".utf8)
            let file = try store.store(bytes, mime: "text/plain")
            #expect(try store.read(file.id, range: 2...5) == Array("2345".utf8))
            #expect(try store.read(file.id, range: 9...9) == Array("9".utf8))
            let error = #expect(throws: FileError.self) { try store.read(file.id, range: 5...10) }
            #expect(error?.code == .rangeNotSatisfiable)
            let reader = try store.open(file.id)
            #expect(reader.size == 10)
            #expect(try reader.read(offset: 8, count: 100) == Array("89".utf8))
            #expect(try reader.read(offset: 10, count: 5) == [])
            let empty = try store.store([], mime: "text/plain")
            #expect(try store.read(empty.id) == [])
        }
    }

    @Test func missingFilesAreNotFound() throws {
        try withStore { store, _ in
            let id = try #require(ContentID(hex: String(repeating: "ab", count: 32)))
            #expect(!store.contains(id))
            #expect((#expect(throws: FileError.self) { try store.metadata(of: id) })?.code == .notFound)
            #expect((#expect(throws: FileError.self) { try store.open(id) })?.code == .notFound)
            #expect(try store.delete(id) == false)
        }
    }

    @Test func deletionForGarbageCollection() throws {
        try withStore { store, _ in
            let keep = try store.store(Array("keep".utf8), mime: "text/plain")
            let drop = try store.store(Array("drop".utf8), mime: "text/plain")
            let listed = store.storedFiles()
            #expect(Set(listed.map(\.id)) == [keep.id, drop.id])
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            #expect(listed.allSatisfy { abs($0.modifiedMillis - now) < 60_000 })
            #expect(try store.delete(drop.id))
            #expect(!store.contains(drop.id))
            #expect(store.storedFiles().map(\.id) == [keep.id])
            #expect((try? store.metadata(of: drop.id)) == nil)
            // Stored again after deletion: back, with fresh metadata.
            _ = try store.store(Array("drop".utf8), mime: "text/csv")
            #expect(try store.metadata(of: drop.id).mime == "text/csv")
        }
    }

    @Test func abandonedTemporaryFilesAreCleanedUp() throws {
        try withStore { store, _ in
            let upload = try store.beginUpload(maxBytes: 10)
            try upload.append([1])
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            #expect(store.removeAbandonedTemporaryFiles(olderThanSeconds: 3600, nowMillis: now) == 0)
            #expect(store.removeAbandonedTemporaryFiles(olderThanSeconds: 3600, nowMillis: now + 3_601_000) == 1)
            #expect(store.temporaryFileNames.isEmpty)
        }
    }

    @Test func contentIDsFromOutsideAreValidated() {
        #expect(ContentID(hex: String(repeating: "0", count: 64)) != nil)
        #expect(ContentID(hex: String(repeating: "0", count: 63)) == nil)
        #expect(ContentID(hex: String(repeating: "A", count: 64)) == nil, "lowercase only")
        #expect(ContentID(hex: "../" + String(repeating: "0", count: 61)) == nil)
        #expect(ContentID(hex: String(repeating: "g", count: 64)) == nil)
    }

    @Test func metadataRoundTrips() throws {
        try withStore { store, _ in
            let thumb = try store.store([1, 2, 3], mime: "image/webp", width: 10, height: 5)
            let file = try store.store([4, 5, 6], mime: "image/jpeg", width: 100, height: 50, thumbnail: thumb.id)
            let read = try store.metadata(of: file.id)
            #expect(read == FileMetadata(mime: "image/jpeg", size: 3, width: 100, height: 50, thumbnail: thumb.id))
            #expect(read.isRasterImage)
            #expect(try !store.metadata(of: try store.store([7], mime: "image/svg+xml").id).isRasterImage)
        }
    }
}

@Suite struct FileWorkerPoolTests {
    @Test func runsJobsAndDeliversResults() async throws {
        let pool = FileWorkerPool(threads: 2, queueLimit: 16)
        defer { pool.shutdown() }
        let value = try await pool.run { () throws(FileError) in 6 * 7 }
        #expect(value == 42)
        let error = await #expect(throws: FileError.self) {
            try await pool.run { () throws(FileError) -> Int in throw FileError(.io, "disk") }
        }
        #expect(error?.code == .io)
    }

    @Test func fullQueueRefusesWithBusy() throws {
        let pool = FileWorkerPool(threads: 1, queueLimit: 2)
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        try pool.submit {
            started.signal()
            _ = gate.wait(timeout: .now() + 10)
        }
        #expect(started.wait(timeout: .now() + 10) == .success)
        try pool.submit {}
        try pool.submit {}
        let error = #expect(throws: FileError.self) { try pool.submit {} }
        #expect(error?.code == .busy)
        #expect(error?.code.httpStatus == 503)
        gate.signal()
        pool.shutdown()
        #expect(throws: FileError.self) { try pool.submit {} }
    }

    @Test func laneKeepsOrderAcrossThreads() throws {
        let pool = FileWorkerPool(threads: 3, queueLimit: 64)
        defer { pool.shutdown() }
        let lane = pool.makeLane(limit: 1000)
        let seen = Mutex<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        for i in 0..<300 {
            try lane.submit {
                seen.withLock { $0.append(i) }
                if i == 299 { done.signal() }
            }
        }
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(seen.withLock { $0 } == Array(0..<300))
    }

    @Test func laneRefusesWhenFull() throws {
        let pool = FileWorkerPool(threads: 1, queueLimit: 8)
        defer { pool.shutdown() }
        let lane = pool.makeLane(limit: 2)
        let gate = DispatchSemaphore(value: 0)
        try lane.submit { _ = gate.wait(timeout: .now() + 10) }
        try lane.submit {}
        #expect((#expect(throws: FileError.self) { try lane.submit {} })?.code == .busy)
        gate.signal()
    }

    @Test func streamingUploadThroughALane() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = try FileStore(directory: directory.path)
        let pool = FileWorkerPool(threads: 2)
        defer { pool.shutdown() }
        let lane = pool.makeLane()
        let upload = try store.beginUpload(maxBytes: 1 << 20)
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<StoredFile, FileError>?>(nil)
        for i in 0..<10 {
            try lane.submit({ () throws(FileError) in try upload.append(Array(repeating: UInt8(i), count: 1000)) },
                            completion: { _ in })
        }
        try lane.submit({ () throws(FileError) -> StoredFile in
            try store.commit(try upload.finish(), mime: "application/octet-stream")
        }, completion: { result in
            outcome.withLock { $0 = result }
            done.signal()
        })
        #expect(done.wait(timeout: .now() + 10) == .success)
        let file = try #require(try outcome.withLock { $0 }?.get())
        #expect(file.metadata.size == 10_000)
        #expect(try store.read(file.id, range: 1000...1000) == [1])
    }
}

import Synchronization
