import Foundation
import ParleyServer
import ParleyTestSupport
import Testing

/// The browser client at `/`: served by the server itself, with the right content types.
@Suite(.serialized) struct WebClientTests {
    /// One request with `Connection: close`.
    private func get(_ port: Int, _ target: String, method: String = "GET", headers: [(String, String)] = []) throws -> HTTPTestResponse {
        try httpRequest(port: port, method, target, headers: headers)
    }

    @Test func pageAndAssetsAreServedWithContentTypes() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let page = try get(server.httpPort, "/")
        #expect(page.status == 200)
        #expect(page.header("content-type") == "text/html; charset=utf-8")
        #expect(page.body.contains("<script src=\"app.js\""))
        #expect(page.body.contains("role=\"log\""))
        #expect(page.header("etag") != nil)
        #expect(page.header("cache-control") == "no-cache")
        #expect(page.header("content-security-policy")?.contains("default-src 'self'") == true)

        let script = try get(server.httpPort, "/app.js")
        #expect(script.status == 200)
        #expect(script.header("content-type") == "text/javascript; charset=utf-8")
        #expect(script.body.contains("/v3/websocket"))
        let style = try get(server.httpPort, "/style.css")
        #expect(style.status == 200)
        #expect(style.header("content-type") == "text/css; charset=utf-8")
        #expect(try get(server.httpPort, "/favicon.svg").header("content-type") == "image/svg+xml")

        // HEAD: the length of the file, no body; a known ETag: 304.
        let head = try get(server.httpPort, "/app.js", method: "HEAD")
        #expect(head.status == 200 && head.body.isEmpty)
        #expect(Int(head.header("content-length") ?? "") == script.body.utf8.count)
        let cached = try get(server.httpPort, "/style.css", headers: [("If-None-Match", style.header("etag") ?? "")])
        #expect(cached.status == 304)
    }

    @Test func unknownPathsAndOtherMethodsAreNotTheClients() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        #expect(try get(server.httpPort, "/no-such-file.js").status == 404)
        #expect(try get(server.httpPort, "/../Package.swift").status != 200)
        #expect(try get(server.httpPort, "/", method: "POST").status == 404)
        // REST routes still answer under the client's files.
        #expect(try get(server.httpPort, "/demo/stats").status == 200)
        #expect(try get(server.httpPort, "/v3/websocket").status == 426)
    }

    /// Compressed for clients that accept gzip, and conditional GETs by date as well as ETag.
    @Test func assetsAreGzippedAndCachedByDateToo() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let gzipped = try get(server.httpPort, "/app.js", headers: [("Accept-Encoding", "br, gzip;q=0.8")])
        #expect(gzipped.header("content-encoding")?.lowercased().hasPrefix("gzip") == true)
        #expect(gzipped.header("vary")?.lowercased().hasPrefix("accept-encoding") == true)
        let compressed = gzipped.bytes
        let plain = try get(server.httpPort, "/app.js")
        #expect(compressed.count < plain.body.utf8.count / 2)
        #expect(try gunzip(compressed) == Array(plain.body.utf8))
        let lastModified = try #require(plain.header("last-modified"))
        #expect(try get(server.httpPort, "/app.js", headers: [("If-Modified-Since", lastModified)]).status == 304)
        #expect(try get(server.httpPort, "/app.js", headers: [("Accept-Encoding", "gzip;q=0")]).header("content-encoding") == nil)
    }

    /// `parley` is one self-contained file: copied alone somewhere else, it serves its client.
    @Test func aCopiedBinaryServesItsOwnClient() throws {
        let directory = NSTemporaryDirectory() + "parley-copy-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let copy = directory + "/parley"
        try FileManager.default.copyItem(atPath: parleyBinary(), toPath: copy)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: copy)
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.arguments = ["serve", "--http-port", "0", "--line-port", "0", "--data", directory + "/data"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        defer { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        let reader = LineReader(output.fileHandleForReading)
        let line = try #require(reader.line(timeout: 10, matching: { $0.hasPrefix("http listening on") }))
        let port = try #require(Int(line.split(separator: ":").last ?? ""))
        let page = try get(port, "/")
        #expect(page.status == 200)
        #expect(page.body.contains("<script src=\"app.js\""))
    }

    private func gunzip(_ bytes: [UInt8]) throws -> [UInt8] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/gzip")
        process.arguments = ["-dc"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data(bytes))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return [UInt8](data)
    }
}
