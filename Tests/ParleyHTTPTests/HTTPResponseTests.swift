import Foundation
import Testing
@testable import ParleyHTTP

@Suite struct HTTPResponseTests {
    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func textResponseKeepAlive() {
        let wire = text(HTTPResponse.text(200, "hi").encoded(keepAlive: true, date: "Sun, 06 Nov 1994 08:49:37 GMT"))
        #expect(wire == "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\n"
            + "Server: parley\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\nhi")
    }

    @Test func closeReplacesConnectionHeader() {
        var response = HTTPResponse.json(404, Array(#"{"error":"nope"}"#.utf8))
        response.headers.add("Connection", "keep-alive")
        let wire = text(response.encoded(keepAlive: false))
        #expect(wire.hasPrefix("HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"))
        #expect(wire.contains("Connection: close\r\n"))
        #expect(!wire.contains("keep-alive"))
        #expect(wire.contains("Content-Length: 16\r\n"))
        #expect(wire.hasSuffix("\r\n\r\n{\"error\":\"nope\"}"))
    }

    @Test func noBodyStatusesOmitLengthAndBody() {
        let switching = HTTPResponse(status: 101, headers: ["Upgrade": "websocket", "Connection": "Upgrade"])
        #expect(text(switching.encoded(keepAlive: true))
            == "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nServer: parley\r\n\r\n")
        let noContent = HTTPResponse(status: 204, body: Array("ignored".utf8))
        #expect(text(noContent.encoded(keepAlive: true)) == "HTTP/1.1 204 No Content\r\nServer: parley\r\n\r\n")
        let notModified = HTTPResponse(status: 304, headers: ["ETag": "\"x\""])
        #expect(!text(notModified.encoded(keepAlive: true)).contains("Content-Length"))
    }

    @Test func explicitContentLengthIsKept() {
        // A HEAD response announces the length of the body it does not send.
        let head = HTTPResponse(status: 200, headers: ["Content-Length": "1234", "Server": "custom"])
        let wire = text(head.encoded(keepAlive: true))
        #expect(wire == "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nServer: custom\r\n\r\n")
    }

    @Test func headerInjectionIsNeutralized() {
        let response = HTTPResponse(status: 302, headers: ["Location": "/x\r\nSet-Cookie: evil=1"])
        let wire = text(response.encoded(keepAlive: true))
        #expect(wire.contains("Location: /x  Set-Cookie: evil=1\r\n"))
        #expect(!wire.contains("\r\nSet-Cookie"))
    }

    @Test func reasonPhrases() {
        #expect(httpReasonPhrase(200) == "OK")
        #expect(httpReasonPhrase(413) == "Content Too Large")
        #expect(httpReasonPhrase(431) == "Request Header Fields Too Large")
        #expect(httpReasonPhrase(505) == "HTTP Version Not Supported")
        #expect(httpReasonPhrase(499) == "Client Error")
    }

    @Test func parseErrorResponse() {
        let error = HTTPParseError(status: 431, message: "too many header fields")
        let wire = text(error.response.encoded(keepAlive: false))
        #expect(wire.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n"))
        #expect(wire.contains("Connection: close"))
    }

    @Test func imfFixdate() {
        #expect(httpDate(Date(timeIntervalSince1970: 784_111_777)) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(httpDate(Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(httpDate(Date(timeIntervalSince1970: 1_709_210_096)) == "Thu, 29 Feb 2024 12:34:56 GMT")
    }

    @Test func headersLookup() {
        var headers: HTTPHeaders = ["Connection": "keep-alive, Upgrade", "Accept": "a"]
        headers.add("accept", "b")
        #expect(headers["ACCEPT"] == "a")
        #expect(headers.values("Accept") == ["a", "b"])
        #expect(headers.contains("connection", token: "upgrade"))
        #expect(headers.contains("Connection", token: "KEEP-ALIVE"))
        #expect(!headers.contains("Connection", token: "keep"))
        headers.set("Accept", "c")
        #expect(headers.values("accept") == ["c"])
        headers.remove("connection")
        #expect(headers.count == 1)
    }
}

@Suite struct HTTPRouterTests {
    func router() -> HTTPRouter<String> {
        var router = HTTPRouter<String>()
        router.add("GET", "/", "index")
        router.add("GET", "/rooms/:room", "room")
        router.add("POST", "/rooms/:room/messages", "publish")
        router.add("GET", "/rooms/:room/messages", "history")
        router.add("GET", "/rooms/lobby", "lobby")
        router.add("GET", "/socket.io/*", "sio-get")
        router.add("POST", "/socket.io/*", "sio-post")
        return router
    }

    func found(_ match: HTTPRouteMatch<String>) -> (String, [String: String])? {
        if case .found(let handler, let params) = match { (handler, params) } else { nil }
    }

    @Test func literalAndParams() {
        let r = router()
        #expect(found(r.match(method: "GET", path: "/"))?.0 == "index")
        let room = found(r.match(method: "GET", path: "/rooms/general"))
        #expect(room?.0 == "room")
        #expect(room?.1 == ["room": "general"])
        let publish = found(r.match(method: "POST", path: "/rooms/a b/messages"))
        #expect(publish?.0 == "publish")
        #expect(publish?.1["room"] == "a b")
    }

    @Test func literalBeatsParameterRegardlessOfOrder() {
        #expect(found(router().match(method: "GET", path: "/rooms/lobby"))?.0 == "lobby")
    }

    @Test func methodNotAllowedListsMethods() {
        guard case .methodNotAllowed(let allowed) = router().match(method: "DELETE", path: "/rooms/x/messages") else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed == ["GET", "HEAD", "POST"])
    }

    @Test func headFallsBackToGet() {
        #expect(found(router().match(method: "HEAD", path: "/rooms/x"))?.0 == "room")
    }

    @Test func wildcard() {
        let r = router()
        let deep = found(r.match(method: "GET", path: "/socket.io/a/b"))
        #expect(deep?.0 == "sio-get")
        #expect(deep?.1["*"] == "a/b")
        #expect(found(r.match(method: "POST", path: "/socket.io/"))?.1["*"] == "")
        #expect(found(r.match(method: "GET", path: "/socket.io"))?.1["*"] == "")
    }

    @Test func notFound() {
        let r = router()
        for path in ["/nope", "/rooms", "/rooms/", "/rooms/x/messages/extra", "/rooms//messages"] {
            guard case .notFound = r.match(method: "GET", path: path) else {
                Issue.record("expected 404 for \(path)")
                continue
            }
        }
    }
}

@Suite struct StaticFilesTests {
    /// A fresh temp dir holding a small site and a secret next to it.
    func makeSite() throws -> (root: URL, files: StaticFiles) {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("parley-static-\(UUID().uuidString)")
        let root = base.appendingPathComponent("www")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("css"), withIntermediateDirectories: true)
        try Data("<h1>chat</h1>".utf8).write(to: root.appendingPathComponent("index.html"))
        try Data("body{}".utf8).write(to: root.appendingPathComponent("css/app.css"))
        try Data("{}".utf8).write(to: root.appendingPathComponent("data.JSON"))
        try Data([0x89, 0x50]).write(to: root.appendingPathComponent("logo.png"))
        try Data("x".utf8).write(to: root.appendingPathComponent(".env"))
        try Data("secret".utf8).write(to: base.appendingPathComponent("secret.txt"))
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("escape.txt"),
                                                   withDestinationURL: base.appendingPathComponent("secret.txt"))
        return (base, StaticFiles(root: root.path))
    }

    func get(_ files: StaticFiles, _ target: String, method: String = "GET",
             headers: HTTPHeaders = ["Host": "h"]) -> HTTPResponse? {
        var parser = HTTPRequestParser()
        let events = parser.feed(Array("\(method) \(target) HTTP/1.1\r\n".utf8)
            + Array(headers.map { "\($0.name): \($0.value)\r\n" }.joined().utf8) + Array("\r\n".utf8))
        guard case .head(let head)? = events.first else { return HTTPResponse(status: 400) }
        return files.response(for: head)
    }

    @Test func servesIndexAndContentTypes() throws {
        let (base, files) = try makeSite()
        defer { try? FileManager.default.removeItem(at: base) }
        let index = try #require(get(files, "/"))
        #expect(index.status == 200)
        #expect(index.headers["Content-Type"] == "text/html; charset=utf-8")
        #expect(index.body == Array("<h1>chat</h1>".utf8))
        #expect(get(files, "/css/app.css")?.headers["Content-Type"] == "text/css; charset=utf-8")
        #expect(get(files, "/data.JSON")?.headers["Content-Type"] == "application/json")
        #expect(get(files, "/logo.png")?.headers["Content-Type"] == "image/png")
        #expect(get(files, "/css/")?.status == nil)  // no index.html there
        #expect(StaticFiles.contentType(forExtension: "woff2") == "font/woff2")
        #expect(StaticFiles.contentType(forExtension: "svg") == "image/svg+xml")
        #expect(StaticFiles.contentType(forExtension: "ico") == "image/x-icon")
        #expect(StaticFiles.contentType(forExtension: "js") == "text/javascript; charset=utf-8")
    }

    @Test func headHasLengthButNoBody() throws {
        let (base, files) = try makeSite()
        defer { try? FileManager.default.removeItem(at: base) }
        let head = try #require(get(files, "/index.html", method: "HEAD"))
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        #expect(head.headers["Content-Length"] == "13")
        let wire = String(decoding: head.encoded(keepAlive: true), as: UTF8.self)
        #expect(wire.contains("Content-Length: 13\r\n"))
        #expect(wire.hasSuffix("\r\n\r\n"))
    }

    @Test func etagRevalidation() throws {
        let (base, files) = try makeSite()
        defer { try? FileManager.default.removeItem(at: base) }
        let first = try #require(get(files, "/index.html"))
        let etag = try #require(first.headers["ETag"])
        #expect(first.headers["Last-Modified"] != nil)
        let second = try #require(get(files, "/index.html", headers: ["Host": "h", "If-None-Match": etag]))
        #expect(second.status == 304)
        #expect(second.body.isEmpty)
    }

    @Test func refusesTraversalAndEscapes() throws {
        let (base, files) = try makeSite()
        defer { try? FileManager.default.removeItem(at: base) }
        #expect(get(files, "/../secret.txt")?.status == 403)
        #expect(get(files, "/css/%2e%2e/%2e%2e/secret.txt")?.status == 403)
        #expect(get(files, "/escape.txt")?.status == 403)  // symlink out of the root
        #expect(get(files, "/.env") == nil)
        #expect(get(files, "/missing.html") == nil)
        #expect(get(files, "/index.html", method: "POST") == nil)
    }
}
