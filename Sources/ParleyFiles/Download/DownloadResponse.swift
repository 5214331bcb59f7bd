/// Everything a door needs to answer `GET` (or `HEAD`) of a stored file: the status, the
/// headers, and which bytes to send. It does no I/O.
///
/// Security headers are always set: `X-Content-Type-Options: nosniff` (the browser never
/// second-guesses the type) and `Content-Security-Policy: sandbox` (a document opened from
/// Parley's origin runs no script), and anything that is not a raster image Parley decoded
/// is served with `Content-Disposition: attachment`, so an uploaded SVG or HTML file is
/// downloaded, never rendered.
public struct DownloadResponse: Sendable, Hashable {
    /// 200, 206, 304 or 416.
    public let status: Int
    /// Response headers, in order.
    public let headers: [(name: String, value: String)]
    /// The bytes to send (inclusive offsets); `nil` for no body (304, 416, or an empty file).
    public let range: ClosedRange<Int>?

    /// The answer for stored content `id` with `metadata`, offered under `name` (the upload's
    /// file name), given the request's `Range`, `If-Range` and `If-None-Match` values.
    public init(id: ContentID, metadata: FileMetadata, name: String?, rangeHeader: String? = nil,
                ifRange: String? = nil, ifNoneMatch: String? = nil, cacheControl: String = "private, max-age=31536000, immutable") {
        let etag = id.etag
        var headers: [(name: String, value: String)] = [
            ("ETag", etag),
            ("Cache-Control", cacheControl),
            ("X-Content-Type-Options", "nosniff"),
            ("Content-Security-Policy", "sandbox"),
        ]
        if let ifNoneMatch, DownloadResponse.matches(ifNoneMatch, etag) {
            status = 304
            self.headers = headers
            range = nil
            return
        }
        headers.append(("Content-Type", DownloadResponse.servedType(metadata.mime)))
        headers.append(("Content-Disposition", ContentDisposition.value(for: metadata, name: name)))
        headers.append(("Accept-Ranges", "bytes"))
        // If-Range with another validator: the file changed, send all of it.
        let rangeHeader = ifRange == nil || ifRange == etag ? rangeHeader : nil
        switch ByteRangeRequest(header: rangeHeader, size: metadata.size) {
        case .whole:
            status = 200
            headers.append(("Content-Length", String(metadata.size)))
            range = metadata.size > 0 ? 0...(metadata.size - 1) : nil
        case .partial(let bytes):
            status = 206
            headers.append(("Content-Range", "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(metadata.size)"))
            headers.append(("Content-Length", String(bytes.count)))
            range = bytes
        case .unsatisfiable:
            status = 416
            headers.append(("Content-Range", "bytes */\(metadata.size)"))
            headers.append(("Content-Length", "0"))
            range = nil
        }
        self.headers = headers
    }

    /// The value of the first header named `name` (case-insensitively).
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name.lowercased() == lower }?.value
    }

    /// Text types are declared UTF-8 so a browser never guesses another charset.
    static func servedType(_ mime: String) -> String {
        mime.hasPrefix("text/") ? mime + "; charset=utf-8" : mime
    }

    /// `If-None-Match`: `*` or a list of entity tags (weak comparison).
    static func matches(_ header: String, _ etag: String) -> Bool {
        header.split(separator: ",").contains { candidate in
            let tag = candidate.trimmingSpaces()
            return tag == "*" || tag == etag || tag == "W/" + etag
        }
    }

    public static func == (a: DownloadResponse, b: DownloadResponse) -> Bool {
        a.status == b.status && a.range == b.range && a.headers.elementsEqual(b.headers) { $0 == $1 }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(status)
        hasher.combine(range)
        for header in headers {
            hasher.combine(header.name)
            hasher.combine(header.value)
        }
    }
}

/// `Content-Disposition` for downloads.
public enum ContentDisposition {
    /// Only raster images Parley decoded are `inline`; everything else is `attachment`.
    public static func isInline(_ metadata: FileMetadata) -> Bool { metadata.isRasterImage }

    /// `inline` or `attachment`, with the file name as ASCII (`filename=`) and as UTF-8
    /// (`filename*=`, RFC 6266/8187).
    public static func value(for metadata: FileMetadata, name: String?) -> String {
        let kind = isInline(metadata) ? "inline" : "attachment"
        guard let name = name.map(FileName.sanitized), !name.isEmpty else { return kind }
        var ascii = ""
        for scalar in name.unicodeScalars {
            ascii += scalar.isASCII && scalar.value >= 0x20 && scalar != "\"" && scalar != "\\" && scalar != "%"
                ? String(scalar) : "_"
        }
        var encoded = ""
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!#$&+^`|".utf8)
        let digits = Array("0123456789ABCDEF".utf8)
        for byte in name.utf8 {
            if unreserved.contains(byte) {
                encoded.unicodeScalars.append(UnicodeScalar(byte))
            } else {
                encoded += "%" + String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return "\(kind); filename=\"\(ascii)\"; filename*=UTF-8''\(encoded)"
    }
}

/// Client-supplied file names, made safe to store, show and put in headers.
public enum FileName {
    /// The most UTF-8 bytes a name keeps.
    public static let maxBytes = 255

    /// The last path component (browsers on Windows used to send `C:\fakepath\x.jpg`),
    /// without control characters, at most ``maxBytes`` bytes (keeping the extension), never
    /// `.` or `..`; `"file"` when nothing is left.
    public static func sanitized(_ raw: String) -> String {
        let component = raw.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var name = String(String.UnicodeScalarView(component.unicodeScalars.filter {
            $0.value >= 0x20 && $0.value != 0x7F && !(0x80...0x9F).contains($0.value)
                && $0 != "\u{202E}" && $0 != "\u{202D}"  // no bidi overrides ("gpj.exe")
        }))
        name = String(name[...].trimmingSpaces())
        if name == "." || name == ".." || name.isEmpty { return "file" }
        guard name.utf8.count > maxBytes else { return name }
        // Keep the extension, cut the stem on a character boundary.
        let dot = name.lastIndex(of: ".")
        let ext = dot.map { String(name[$0...]) } ?? ""
        let keepExtension = ext.utf8.count <= 16 ? ext : ""
        var stem = String(dot.map { name[..<$0] } ?? name[...])
        while stem.utf8.count + keepExtension.utf8.count > maxBytes { stem.removeLast() }
        return stem + keepExtension
    }
}
