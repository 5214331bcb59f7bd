/// What an image file's header declares, read without decoding any pixel.
///
/// Decoders allocate what the header declares, so a tiny file declaring 100,000 × 100,000
/// pixels (a "decompression bomb") must be refused from these numbers, before a decoder sees
/// the file. The header parsers are deliberately small and strict: anything they cannot read
/// is not an image Parley accepts.
public struct ImageHeader: Sendable, Hashable {
    public let format: ImageFormat
    /// Declared pixels (for HEIC: the largest image item, for GIF/WebP: the canvas).
    public let width: Int
    public let height: Int
    /// WebP only: the image is losslessly coded (VP8L), so re-encoding keeps it lossless.
    public let isLossless: Bool

    public init(format: ImageFormat, width: Int, height: Int, isLossless: Bool = false) {
        self.format = format
        self.width = width
        self.height = height
        self.isLossless = isLossless
    }

    /// Reads the header of a whole file of the given (sniffed) format; `nil` when it is
    /// missing, truncated or inconsistent.
    public static func read(_ bytes: [UInt8], format: ImageFormat) -> ImageHeader? {
        let reader = ByteReader(bytes)
        let header: ImageHeader?
        switch format {
        case .jpeg: header = jpeg(reader)
        case .png: header = png(reader)
        case .gif: header = gif(reader)
        case .webp: header = webp(reader)
        case .heic: header = heic(reader)
        }
        guard let header, header.width > 0, header.height > 0 else { return nil }
        return header
    }

    private static func jpeg(_ r: ByteReader) -> ImageHeader? {
        var offset = 2
        while true {
            guard r.u8(offset) == 0xFF else { return nil }
            // Fill bytes: any number of 0xFF before a marker.
            while r.u8(offset) == 0xFF { offset += 1 }
            guard let marker = r.u8(offset) else { return nil }
            offset += 1
            switch marker {
            case 0xD0...0xD7, 0x01:
                continue  // standalone markers
            case 0xD9, 0xDA:
                return nil  // end of image or start of scan before any frame header
            default:
                break
            }
            guard let length = r.u16be(offset), length >= 2 else { return nil }
            let isFrame = (0xC0...0xCF).contains(marker) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC
            if isFrame {
                guard let height = r.u16be(offset + 3), let width = r.u16be(offset + 5) else { return nil }
                return ImageHeader(format: .jpeg, width: width, height: height)
            }
            offset += length
        }
    }

    private static func png(_ r: ByteReader) -> ImageHeader? {
        guard r.u32be(8) == 13, r.ascii(12, 4) == "IHDR",
              let width = r.u32be(16), let height = r.u32be(20) else { return nil }
        return ImageHeader(format: .png, width: width, height: height)
    }

    private static func gif(_ r: ByteReader) -> ImageHeader? {
        guard let width = r.u16le(6), let height = r.u16le(8) else { return nil }
        return ImageHeader(format: .gif, width: width, height: height)
    }

    private static func webp(_ r: ByteReader) -> ImageHeader? {
        guard r.ascii(0, 4) == "RIFF", r.ascii(8, 4) == "WEBP", let fourcc = r.ascii(12, 4) else { return nil }
        let data = 20
        switch fourcc {
        case "VP8 ":
            guard r.u8(data + 3) == 0x9D, r.u8(data + 4) == 0x01, r.u8(data + 5) == 0x2A,
                  let width = r.u16le(data + 6), let height = r.u16le(data + 8) else { return nil }
            return ImageHeader(format: .webp, width: width & 0x3FFF, height: height & 0x3FFF)
        case "VP8L":
            guard r.u8(data) == 0x2F, let bits = r.u32le(data + 1) else { return nil }
            return ImageHeader(format: .webp, width: (bits & 0x3FFF) + 1, height: ((bits >> 14) & 0x3FFF) + 1,
                               isLossless: true)
        case "VP8X":
            guard let width = r.u24le(data + 4), let height = r.u24le(data + 7) else { return nil }
            // Lossless when the image data (or the first animation frame) is a VP8L chunk.
            var lossless = false
            var offset = 12
            for _ in 0..<64 {
                guard let chunk = r.ascii(offset, 4), let size = r.u32le(offset + 4) else { break }
                if chunk == "VP8L" || (chunk == "ANMF" && r.ascii(offset + 8 + 16, 4) == "VP8L") {
                    lossless = true
                    break
                }
                if chunk == "VP8 " || chunk == "ANMF" { break }
                offset += 8 + size + (size & 1)
            }
            return ImageHeader(format: .webp, width: width + 1, height: height + 1, isLossless: lossless)
        default:
            return nil
        }
    }

    /// HEIF keeps each image item's size in an `ispe` property: `meta` → `iprp` → `ipco` →
    /// `ispe`. The largest one is the declared size (a grid's is the whole picture).
    private static func heic(_ r: ByteReader) -> ImageHeader? {
        guard let meta = r.box("meta", in: 0..<r.count),
              let iprp = r.box("iprp", in: meta.lowerBound + 4..<meta.upperBound),
              let ipco = r.box("ipco", in: iprp) else { return nil }
        var best: (width: Int, height: Int)?
        var offset = ipco.lowerBound
        var boxes = 0
        while let (type, content) = r.boxHeader(at: offset, limit: ipco.upperBound), boxes < 10_000 {
            boxes += 1
            if type == "ispe", let width = r.u32be(content.lowerBound + 4), let height = r.u32be(content.lowerBound + 8) {
                if best == nil || width * height > best!.width * best!.height { best = (width, height) }
            }
            offset = content.upperBound
        }
        guard let best else { return nil }
        return ImageHeader(format: .heic, width: best.width, height: best.height)
    }
}

/// Bounds-checked big/little-endian reads; every read past the end gives `nil`.
private struct ByteReader {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    var count: Int { bytes.count }

    func u8(_ at: Int) -> UInt8? { at >= 0 && at < bytes.count ? bytes[at] : nil }
    func has(_ at: Int, _ n: Int) -> Bool { at >= 0 && n >= 0 && at <= bytes.count - n }
    func u16be(_ at: Int) -> Int? { has(at, 2) ? Int(bytes[at]) << 8 | Int(bytes[at + 1]) : nil }
    func u16le(_ at: Int) -> Int? { has(at, 2) ? Int(bytes[at + 1]) << 8 | Int(bytes[at]) : nil }
    func u24le(_ at: Int) -> Int? {
        has(at, 3) ? Int(bytes[at + 2]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at]) : nil
    }
    func u32be(_ at: Int) -> Int? {
        has(at, 4) ? Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3]) : nil
    }
    func u32le(_ at: Int) -> Int? {
        has(at, 4) ? Int(bytes[at + 3]) << 24 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at]) : nil
    }
    func ascii(_ at: Int, _ n: Int) -> String? {
        has(at, n) ? String(decoding: bytes[at..<at + n], as: UTF8.self) : nil
    }

    /// An ISO BMFF box at `at` that ends by `limit`: its type and content range.
    func boxHeader(at: Int, limit: Int) -> (String, Range<Int>)? {
        guard let size32 = u32be(at), let type = ascii(at + 4, 4) else { return nil }
        var headerSize = 8
        var size = size32
        if size32 == 1 {
            guard let high = u32be(at + 8), let low = u32be(at + 12), high == 0 else { return nil }
            size = low
            headerSize = 16
        } else if size32 == 0 {
            size = limit - at  // to the end
        }
        guard size >= headerSize, at + size <= limit else { return nil }
        return (type, at + headerSize..<at + size)
    }

    /// The content of the first box of `type` among the boxes in `range`.
    func box(_ type: String, in range: Range<Int>) -> Range<Int>? {
        var offset = range.lowerBound
        var boxes = 0
        while let (found, content) = boxHeader(at: offset, limit: range.upperBound), boxes < 10_000 {
            if found == type { return content }
            offset = content.upperBound
            boxes += 1
        }
        return nil
    }
}
