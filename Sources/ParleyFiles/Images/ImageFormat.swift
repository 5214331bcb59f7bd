/// The raster image formats Parley decodes, checks and re-encodes.
public enum ImageFormat: String, Sendable, Hashable, CaseIterable {
    case jpeg, png, gif, webp, heic

    /// The MIME type.
    public var mime: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .png: "image/png"
        case .gif: "image/gif"
        case .webp: "image/webp"
        case .heic: "image/heic"
        }
    }

    /// The usual file name extension, without the dot.
    public var fileExtension: String {
        switch self {
        case .jpeg: "jpg"
        case .png: "png"
        case .gif: "gif"
        case .webp: "webp"
        case .heic: "heic"
        }
    }

    /// The format the magic bytes at the start of a file prove; `nil` for anything else
    /// (whatever the client claimed). Needs the first 32 bytes at most.
    public static func sniff(_ bytes: some Collection<UInt8>) -> ImageFormat? {
        let b = Array(bytes.prefix(64))
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            b.count >= offset + prefix.count && Array(b[offset..<offset + prefix.count]) == prefix
        }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return .gif }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return .webp }
        if let brands = ISOBMFF.brands(b), brands.contains(where: ISOBMFF.heicBrands.contains),
           !brands.contains(where: ISOBMFF.avifBrands.contains) || ISOBMFF.heicBrands.contains(brands[0]) {
            return .heic
        }
        return nil
    }
}

/// The ISO base media file format's `ftyp` box, which opens HEIF/HEIC and AVIF files.
enum ISOBMFF {
    /// Brands of HEVC-coded HEIF images (`mif1` alone says "some HEIF", not which codec).
    static let heicBrands: Set<String> = ["heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs"]
    static let avifBrands: Set<String> = ["avif", "avis"]

    /// The major brand then the compatible brands, if `bytes` open with an `ftyp` box.
    static func brands(_ bytes: [UInt8]) -> [String]? {
        guard bytes.count >= 16, Array(bytes[4..<8]) == Array("ftyp".utf8) else { return nil }
        let size = Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])
        guard size >= 16 && size <= 4096 else { return nil }
        var brands = [String(decoding: bytes[8..<12], as: UTF8.self)]
        var offset = 16
        while offset + 4 <= min(size, bytes.count) {
            brands.append(String(decoding: bytes[offset..<offset + 4], as: UTF8.self))
            offset += 4
        }
        return brands
    }
}
