/// Removes metadata containers from encoded images, as a last pass over libvips' output.
///
/// libvips is told to strip, but whether a saver honours that depends on its version (the
/// WebP saver of libvips 8.14, Debian 12's, writes a fresh EXIF block regardless). Privacy
/// must not depend on that, so every image Parley stores goes through here: EXIF, XMP, IPTC,
/// ICC profiles, comments and text chunks are dropped from the container itself. Only what
/// decoding needs is kept (JFIF, Adobe colour transform, PNG colour/physical chunks, the
/// GIF loop extension). Output that does not parse is refused rather than passed on.
enum MetadataScrubber {
    static func scrub(_ bytes: [UInt8], format: ImageFormat) throws(FileError) -> [UInt8] {
        let result: [UInt8]?
        switch format {
        case .jpeg: result = jpeg(bytes)
        case .png: result = png(bytes)
        case .webp: result = webp(bytes)
        case .gif: result = gif(bytes)
        case .heic: result = nil  // never produced
        }
        guard let result else { throw FileError(.io, "the encoded \(format.rawValue) output is not well formed") }
        return result
    }

    /// Keeps APP0 (JFIF) and APP14 (Adobe); drops APP1–APP13, APP15 and comments before the scan.
    static func jpeg(_ b: [UInt8]) -> [UInt8]? {
        guard b.count >= 4, b[0] == 0xFF, b[1] == 0xD8 else { return nil }
        var out: [UInt8] = [0xFF, 0xD8]
        out.reserveCapacity(b.count)
        var i = 2
        while i + 4 <= b.count {
            guard b[i] == 0xFF else { return nil }
            let marker = b[i + 1]
            if marker == 0xDA {
                out += b[i...]
                return out
            }
            let length = Int(b[i + 2]) << 8 | Int(b[i + 3])
            guard length >= 2, i + 2 + length <= b.count else { return nil }
            let isMetadata = (0xE1...0xEF).contains(marker) && marker != 0xEE || marker == 0xFE
            if !isMetadata { out += b[i..<i + 2 + length] }
            i += 2 + length
        }
        return nil
    }

    static func png(_ b: [UInt8]) -> [UInt8]? {
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        guard b.count >= 8, Array(b[0..<8]) == signature else { return nil }
        let dropped: Set<String> = ["tEXt", "zTXt", "iTXt", "eXIf", "iCCP", "tIME"]
        var out = signature
        out.reserveCapacity(b.count)
        var i = 8
        while i + 12 <= b.count {
            let length = Int(b[i]) << 24 | Int(b[i + 1]) << 16 | Int(b[i + 2]) << 8 | Int(b[i + 3])
            guard i + 12 + length <= b.count else { return nil }
            let type = String(decoding: b[i + 4..<i + 8], as: UTF8.self)
            if !dropped.contains(type) { out += b[i..<i + 12 + length] }
            i += 12 + length
            if type == "IEND" { return out }
        }
        return nil
    }

    /// Drops EXIF, XMP and ICCP chunks and clears their flags in VP8X.
    static func webp(_ b: [UInt8]) -> [UInt8]? {
        guard b.count >= 12, Array(b[0..<4]) == Array("RIFF".utf8), Array(b[8..<12]) == Array("WEBP".utf8) else { return nil }
        var body: [UInt8] = Array("WEBP".utf8)
        body.reserveCapacity(b.count)
        var i = 12
        while i + 8 <= b.count {
            let size = Int(b[i + 4]) | Int(b[i + 5]) << 8 | Int(b[i + 6]) << 16 | Int(b[i + 7]) << 24
            let padded = size + (size & 1)
            guard i + 8 + size <= b.count else { return nil }
            let end = min(b.count, i + 8 + padded)
            let type = String(decoding: b[i..<i + 4], as: UTF8.self)
            switch type {
            case "EXIF", "XMP ", "ICCP":
                break
            case "VP8X":
                var chunk = Array(b[i..<end])
                guard chunk.count >= 9 else { return nil }
                chunk[8] &= ~(0x20 | 0x08 | 0x04)  // ICC, EXIF, XMP present
                body += chunk
            default:
                body += b[i..<end]
            }
            i += 8 + padded
        }
        let size = UInt32(body.count)
        return Array("RIFF".utf8) + [UInt8(size & 0xFF), UInt8((size >> 8) & 0xFF), UInt8((size >> 16) & 0xFF), UInt8(size >> 24)]
            + body
    }

    /// Drops comment extensions and application extensions other than the loop count.
    static func gif(_ b: [UInt8]) -> [UInt8]? {
        guard b.count >= 13 else { return nil }
        var i = 13
        if b[10] & 0x80 != 0 { i += 3 << (Int(b[10] & 0x07) + 1) }
        guard i <= b.count else { return nil }
        var out = Array(b[0..<i])
        out.reserveCapacity(b.count)
        /// Index just past a run of data sub-blocks starting at `at`.
        func skipSubBlocks(_ at: Int) -> Int? {
            var j = at
            while j < b.count {
                let length = Int(b[j])
                j += 1
                if length == 0 { return j }
                j += length
            }
            return nil
        }
        while i < b.count {
            switch b[i] {
            case 0x3B:
                out.append(0x3B)
                return out
            case 0x21:
                guard i + 2 < b.count else { return nil }
                let label = b[i + 1]
                guard let end = skipSubBlocks(i + 2) else { return nil }
                var keep = label == 0xF9 || label == 0x01  // graphic control, plain text
                if label == 0xFF, i + 14 <= b.count, b[i + 2] == 11 {
                    keep = Array(b[i + 3..<i + 14]) == Array("NETSCAPE2.0".utf8)
                }
                if keep { out += b[i..<end] }
                i = end
            case 0x2C:
                guard i + 10 <= b.count else { return nil }
                var j = i + 10
                if b[i + 9] & 0x80 != 0 { j += 3 << (Int(b[i + 9] & 0x07) + 1) }
                j += 1  // LZW minimum code size
                guard j <= b.count, let end = skipSubBlocks(j) else { return nil }
                out += b[i..<end]
                i = end
            default:
                return nil
            }
        }
        return nil
    }
}
