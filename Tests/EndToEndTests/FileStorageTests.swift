import Foundation
import ParleyCore
import ParleyFiles
import ParleyIO
@testable import ParleyServer
import ParleyTestSupport
import Testing

/// What is stored and served: clean images, inert documents, limits, nothing left behind.
@Suite(.serialized) struct FileStorageTests {
    @Test func gpsIsGoneFromTheStoredFileAndTheThumbnail() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let upload = FileFixtures.photoWithGPS()
        #expect(FileFixtures.contains(upload, FileFixtures.secret))
        #expect(FileFixtures.metadataFields(upload)?.contains("exif-ifd3-GPSLatitude") == true)

        // As multipart, the way browsers send it.
        let form = multipartBody(file: upload, name: "IMG_0001.JPG", type: "image/jpeg", fields: [("caption", "ignored")])
        let response = try fileRequest(port: server.httpPort, "POST", "/demo/files", headers: [("Content-Type", form.contentType)],
                                       body: form.body)
        #expect(response.status == 201, "\(response.text)")
        let attachment = try #require(response.json)
        #expect(attachment["name"] == "IMG_0001.JPG")
        let image = try server.download(try #require(attachment["url"]?.stringValue))
        let thumbnail = try server.download(try #require(attachment["thumbnail"]?["url"]?.stringValue))
        #expect(image.status == 200 && thumbnail.status == 200)
        #expect(thumbnail.header("Content-Type") == "image/webp")
        for bytes in [image.body, thumbnail.body] {
            #expect(!FileFixtures.contains(bytes, FileFixtures.secret))
            #expect(!FileFixtures.contains(bytes, "Exif"))
            #expect(FileFixtures.metadataFields(bytes) == [], "libvips reads no metadata back")
        }
        #expect(!FileFixtures.jpegMarkers(image.body).contains(0xE1), "no APP1 segment")
        // Orientation 6 was applied to the pixels: 64×32 became 32×64.
        #expect(FileFixtures.size(image.body)! == (32, 64))
        #expect(FileFixtures.size(thumbnail.body)! == (32, 64))
        #expect(attachment["width"] == 32 && attachment["height"] == 64)
    }

    @Test func heicBecomesAJPEGRendition() throws {
        try #require(ImageProcessor.canEncodeHEIC, "this libheif cannot encode HEIC fixtures")
        let server = try startTestServer()
        defer { server.shutdown() }
        let heic = FileFixtures.image(.heic, width: 120, height: 80)
        let attachment = try server.uploaded(heic, name: "IMG_0002.HEIC", type: "image/heic")
        #expect(attachment["mime"] == "image/jpeg")
        #expect(attachment["name"] == "IMG_0002.jpg")
        #expect(attachment["width"] == 120 && attachment["height"] == 80)
        let image = try server.download(try #require(attachment["url"]?.stringValue))
        #expect(image.header("Content-Type") == "image/jpeg")
        #expect(ImageFormat.sniff(image.body) == .jpeg)
        #expect(image.header("Content-Disposition")?.contains("IMG_0002.jpg") == true)
    }

    @Test func downloadsHaveTypesValidatorsRangesAndSecurityHeaders() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let text = Array(String(repeating: "line of text\n", count: 20_000).utf8)
        let file = try server.uploaded(text, name: "notes.txt", type: "text/plain")
        let url = try #require(file["url"]?.stringValue)
        let whole = try server.download(url)
        #expect(whole.status == 200 && whole.body == text)
        #expect(whole.header("Content-Length") == String(text.count))
        #expect(whole.header("Content-Type") == "text/plain; charset=utf-8")
        #expect(whole.header("X-Content-Type-Options") == "nosniff")
        #expect(whole.header("Content-Security-Policy") == "sandbox")
        #expect(whole.header("Content-Disposition")?.hasPrefix("attachment") == true)
        #expect(whole.header("Accept-Ranges") == "bytes")
        let etag = try #require(whole.header("ETag"))

        let middle = try server.download(url, headers: [("Range", "bytes=100000-100099")])
        #expect(middle.status == 206 && middle.body == Array(text[100_000...100_099]))
        #expect(middle.header("Content-Range") == "bytes 100000-100099/\(text.count)")
        let tail = try server.download(url, headers: [("Range", "bytes=-10")])
        #expect(tail.status == 206 && tail.body == Array(text.suffix(10)))
        let outside = try server.download(url, headers: [("Range", "bytes=\(text.count)-")])
        #expect(outside.status == 416 && outside.header("Content-Range") == "bytes */\(text.count)")
        let cached = try server.download(url, headers: [("If-None-Match", etag)])
        #expect(cached.status == 304 && cached.body.isEmpty)
        let head = try server.download(url, method: "HEAD")
        #expect(head.status == 200 && head.header("Content-Length") == String(text.count) && head.body.isEmpty)
        #expect(try server.download(url + "/thumbnail").status == 404)
        #expect(try server.download(url.replacingOccurrences(of: "/demo/", with: "/other/")).status == 404)
    }

    @Test func badImagesAreRefusedAndScriptIsServedInertly() throws {
        let server = try startTestServer { $0.uploadTypes = ["image/*", "application/pdf", "text/plain"] }
        defer { server.shutdown() }
        let jpeg = FileFixtures.image(.jpeg, width: 400, height: 300)
        let truncated = try server.upload(Array(jpeg.prefix(jpeg.count / 2)), name: "cut.jpg", type: "image/jpeg")
        #expect(truncated.status == 415, "\(truncated.text)")
        #expect(truncated.header("Content-Type")?.hasPrefix("text/plain") == true && !truncated.text.isEmpty)
        let bomb = try server.upload(FileFixtures.pngBomb(width: 100_000, height: 100_000), name: "bomb.png", type: "image/png")
        #expect(bomb.status == 413, "\(bomb.text)")
        let liar = try server.upload(Array("not an image".utf8), name: "x.png", type: "image/png")
        #expect(liar.status == 415)

        // SVG may be allowed (here by image/*), but it is never shown inline: downloaded, with
        // its scripts sandboxed and no sniffing.
        let svg = try server.uploaded(FileFixtures.svgWithScript, name: "logo.svg", type: "image/svg+xml")
        #expect(svg["mime"] == "image/svg+xml" && svg["width"] == nil && svg["thumbnail"] == nil)
        let served = try server.download(try #require(svg["url"]?.stringValue))
        #expect(served.header("Content-Disposition")?.hasPrefix("attachment;") == true)
        #expect(served.header("Content-Security-Policy") == "sandbox")
        #expect(served.header("X-Content-Type-Options") == "nosniff")
        // HTML claiming to be text is HTML by its bytes: refused (not on the list).
        let html = try server.upload(Array("<!doctype html><script>alert(1)</script>".utf8), name: "a.txt", type: "text/plain")
        #expect(html.status == 415)
        // And with the default list, SVG is refused outright.
        let strict = try startTestServer()
        defer { strict.shutdown() }
        #expect(try strict.upload(FileFixtures.svgWithScript, name: "logo.svg", type: "image/svg+xml").status == 415)
        #expect(try strict.upload(Array("%!PS".utf8) + Array(repeating: 0, count: 10), name: "a.bin", type: "application/octet-stream").status == 415)
    }

    @Test func sizeRateAndQuotaLimits() throws {
        let server = try startTestServer { c in
            c.uploadMaxBytes = 100_000
            var small = ChannelSettings(id: "small")
            small.uploadMaxBytes = 1_000
            small.uploadTypes = ["application/pdf"]
            var tight = ChannelSettings(id: "tight")
            tight.filesQuotaBytes = 150_000
            var slow = ChannelSettings(id: "slow")
            slow.uploadsPerMinute = 2
            c.channels = [small, tight, slow]
            c.openChannels = true
        }
        defer { server.shutdown() }
        let text = { (n: Int) in [UInt8](repeating: UInt8(ascii: "a"), count: n) }
        // Too large, said by Content-Length: refused on the head, with a text body.
        let big = try server.upload(text(100_001), name: "big.txt", type: "text/plain")
        #expect(big.status == 413 && big.text.contains("100000") && big.header("Content-Type")?.hasPrefix("text/plain") == true)
        // ... also while the client is still sending its body: the server drops what comes
        // instead of closing (a close with unread bytes resets the connection, and the client
        // would lose the answer).
        let eager = try TestSocket(port: server.httpPort)
        try eager.send("POST /demo/files?name=e.txt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 3000000\r\n\r\n")
        for _ in 0..<8 { try eager.send(text(64_000)) }
        Thread.sleep(forTimeInterval: 0.3)   // what the server does next is the point: no condition to wait for
        let eagerAnswer = try readResponse(eager, timeout: 10)
        #expect(eagerAnswer.status == 413, "\(eagerAnswer)")
        // Too large without a declared length (chunked): refused when it passes the limit.
        let socket = try TestSocket(port: server.httpPort)
        try socket.send("POST /demo/files?name=c.txt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in 0..<30 { try? socket.send("1000\r\n" + String(repeating: "b", count: 4096) + "\r\n") }
        try? socket.send("0\r\n\r\n")
        let chunked = try readResponse(socket, timeout: 10)
        #expect(chunked.status == 413)
        // Per channel: its own size and types.
        #expect(try server.upload(FileFixtures.pdf + text(1_000), name: "a.pdf", type: "application/pdf", channel: "small").status == 413)
        #expect(try server.upload(text(10), name: "a.txt", type: "text/plain", channel: "small").status == 415)
        #expect(try server.upload(FileFixtures.pdf, name: "a.pdf", type: "application/pdf", channel: "small").status == 201)

        // The channel's storage: a second file of 90 kB would pass 150 kB.
        #expect(try server.upload(text(90_000), name: "1.txt", type: "text/plain", channel: "tight").status == 201)
        let over = try server.upload(text(90_000) + [1], name: "2.txt", type: "text/plain", channel: "tight")
        #expect(over.status == 429 && over.text.contains("storage"), "\(over.text)")
        #expect(try server.upload(text(50_000), name: "3.txt", type: "text/plain", channel: "tight").status == 201)

        // Two uploads a minute per client: the third is refused, with Retry-After.
        #expect(try server.upload(text(10), name: "1.txt", type: "text/plain", channel: "slow").status == 201)
        #expect(try server.upload(text(11), name: "2.txt", type: "text/plain", channel: "slow").status == 201)
        let limited = try server.upload(text(12), name: "3.txt", type: "text/plain", channel: "slow")
        #expect(limited.status == 429 && limited.header("Retry-After") != nil && limited.text.contains("per minute"), "\(limited.text)")
        // Other channels keep their own allowance.
        #expect(try server.upload(text(13), name: "4.txt", type: "text/plain").status == 201)
    }

    @Test func anUploadCutOffHalfwayLeavesNothing() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let socket = try TestSocket(port: server.httpPort)
        try socket.send("POST /demo/files?name=half.txt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 2000000\r\n\r\n")
        try socket.send([UInt8](repeating: 0x61, count: 1_000_000))
        let files = server.core.files
        // The bytes reached the disk (a temporary file)...
        try eventuallyBlocking("the first half is written", timeout: 20) { files.store.temporaryFileCount > 0 }
        socket.abort()
        // ...and are gone once the connection is.
        try eventuallyBlocking("the temporary file is removed", timeout: 20) { files.store.temporaryFileCount == 0 }
        #expect(files.store.storedFiles().isEmpty)
        #expect(files.registry.usage(of: "demo") == 0)
    }

    @Test func aLargeUploadStreamsThroughAndComesBackIntact() throws {
        let server = try startTestServer { $0.uploadMaxBytes = 10 << 20 }
        defer { server.shutdown() }
        var generator = SeededRNG(seed: 7)
        let bytes = (0..<(9 << 20)).map { _ in UInt8(ascii: "a") + UInt8.random(in: 0...25, using: &generator) }
        let attachment = try server.uploaded(bytes, name: "big.txt", type: "text/plain")
        #expect(attachment["size"]?.intValue == bytes.count)
        let back = try server.download(try #require(attachment["url"]?.stringValue))
        #expect(back.body.count == bytes.count && back.body == bytes)
    }

    @Test func garbageCollectionFollowsMessageRetention() throws {
        let server = try startTestServer { c in
            c.retentionCount = 2
            c.uploadGraceSeconds = 60
        }
        defer { server.shutdown() }
        let files = server.core.files
        let kept = try server.uploaded(Array("kept".utf8), name: "kept.txt", type: "text/plain")
        let dropped = try server.uploaded(Array("dropped".utf8), name: "dropped.txt", type: "text/plain")
        let never = try server.uploaded(Array("never".utf8), name: "never.txt", type: "text/plain")
        let alice = try NativeClient.connect(server)
        #expect(try alice.publishAcknowledged(["attachments": [try #require(dropped["id"])]], to: "gc")["error"] == nil)
        #expect(try alice.publishAcknowledged(["attachments": [try #require(kept["id"])]], to: "gc")["error"] == nil)
        #expect(try alice.publishAcknowledged("newest", to: "gc")["error"] == nil)
        // Retention keeps the 2 newest: the message with `dropped` is gone, `kept`'s is not.
        let now = server.hub.clock.nowMillis()
        try eventuallyBlocking("references written", timeout: 10) {
            !files.registry.references(of: kept["id"]!.stringValue!, channel: "demo").isEmpty
        }
        var report = files.collectNow(store: server.hub.store, nowMillis: now)
        #expect(report.uploadsRemoved == 0, "everything is within its grace period")
        // Ten minutes on: the published-then-dropped upload goes; the unpublished one waits
        // for its own grace period (60 s here)... which has passed too.
        report = files.collectNow(store: server.hub.store, nowMillis: now + 601_000)
        #expect(report.uploadsRemoved == 2 && report.uploadsKept == 1 && report.filesRemoved == 2, "\(report)")
        #expect(try server.download(try #require(dropped["url"]?.stringValue)).status == 404)
        #expect(try server.download(try #require(never["url"]?.stringValue)).status == 404)
        #expect(try server.download(try #require(kept["url"]?.stringValue)).body == Array("kept".utf8))
        // A publish naming a collected upload is refused.
        #expect(try alice.publishAcknowledged(["attachments": [try #require(dropped["id"])]], to: "gc")["error"] != nil)
    }

    @Test func twoNodesShareOneFilesDirectory() throws {
        let shared = NSTemporaryDirectory() + "parley-shared-files-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: shared) }
        let one = try startTestServer { $0.filesDirectory = shared }
        defer { one.shutdown() }
        let two = try startTestServer { $0.filesDirectory = shared }
        defer { two.shutdown() }
        #expect(one.configuration.dataDirectory != two.configuration.dataDirectory)
        let photo = try one.uploaded(FileFixtures.image(.png, width: 50, height: 40), name: "pic.png", type: "image/png")
        let url = try #require(photo["url"]?.stringValue)
        #expect(url.contains(":\(one.httpPort)/"))
        // The other node serves it, thumbnail included...
        let there = try two.download(url)
        #expect(there.status == 200 && there.header("Content-Type") == "image/png")
        #expect(there.body == (try one.download(url)).body)
        #expect(try two.download(try #require(photo["thumbnail"]?["url"]?.stringValue)).status == 200)
        // ...and accepts it in a message.
        let bob = try NativeClient.connect(two)
        let reply = try bob.publishAcknowledged(["attachments": [try #require(photo["id"])]], to: "shared")
        #expect(reply["error"] == nil, "\(reply)")
    }
}

extension FileStore {
    /// Uploads in progress (their temporary files).
    var temporaryFileCount: Int {
        (try? FileManager.default.contentsOfDirectory(atPath: directory + "/files/tmp").count) ?? 0
    }
}

/// A download to a client that does not read holds a bounded amount in the server.
@Suite struct FileDownloadMemoryTests {
    /// The most bytes queued on any of the server's connections, read on their loops.
    func largestQueue(_ server: ParleyServer) -> Int {
        let largest = Locked(0)
        let done = DispatchGroup()
        for loop in server.group.loops {
            done.enter()
            loop.execute {
                loop.forEachConnection { connection in largest.withLock { $0 = max($0, connection.queuedBytes) } }
                done.leave()
            }
        }
        _ = done.wait(timeout: .now() + 10)
        return largest.value
    }

    @Test func aSlowReaderDoesNotMakeTheServerBufferTheFile() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let text = (0..<(8 << 20)).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        let file = try server.uploaded(text, name: "big.txt", type: "text/plain")
        let url = try #require(file["url"]?.stringValue)
        let path = String(url[try #require(url.range(of: "/demo/files/")).lowerBound...])
        let socket = try TestSocket(port: server.httpPort, receiveBuffer: 8192)
        try socket.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        // The download has begun and is waiting for the reader: what the server holds for
        // it stays near one chunk plus the drain mark, not the 8 MiB file.
        try eventuallyBlocking("the download is under way", timeout: 10) { largestQueue(server) > 0 }
        var peak = 0
        for _ in 0..<20 {
            peak = max(peak, largestQueue(server))
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(peak > 0 && peak <= DownloadStreamer.lowWater + 2 * DownloadStreamer.chunkBytes, "\(peak) bytes queued")
        // And the reader gets every byte.
        let response = try readResponse(socket, timeout: 60)
        #expect(response.status == 200 && response.body.count == text.count && response.body == text)
    }
}
