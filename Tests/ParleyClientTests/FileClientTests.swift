import Foundation
import ParleyClient
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Synchronization
import Testing

/// A PNG of `width` × `height` RGB pixels, stored (uncompressed) deflate: enough for the
/// server to decode, thumbnail and re-encode, without an image library in the test.
func tinyPNG(width: Int, height: Int) -> Data {
    func u32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
    func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }
    func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        return u32(UInt32(data.count)) + body + u32(crc32(body))
    }
    var raw: [UInt8] = []
    for y in 0..<height {
        raw.append(0)
        for x in 0..<width { raw += [UInt8(x * 255 / max(1, width - 1)), UInt8(y * 255 / max(1, height - 1)), 128] }
    }
    var zlib: [UInt8] = [0x78, 0x01]
    var offset = 0
    repeat {
        let block = Array(raw[offset..<min(raw.count, offset + 65_535)])
        offset += block.count
        let length = UInt16(block.count)
        zlib += [offset >= raw.count ? 1 : 0, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8)]
        zlib += block
    } while offset < raw.count
    var a: UInt32 = 1, b: UInt32 = 0
    for byte in raw {
        a = (a + UInt32(byte)) % 65_521
        b = (b + a) % 65_521
    }
    zlib += u32(b << 16 | a)
    let header = u32(UInt32(width)) + u32(UInt32(height)) + [8, 2, 0, 0, 0]
    return Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", header) + chunk("IDAT", zlib) + chunk("IEND", []))
}

@Suite(.serialized) struct FileClientTests {
    func client(_ server: ParleyServer, _ name: String) -> ParleyClient {
        ParleyClient(url: nativeURL(port: server.httpPort), channel: "demo", clientData: ["name": .string(name)])
    }

    @Test func publishingAFileStreamsProgressAndDeliversTypedAttachments() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = client(server, "alice"), bob = client(server, "bob")
        try await alice.connect()
        try await bob.connect()
        let aliceRoom = try await alice.subscribe("pics")
        let bobRoom = try await bob.subscribe("pics")
        let bobLog = EventLog(bobRoom)

        let png = tinyPNG(width: 800, height: 600)
        #expect(png.count > 1_000_000)
        let publish = aliceRoom.startPublishing(.data(png), name: "gradient.png", caption: "look")
        var steps: [UploadProgress] = []
        for await step in publish.progress { steps.append(step) }
        let ack = try await publish.value
        #expect(ack.offset == 1)
        #expect(steps.count > 2, "progress arrives as the bytes go: \(steps.count) steps")
        #expect(steps.map(\.sentBytes) == steps.map(\.sentBytes).sorted())
        #expect(steps.last == UploadProgress(sentBytes: png.count, totalBytes: png.count))

        let event = try await bobLog.waitFor("the picture") { if case .message(let m) = $0 { !m.attachments.isEmpty } else { false } }
        guard case .message(let message) = event else { return }
        #expect(message.caption == "look")
        let picture = try #require(message.attachments.first)
        #expect(picture.name == "gradient.png" && picture.mime == "image/png" && picture.isImage)
        #expect(picture.width == 800 && picture.height == 600)
        #expect(picture.thumbnail?.width == 480 && picture.thumbnail?.height == 360)
        #expect(picture.url.hasPrefix("http://127.0.0.1:\(server.httpPort)/demo/files/"))

        // From a file on disk, with the type guessed from its name.
        let path = NSTemporaryDirectory() + "parley-client-\(UUID().uuidString).txt"
        try Data("minutes of the meeting\n".utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await aliceRoom.publish(file: URL(fileURLWithPath: path), name: "minutes.txt")
        let text = try await bobLog.waitFor("the text file") {
            if case .message(let m) = $0 { m.attachments.first?.name == "minutes.txt" } else { false }
        }
        guard case .message(let second) = text else { return }
        #expect(second.caption == nil && second.attachments[0].mime == "text/plain" && !second.attachments[0].isImage)
        #expect(second.attachments[0].size == 23)

        // The transcript model shows them as lines with files.
        var state = ChatRoomState()
        state.apply(.message(message))
        state.apply(.message(second))
        #expect(state.lines.map(\.text) == ["look", ""])
        #expect(state.lines[1].attachmentLines == ["[file minutes.txt 23 B] \(second.attachments[0].url)"])
        await alice.disconnect()
        await bob.disconnect()
    }

    @Test func refusalsAndCancellationAreErrors() async throws {
        let server = try startClientTestServer { $0.uploadMaxBytes = 2_000_000 }
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = client(server, "alice")
        try await alice.connect()
        let room = try await alice.subscribe("files")
        // Too large: the server's answer says so.
        do {
            try await room.publish(file: Data(repeating: 0x61, count: 3_000_000), name: "big.txt")
            Issue.record("a file over the limit was accepted")
        } catch {
            #expect(error.code == .server && error.message.contains("413"), "\(error)")
        }
        // A type the server does not take.
        do {
            try await room.publish(file: Data([0x4D, 0x5A, 0x90, 0, 3, 0, 0, 0]), name: "tool.exe")
            Issue.record("an executable was accepted")
        } catch {
            #expect(error.message.contains("415"), "\(error)")
        }
        // Cancelled once it is under way.
        let publish = room.startPublishing(.data(Data(repeating: 0x62, count: 1_900_000)), name: "slow.txt")
        for await step in publish.progress where step.sentBytes > 0 {
            publish.cancel()
            break
        }
        await #expect(throws: ParleyClientError.self) { try await publish.value }
        // Nothing was published.
        let history = try await room.history(limit: 10)
        #expect(history.messages.isEmpty)
        await alice.disconnect()
    }

    @Test func uploadNeedsATokenThatAllowsPublishing() async throws {
        let server = try startClientTestServer { c in
            c.channels = [ChannelSettings(id: "acme", secret: "s3cret", requireAuth: true)]
        }
        defer { server.shutdown(timeout: .seconds(1)) }
        let token = TokenVerifier(hmac: OpenSSLHMAC()).mint(
            secret: "s3cret", channel: "acme", client: "*", expiresAtSeconds: Int64(Date().timeIntervalSince1970) + 600,
            permissions: [(pattern: "team", publish: true, subscribe: true, history: 10)])
        let uploader = ParleyClient(url: nativeURL(port: server.httpPort), channel: "acme", token: token)
        let attachment = try await uploader.upload(.data(Data("hello".utf8)), name: "hello.txt", room: "team")
        #expect(attachment.size == 5)
        do {
            _ = try await uploader.upload(.data(Data("hello".utf8)), name: "hello.txt", room: "elsewhere")
            Issue.record("uploaded where the token does not allow publishing")
        } catch {
            #expect(error.message.contains("403"), "\(error)")
        }
        let anonymous = ParleyClient(url: nativeURL(port: server.httpPort), channel: "acme")
        await #expect(throws: ParleyClientError.self) {
            _ = try await anonymous.upload(.data(Data("hello".utf8)), name: "hello.txt", room: "team")
        }
    }
}
