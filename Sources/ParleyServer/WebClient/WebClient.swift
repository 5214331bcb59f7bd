import COpenSSL
import CZlib
import Foundation
import ParleyHTTP

/// The browser chat client (`Sources/ParleyServer/Web`, hand-written HTML/CSS/JS, no build
/// step of its own), served at `/` by the HTTP door.
///
/// The files are embedded in the binary at build time (the EmbedWebAssets plugin), so a
/// copied `parley` serves its own client and nothing is read from disk: each file is decoded
/// once, with its gzip form, ETag and Last-Modified, and requests are answered from memory.
enum WebClient {
    /// One embedded file, ready to serve.
    struct Asset: Sendable {
        let contentType: String
        let body: [UInt8]
        /// The gzip form, when it is smaller.
        let gzipped: [UInt8]?
        let etag: String
        let lastModified: String
    }

    /// Path (without the leading `/`) → asset.
    static let assets: [String: Asset] = {
        var assets: [String: Asset] = [:]
        for (path, modified, base64) in embeddedWebAssets {
            guard let data = Data(base64Encoded: base64) else { continue }
            let body = [UInt8](data)
            let gzipped = gzip(body).flatMap { $0.count < body.count ? $0 : nil }
            assets[path] = Asset(contentType: StaticFiles.contentType(forExtension: (path as NSString).pathExtension),
                                 body: body, gzipped: gzipped, etag: "\"\(sha256Prefix(body))\"",
                                 lastModified: httpDate(Date(timeIntervalSince1970: Double(modified))))
        }
        return assets
    }()

    /// Sent with the page and its assets: everything comes from this origin, and the page
    /// talks to this origin's WebSocket only (a second line of defence against injection).
    static let contentSecurityPolicy =
        "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

    /// The response for a GET/HEAD of a client file, or nil (not ours: routing goes on).
    /// HEAD responses carry the file's Content-Length and no body. The admin dashboard's
    /// files (`Web/admin/`) are served by ``AdminDashboard`` only.
    static func response(for head: HTTPRequestHead) -> HTTPResponse? {
        guard head.path.hasPrefix("/") else { return nil }
        var path = String(head.path.dropFirst())
        if path.isEmpty || path.hasSuffix("/") { path += "index.html" }
        guard !path.hasPrefix("admin/") else { return nil }
        return response(for: head, asset: path, contentSecurityPolicy: contentSecurityPolicy)
    }

    /// The response for a GET/HEAD of the embedded file at `path` (relative to `Web/`), with
    /// the given policy, or nil when there is no such file.
    static func response(for head: HTTPRequestHead, asset path: String, contentSecurityPolicy: String,
                         extraHeaders: [(String, String)] = []) -> HTTPResponse? {
        guard head.method == "GET" || head.method == "HEAD", let asset = assets[path] else { return nil }
        var headers: HTTPHeaders = [
            "Content-Type": asset.contentType,
            "ETag": asset.etag,
            "Last-Modified": asset.lastModified,
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": contentSecurityPolicy,
            "Referrer-Policy": "no-referrer",
            "Vary": "Accept-Encoding",
        ]
        for (name, value) in extraHeaders { headers.set(name, value) }
        if notModified(head, asset) {
            headers.remove("Content-Type")
            return HTTPResponse(status: 304, headers: headers)
        }
        var body = asset.body
        if let gzipped = asset.gzipped, acceptsGzip(head) {
            body = gzipped
            headers.set("Content-Encoding", "gzip")
        }
        if head.method == "HEAD" {
            headers.set("Content-Length", String(body.count))
            return HTTPResponse(status: 200, headers: headers)
        }
        return HTTPResponse(status: 200, headers: headers, body: body)
    }

    /// `If-None-Match` wins over `If-Modified-Since` (RFC 9110 §13.2.2).
    private static func notModified(_ head: HTTPRequestHead, _ asset: Asset) -> Bool {
        if let ifNoneMatch = head.headers["If-None-Match"] {
            return ifNoneMatch.split(separator: ",").contains {
                let tag = $0.trimmingCharacters(in: .whitespaces)
                return tag == asset.etag || tag == "W/" + asset.etag || tag == "*"
            }
        }
        return head.headers["If-Modified-Since"] == asset.lastModified
    }

    private static func acceptsGzip(_ head: HTTPRequestHead) -> Bool {
        guard let accept = head.headers["Accept-Encoding"] else { return false }
        return accept.split(separator: ",").contains { item in
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard parts.first == "gzip" else { return false }
            return !parts.dropFirst().contains { $0 == "q=0" || $0 == "q=0.0" || $0 == "q=0.00" || $0 == "q=0.000" }
        }
    }

    /// The first 16 hex digits of the SHA-256 of `bytes`.
    private static func sha256Prefix(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { output in _ = SHA256(input.baseAddress, input.count, output.baseAddress) }
        }
        return digest.prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// `bytes` as a gzip stream (zlib, best compression), nil if zlib fails.
    static func gzip(_ bytes: [UInt8]) -> [UInt8]? {
        var stream = z_stream()
        // 15 + 16: a 32 KiB window with a gzip header and trailer.
        guard parley_deflateInit2(&stream, Z_BEST_COMPRESSION, 15 + 16, 9) == Z_OK else { return nil }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(bytes.count))) + 32)
        var input = bytes
        let status = input.withUnsafeMutableBufferPointer { inputBuffer in
            output.withUnsafeMutableBufferPointer { outputBuffer -> Int32 in
                stream.next_in = inputBuffer.baseAddress
                stream.avail_in = UInt32(inputBuffer.count)
                stream.next_out = outputBuffer.baseAddress
                stream.avail_out = UInt32(outputBuffer.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        return Array(output.prefix(Int(stream.total_out)))
    }
}
