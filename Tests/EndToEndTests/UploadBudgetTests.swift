import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// Upload rates and byte budgets count per client address across channels, and for the whole
/// server: fresh channels (open mode makes them for free) bring no fresh allowance.
@Suite(.serialized) struct UploadBudgetTests {
    private let text = { (n: Int) in [UInt8](repeating: UInt8(ascii: "a"), count: n) }

    @Test func theUploadRateIsPerAddressAcrossChannels() throws {
        let server = try startTestServer { $0.uploadsPerMinute = 2 }
        defer { server.shutdown() }
        #expect(try server.upload(text(10), name: "1.txt", type: "text/plain", channel: "fresh1").status == 201)
        #expect(try server.upload(text(11), name: "2.txt", type: "text/plain", channel: "fresh2").status == 201)
        let third = try server.upload(text(12), name: "3.txt", type: "text/plain", channel: "fresh3")
        #expect(third.status == 429 && third.text.contains("per minute from your address") && third.header("Retry-After") != nil, "\(third.text)")
    }

    @Test func theByteBudgetIsPerAddressAcrossChannels() throws {
        let server = try startTestServer {
            $0.uploadBytesPerIPPerDay = 100_000
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!]
        }
        defer { server.shutdown() }
        let alice = [("X-Forwarded-For", "203.0.113.1")]
        #expect(try server.upload(text(60_000), name: "1.txt", type: "text/plain", channel: "fresh1", headers: alice).status == 201)
        let second = try server.upload(text(60_000), name: "2.txt", type: "text/plain", channel: "fresh2", headers: alice)
        #expect(second.status == 429 && second.text.contains("upload budget"), "\(second.text)")
        // Without a declared length the budget is charged when the file is complete.
        let socket = try TestSocket(port: server.httpPort)
        try socket.send("POST /fresh3/files?name=c.txt HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 203.0.113.1\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
        try socket.send("EA60\r\n" + String(repeating: "b", count: 60_000) + "\r\n0\r\n\r\n")
        let chunked = try readResponse(socket, timeout: 10)
        #expect(chunked.status == 429 && chunked.text.contains("upload budget"), "\(chunked.text)")
        // Another client behind the proxy has a budget of its own.
        #expect(try server.upload(text(60_000), name: "3.txt", type: "text/plain", channel: "fresh1",
                                  headers: [("X-Forwarded-For", "203.0.113.2")]).status == 201)
    }

    @Test func theServerHasBudgetsOfItsOwn() throws {
        let server = try startTestServer {
            $0.uploadsPerMinuteTotal = 3
            $0.uploadBytesTotalPerDay = 50_000
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!]
        }
        defer { server.shutdown() }
        func from(_ n: Int) -> [(String, String)] { [("X-Forwarded-For", "203.0.113.\(n)")] }
        #expect(try server.upload(text(40_000), name: "1.txt", type: "text/plain", channel: "c1", headers: from(1)).status == 201)
        let bytes = try server.upload(text(20_000), name: "2.txt", type: "text/plain", channel: "c2", headers: from(2))
        #expect(bytes.status == 429 && bytes.text.contains("the server has used its upload budget"), "\(bytes.text)")
        #expect(try server.upload(text(10), name: "3.txt", type: "text/plain", channel: "c3", headers: from(3)).status == 201)
        // Refused on what it declared, the second upload cost no rate token: the fourth
        // client's is the third of the minute, and a fifth client is turned away.
        #expect(try server.upload(text(10), name: "4.txt", type: "text/plain", channel: "c4", headers: from(4)).status == 201)
        let rate = try server.upload(text(10), name: "5.txt", type: "text/plain", channel: "c5", headers: from(5))
        #expect(rate.status == 429 && rate.text.contains("the server takes no more uploads"), "\(rate.text)")
    }

    /// A tiny PNG may declare 3000 × 3000 pixels: seconds of a worker and hundreds of MB in
    /// the decoder. The declared pixels are paid for from the header, before decoding,
    /// whether or not the image then decodes.
    @Test func imageWorkIsBudgetedPerAddressAcrossChannelsBeforeDecoding() throws {
        let server = try startTestServer {
            $0.imagePixelsPerIPPerMinute = 10_000_000
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!]
        }
        defer { server.shutdown() }
        let mallory = [("X-Forwarded-For", "203.0.113.7")]
        let bomb = FileFixtures.pngBomb(width: 3000, height: 3000)
        let first = try server.upload(bomb, name: "a.png", type: "image/png", channel: "fresh1", headers: mallory)
        #expect(first.status != 429, "\(first.text)")
        let second = try server.upload(bomb, name: "b.png", type: "image/png", channel: "fresh2", headers: mallory)
        #expect(second.status == 429 && second.text.contains("image budget") && second.text.contains("9.0 megapixels"),
                "\(second.status) \(second.text)")
        // Files that are not images cost no image work; another address has its own budget.
        #expect(try server.upload(text(10), name: "c.txt", type: "text/plain", channel: "fresh3", headers: mallory).status == 201)
        #expect(try server.upload(FileFixtures.image(.png), name: "d.png", type: "image/png", channel: "fresh1",
                                  headers: [("X-Forwarded-For", "203.0.113.8")]).status == 201)
    }

    @Test func theServerHasAnImageBudgetOfItsOwn() throws {
        let server = try startTestServer {
            $0.imagePixelsTotalPerMinute = 3_000  // one 64 × 32 image
            $0.trustedProxies = [IPNetwork(parsing: "127.0.0.1")!]
        }
        defer { server.shutdown() }
        func from(_ n: Int) -> [(String, String)] { [("X-Forwarded-For", "203.0.113.\(n)")] }
        #expect(try server.upload(FileFixtures.image(.png), name: "1.png", type: "image/png", channel: "c1", headers: from(1)).status == 201)
        let busy = try server.upload(FileFixtures.image(.png), name: "2.png", type: "image/png", channel: "c2", headers: from(2))
        #expect(busy.status == 429 && busy.text.contains("busy with images"), "\(busy.status) \(busy.text)")
    }

    /// The upload limits are reloadable (the settings table says so): a reload puts them in
    /// force for the next upload, and what a client used stays used.
    @Test func aReloadChangesTheUploadLimits() throws {
        let server = try startTestServer {
            $0.uploadsPerMinute = 1
            $0.uploadMaxBytes = 1_000
        }
        defer { server.shutdown() }
        #expect(try server.upload(text(10), name: "1.txt", type: "text/plain", channel: "c1").status == 201)
        #expect(try server.upload(text(10), name: "2.txt", type: "text/plain", channel: "c1").status == 429)
        var fresh = server.configuration
        fresh.uploadsPerMinute = 3
        fresh.uploadMaxBytes = 100_000
        fresh.imagePixelsPerIPPerMinute = 1_000  // below one 64 × 32 image
        #expect(server.applyConfiguration(fresh).isEmpty)
        // Raised from 1 to 3 a minute, one used: two more go.
        #expect(try server.upload(text(5_000), name: "3.txt", type: "text/plain", channel: "c1").status == 201)
        let image = try server.upload(FileFixtures.image(.png), name: "4.png", type: "image/png", channel: "c1")
        #expect(image.status == 429 && image.text.contains("image budget"), "\(image.status) \(image.text)")
        #expect(try server.upload(text(10), name: "5.txt", type: "text/plain", channel: "c1").status == 429)
    }
}
