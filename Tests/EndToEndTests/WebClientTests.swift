import Foundation
import ParleyServer
import ParleyTestSupport
import Testing

/// The browser client at `/`: served by the server itself, with the right content types.
@Suite(.serialized) struct WebClientTests {
    /// One request with `Connection: close`; the status line + headers (lowercased names) and body.
    private func get(_ port: Int, _ target: String, method: String = "GET", extra: String = "") throws
        -> (status: Int, headers: [String: String], body: String) {
        let socket = try TestSocket(port: port)
        try socket.send("\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\(extra)\r\n")
        let deadline = Date().addingTimeInterval(5)
        while deadline.timeIntervalSinceNow > 0, try socket.fill(timeout: 0.2) {}
        let response = String(decoding: socket.buffered, as: UTF8.self)
        guard let split = response.range(of: "\r\n\r\n") else { throw TestSocket.Failure("no response: \(response.debugDescription)") }
        var lines = response[..<split.lowerBound].components(separatedBy: "\r\n")
        let status = Int(lines.removeFirst().split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers, String(response[split.upperBound...]))
    }

    @Test func pageAndAssetsAreServedWithContentTypes() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let page = try get(server.httpPort, "/")
        #expect(page.status == 200)
        #expect(page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(page.body.contains("<script src=\"app.js\""))
        #expect(page.body.contains("role=\"log\""))
        #expect(page.headers["etag"] != nil)
        #expect(page.headers["cache-control"] == "no-cache")
        #expect(page.headers["content-security-policy"]?.contains("default-src 'self'") == true)

        let script = try get(server.httpPort, "/app.js")
        #expect(script.status == 200)
        #expect(script.headers["content-type"] == "text/javascript; charset=utf-8")
        #expect(script.body.contains("/v3/websocket"))
        let style = try get(server.httpPort, "/style.css")
        #expect(style.status == 200)
        #expect(style.headers["content-type"] == "text/css; charset=utf-8")
        #expect(try get(server.httpPort, "/favicon.svg").headers["content-type"] == "image/svg+xml")

        // HEAD: the length of the file, no body; a known ETag: 304.
        let head = try get(server.httpPort, "/app.js", method: "HEAD")
        #expect(head.status == 200 && head.body.isEmpty)
        #expect(Int(head.headers["content-length"] ?? "") == script.body.utf8.count)
        let cached = try get(server.httpPort, "/style.css", extra: "If-None-Match: \(style.headers["etag"] ?? "")\r\n")
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
        let socket = try TestSocket(port: server.httpPort)
        try socket.send("GET /app.js HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: br, gzip;q=0.8\r\nConnection: close\r\n\r\n")
        let deadline = Date().addingTimeInterval(5)
        while deadline.timeIntervalSinceNow > 0, try socket.fill(timeout: 0.2) {}
        let raw = socket.buffered
        let split = try #require(raw.firstRange(of: Array("\r\n\r\n".utf8)))
        let head = String(decoding: raw[..<split.lowerBound], as: UTF8.self).lowercased()
        #expect(head.contains("content-encoding: gzip"))
        #expect(head.contains("vary: accept-encoding"))
        let compressed = Array(raw[split.upperBound...])
        let plain = try get(server.httpPort, "/app.js")
        #expect(compressed.count < plain.body.utf8.count / 2)
        #expect(try gunzip(compressed) == Array(plain.body.utf8))
        let lastModified = try #require(plain.headers["last-modified"])
        #expect(try get(server.httpPort, "/app.js", extra: "If-Modified-Since: \(lastModified)\r\n").status == 304)
        #expect(try get(server.httpPort, "/app.js", extra: "Accept-Encoding: gzip;q=0\r\n").headers["content-encoding"] == nil)
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
