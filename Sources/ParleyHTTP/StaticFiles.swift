import Foundation

/// Serves files from a directory for GET and HEAD (e.g. the browser chat client).
///
/// `/` and any path ending in `/` serve that directory's `index.html`. A path with a `..`
/// segment, or one that resolves (through symlinks) outside the root, gets 403; a missing
/// file, a directory without `index.html`, a dotfile or another method gets `nil`, so the
/// router can try its own routes. Responses carry an ETag (size + mtime) and honour
/// `If-None-Match` with 304. Files are read whole with `Data`, so keep this for small assets
/// and off the event loop if they may be slow to read.
public struct StaticFiles: Sendable {
    /// The directory served, as resolved at init (symlinks followed).
    public let root: String
    /// Larger files are not served (`nil`): they would be read whole into memory.
    public var maxFileBytes: Int

    /// Serves files under `root`.
    public init(root: String, maxFileBytes: Int = 16 << 20) {
        let url = URL(fileURLWithPath: root).standardizedFileURL.resolvingSymlinksInPath()
        var path = url.path
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        self.root = path
        self.maxFileBytes = maxFileBytes
    }

    /// The response for `head`, or `nil` when there is no such file to serve.
    public func response(for head: HTTPRequestHead) -> HTTPResponse? {
        guard head.method == "GET" || head.method == "HEAD" else { return nil }
        guard head.path.hasPrefix("/") else { return nil }
        let segments = head.path.split(separator: "/", omittingEmptySubsequences: true)
        if segments.contains(where: { $0 == ".." || $0 == "." || $0.contains("\\") }) {
            return .text(403, "Forbidden\n")
        }
        if segments.contains(where: { $0.hasPrefix(".") }) { return nil }
        var relative = segments.joined(separator: "/")
        if head.path.hasSuffix("/") { relative += relative.isEmpty ? "index.html" : "/index.html" }

        let fileManager = FileManager.default
        var candidate = URL(fileURLWithPath: root).appendingPathComponent(relative)
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: candidate.path, isDirectory: &isDirectory) else { return nil }
        if isDirectory.boolValue {
            candidate.appendPathComponent("index.html")
            guard fileManager.fileExists(atPath: candidate.path, isDirectory: &isDirectory),
                  !isDirectory.boolValue else { return nil }
        }
        // A symlink inside the root may point anywhere; serve only what resolves inside it.
        let resolved = candidate.resolvingSymlinksInPath().path
        guard resolved.hasPrefix(root == "/" ? "/" : root + "/") else { return .text(403, "Forbidden\n") }

        guard let attributes = try? fileManager.attributesOfItem(atPath: resolved),
              (attributes[.type] as? FileAttributeType) == .typeRegular,
              let size = (attributes[.size] as? NSNumber)?.intValue, size <= maxFileBytes else { return nil }
        let modified = attributes[.modificationDate] as? Date ?? Date(timeIntervalSince1970: 0)
        let etag = "\"\(String(size, radix: 16))-\(String(Int(modified.timeIntervalSince1970), radix: 16))\""

        var headers: HTTPHeaders = [
            "Content-Type": Self.contentType(forExtension: (resolved as NSString).pathExtension),
            "ETag": etag,
            "Last-Modified": httpDate(modified),
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
        ]
        if let ifNoneMatch = head.headers["If-None-Match"],
           ifNoneMatch.split(separator: ",").contains(where: {
               let tag = $0.trimmingCharacters(in: .whitespaces)
               return tag == etag || tag == "W/" + etag || tag == "*"
           }) {
            headers.remove("Content-Type")
            return HTTPResponse(status: 304, headers: headers)
        }
        if head.method == "HEAD" {
            headers.add("Content-Length", String(size))
            return HTTPResponse(status: 200, headers: headers)
        }
        guard let data = fileManager.contents(atPath: resolved) else { return nil }
        return HTTPResponse(status: 200, headers: headers, body: [UInt8](data))
    }

    /// The Content-Type for a file extension (case-insensitive); `application/octet-stream`
    /// when unknown.
    public static func contentType(forExtension ext: String) -> String {
        switch ext.lowercased() {
        case "html", "htm": "text/html; charset=utf-8"
        case "css": "text/css; charset=utf-8"
        case "js", "mjs": "text/javascript; charset=utf-8"
        case "json": "application/json"
        case "map": "application/json"
        case "png": "image/png"
        case "jpg", "jpeg": "image/jpeg"
        case "gif": "image/gif"
        case "webp": "image/webp"
        case "svg": "image/svg+xml"
        case "ico": "image/x-icon"
        case "txt": "text/plain; charset=utf-8"
        case "woff2": "font/woff2"
        case "woff": "font/woff"
        case "wasm": "application/wasm"
        default: "application/octet-stream"
        }
    }
}
