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
}
