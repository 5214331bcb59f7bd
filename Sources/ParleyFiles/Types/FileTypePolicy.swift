/// Which file types a channel accepts, and what type an upload really is.
///
/// The client's `Content-Type` is a claim; the first bytes are evidence. Raster images are
/// recognised by their magic bytes whatever was claimed; a claim of a raster image type that
/// the bytes do not back is refused (`invalidImage`); formats with a signature (PDF, ZIP,
/// SVG, ...) take the type their bytes prove unless the claim is a compatible refinement
/// (a `.docx` is a ZIP); only bytes with no signature keep the claimed type. The result must
/// be on the allowlist.
public struct FileTypePolicy: Sendable, Hashable {
    /// Allowed MIME types: exact types (`application/pdf`) or whole families (`text/*`).
    public var allowedTypes: Set<String>

    /// Raster images Parley decodes, PDF, plain text and CSV, ZIP, and the common office
    /// formats (OOXML, OpenDocument, legacy Office).
    public static let defaultAllowedTypes: Set<String> = [
        "image/jpeg", "image/png", "image/gif", "image/webp", "image/heic", "image/heif",
        "application/pdf", "text/plain", "text/csv", "application/zip",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.oasis.opendocument.text",
        "application/vnd.oasis.opendocument.spreadsheet",
        "application/vnd.oasis.opendocument.presentation",
        "application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint",
    ]

    public init(allowedTypes: Set<String> = FileTypePolicy.defaultAllowedTypes) {
        self.allowedTypes = Set(allowedTypes.map { $0.lowercased() })
    }

    /// What an upload is, decided from its first bytes and the client's claim.
    public struct Decision: Sendable, Hashable {
        /// The MIME type to store and serve it with.
        public let mime: String
        /// Set when the bytes are a raster image: it must go through ``ImageProcessor``.
        public let image: ImageFormat?
    }

    /// Decides the type of an upload from its first bytes (``FileUpload/leadingByteCount``
    /// are enough) and the claimed `Content-Type`; throws `invalidImage` or
    /// `unsupportedType` (both HTTP 415).
    public func decide(leadingBytes: [UInt8], claimedType: String?) throws(FileError) -> Decision {
        let claimed = claimedType.flatMap(FileTypePolicy.essence)
        if let image = ImageFormat.sniff(leadingBytes) {
            try requireAllowed(image.mime)
            return Decision(mime: image.mime, image: image)
        }
        if let claimed, FileTypePolicy.isRasterImageType(claimed) {
            throw FileError(.invalidImage, "the file claims to be \(claimed) but is not an image Parley can read")
        }
        let mime: String
        if let proven = ContentSignature.mime(of: leadingBytes) {
            if let claimed, ContentSignature.isRefinement(claimed, of: proven) {
                mime = claimed
            } else {
                mime = proven
            }
        } else {
            mime = claimed ?? "application/octet-stream"
        }
        try requireAllowed(mime)
        return Decision(mime: mime, image: nil)
    }

    /// Whether `mime` (an essence, lowercase) is on the allowlist.
    public func allows(_ mime: String) -> Bool {
        let mime = mime.lowercased()
        if allowedTypes.contains(mime) { return true }
        guard let slash = mime.firstIndex(of: "/") else { return false }
        return allowedTypes.contains(mime[..<slash] + "/*")
    }

    private func requireAllowed(_ mime: String) throws(FileError) {
        guard allows(mime) else { throw FileError(.unsupportedType, "files of type \(mime) are not accepted here") }
    }

    /// Raster image types browsers show inline. Everything else (SVG, HTML, PDF, ...) is
    /// served as a download, since it may run script.
    public static func isRasterImageType(_ mime: String) -> Bool {
        ["image/jpeg", "image/png", "image/gif", "image/webp", "image/heic", "image/heif", "image/jpg", "image/pjpeg"]
            .contains(mime.lowercased())
    }

    /// `type/subtype` of a Content-Type value, lowercased, without parameters; `nil` if it
    /// is not of that form.
    public static func essence(_ contentType: String) -> String? {
        let essence = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
            .trimmingSpaces().lowercased()
        let halves = essence.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, !halves[0].isEmpty, !halves[1].isEmpty,
              essence.utf8.allSatisfy({ MultipartHeaders.isTokenByte($0) || $0 == UInt8(ascii: "/") }) else { return nil }
        return essence
    }
}

/// Signatures of the non-image formats that matter for safety or for the allowlist.
enum ContentSignature {
    static func mime(of bytes: [UInt8]) -> String? {
        func starts(_ prefix: [UInt8]) -> Bool { bytes.count >= prefix.count && Array(bytes.prefix(prefix.count)) == prefix }
        if starts(Array("%PDF-".utf8)) { return "application/pdf" }
        if starts([0x50, 0x4B, 0x03, 0x04]) || starts([0x50, 0x4B, 0x05, 0x06]) { return "application/zip" }
        if starts([0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1]) { return "application/x-ole-storage" }
        if let brands = ISOBMFF.brands(bytes) {
            if brands.contains(where: ISOBMFF.avifBrands.contains) { return "image/avif" }
            if brands.contains("mif1") { return "image/heif" }  // HEIF, but not HEVC-coded
            return "video/mp4"
        }
        if isSVG(bytes) { return "image/svg+xml" }
        if isHTML(bytes) { return "text/html" }
        return nil
    }

    /// Formats built on a container: a claimed `.docx` type over ZIP bytes stays a `.docx`.
    static func isRefinement(_ claimed: String, of proven: String) -> Bool {
        if claimed == proven { return true }
        switch proven {
        case "application/zip":
            return claimed.hasPrefix("application/vnd.openxmlformats-officedocument.")
                || claimed.hasPrefix("application/vnd.oasis.opendocument.")
                || claimed == "application/epub+zip" || claimed == "application/x-zip-compressed"
        case "application/x-ole-storage":
            return ["application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint"].contains(claimed)
        default:
            return false
        }
    }

    /// An SVG document: XML whose first element is `<svg`, after an optional prolog.
    static func isSVG(_ bytes: [UInt8]) -> Bool {
        let text = leadingText(bytes)
        guard text.hasPrefix("<") else { return false }
        return text.hasPrefix("<svg") || ((text.hasPrefix("<?xml") || text.hasPrefix("<!--") || text.hasPrefix("<!doctype svg"))
            && text.contains("<svg"))
    }

    /// What browsers would sniff as HTML.
    static func isHTML(_ bytes: [UInt8]) -> Bool {
        let text = leadingText(bytes)
        return ["<!doctype html", "<html", "<head", "<body", "<script", "<iframe", "<!--"].contains { text.hasPrefix($0) }
    }

    /// The first bytes as lowercase text, without a BOM and leading whitespace.
    private static func leadingText(_ bytes: [UInt8]) -> String {
        var slice = bytes.prefix(512)[...]
        if slice.starts(with: [0xEF, 0xBB, 0xBF]) { slice = slice.dropFirst(3) }
        while let first = slice.first, [9, 10, 12, 13, 32].contains(first) { slice = slice.dropFirst() }
        return String(decoding: slice, as: UTF8.self).lowercased()
    }
}
