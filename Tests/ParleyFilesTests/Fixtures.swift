import CVips
import Foundation
@testable import ParleyFiles

/// Test images made at test time with libvips (no binary fixtures in the repository), plus
/// hand-built EXIF blocks and PNG chunks, and readers that check what came out.
enum Fixture {
    struct Pixels {
        var width: Int
        var height: Int
        var bands: Int
        var bytes: [UInt8]

        func pixel(_ x: Int, _ y: Int) -> [UInt8] {
            let start = (y * width + x) * bands
            return Array(bytes[start..<start + bands])
        }
    }

    /// Left half red, right half blue: rotations are visible.
    static func halves(width: Int, height: Int) -> Pixels {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(width * height * 3)
        for _ in 0..<height {
            for x in 0..<width {
                bytes += x < width / 2 ? [230, 20, 20] : [20, 20, 230]
            }
        }
        return Pixels(width: width, height: height, bands: 3, bytes: bytes)
    }

    /// Smooth gradients with some texture, RGB or RGBA.
    static func gradient(width: Int, height: Int, alpha: Bool = false, seed: UInt64 = 1) -> Pixels {
        var generator = SeededGenerator(seed: seed)
        let bands = alpha ? 4 : 3
        var bytes: [UInt8] = []
        bytes.reserveCapacity(width * height * bands)
        for y in 0..<height {
            for x in 0..<width {
                let noise = Int.random(in: 0...24, using: &generator)
                bytes.append(UInt8(min(255, (x * 230) / max(1, width - 1) + noise)))
                bytes.append(UInt8((y * 255) / max(1, height - 1)))
                bytes.append(UInt8(min(255, ((x + y) * 127) / max(1, width + height) + noise)))
                if alpha { bytes.append(x < width / 2 ? 255 : 64) }
            }
        }
        return Pixels(width: width, height: height, bands: bands, bytes: bytes)
    }

    static func image(_ pixels: Pixels) -> UnsafeMutablePointer<VipsImage> {
        _ = try! ImageProcessor()  // starts libvips
        return pixels.bytes.withUnsafeBytes { raw in
            parley_vips_from_pixels(raw.baseAddress, raw.count, Int32(pixels.width), Int32(pixels.height), Int32(pixels.bands))!
        }
    }

    static func encode(_ pixels: Pixels, as format: ImageFormat, quality: Int32 = 90, lossless: Bool = false,
                       pageHeight: Int? = nil, exif: [UInt8]? = nil) -> [UInt8] {
        let image = self.image(pixels)
        defer { parley_vips_unref(image) }
        if let pageHeight { parley_vips_set_int(image, "page-height", Int32(pageHeight)) }
        if let exif { exif.withUnsafeBytes { parley_vips_set_blob(image, "exif-data", $0.baseAddress, $0.count) } }
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        let status: Int32
        switch format {
        case .jpeg: status = parley_vips_jpegsave(image, &buffer, &length, quality)
        case .png: status = parley_vips_pngsave(image, &buffer, &length)
        case .gif: status = parley_vips_gifsave(image, &buffer, &length)
        case .webp: status = parley_vips_webpsave(image, &buffer, &length, quality, lossless ? 1 : 0)
        case .heic: status = parley_vips_heifsave(image, &buffer, &length, quality)
        }
        precondition(status == 0, "fixture encoding failed: \(Vips.lastError())")
        defer { parley_vips_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }

    /// Decodes with libvips: pixels of all frames, frame count, and every field name.
    static func decode(_ bytes: [UInt8], as format: ImageFormat) -> (pixels: Pixels, pages: Int, fields: [String])? {
        _ = try! ImageProcessor()
        return bytes.withUnsafeBytes { raw -> (Pixels, Int, [String])? in
            var loaded: UnsafeMutablePointer<VipsImage>?
            guard parley_vips_load(Vips.loaderCode(format), raw.baseAddress, raw.count, 1, &loaded) == 0, let loaded else {
                return nil
            }
            defer { parley_vips_unref(loaded) }
            let names = parley_vips_field_names(loaded)!
            let fields = String(cString: names).split(separator: ",").map(String.init)
            parley_vips_free(names)
            var length = 0
            guard let data = parley_vips_pixels(loaded, &length) else { return nil }
            defer { parley_vips_free(data) }
            let pixels = Pixels(width: Int(parley_vips_width(loaded)), height: Int(parley_vips_page_height(loaded)),
                                bands: Int(parley_vips_bands(loaded)),
                                bytes: Array(UnsafeRawBufferPointer(start: data, count: length)))
            return (pixels, Int(parley_vips_pages(loaded)), fields)
        }
    }

    // MARK: EXIF

    static let secret = "PARLEY-SECRET-PLACE"

    /// A little-endian TIFF/EXIF block: IFD0 with Orientation, ImageDescription (a marker
    /// string) and a GPS IFD pointer; the GPS IFD with latitude/longitude 48°51'29"N 2°17'40"E.
    static func exif(orientation: UInt16) -> [UInt8] {
        var tiff: [UInt8] = [0x49, 0x49, 0x2A, 0x00, 0x08, 0x00, 0x00, 0x00]
        func u16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func u32(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF), UInt8(v >> 24)] }
        let description = Array(secret.utf8) + [0]
        // IFD0 at 8: 3 entries (2 + 3*12 + 4 = 42 bytes) → data from 50.
        let descriptionOffset: UInt32 = 50
        let gpsOffset = descriptionOffset + UInt32(description.count)
        tiff += u16(3)
        tiff += u16(0x010E) + u16(2) + u32(UInt32(description.count)) + u32(descriptionOffset)  // ImageDescription
        tiff += u16(0x0112) + u16(3) + u32(1) + u16(orientation) + u16(0)  // Orientation
        tiff += u16(0x8825) + u16(4) + u32(1) + u32(gpsOffset)  // GPS IFD pointer
        tiff += u32(0)  // no IFD1
        tiff += description
        // GPS IFD: 4 entries (2 + 48 + 4 = 54 bytes) → rationals after it.
        let latitudeOffset = gpsOffset + 54
        let longitudeOffset = latitudeOffset + 24
        tiff += u16(4)
        tiff += u16(0x0001) + u16(2) + u32(2) + Array("N".utf8) + [0, 0, 0]  // GPSLatitudeRef
        tiff += u16(0x0002) + u16(5) + u32(3) + u32(latitudeOffset)  // GPSLatitude
        tiff += u16(0x0003) + u16(2) + u32(2) + Array("E".utf8) + [0, 0, 0]  // GPSLongitudeRef
        tiff += u16(0x0004) + u16(5) + u32(3) + u32(longitudeOffset)  // GPSLongitude
        tiff += u32(0)
        tiff += u32(48) + u32(1) + u32(51) + u32(1) + u32(29) + u32(1)
        tiff += u32(2) + u32(1) + u32(17) + u32(1) + u32(40) + u32(1)
        return tiff
    }

    /// `jpeg` with an APP1 Exif segment inserted after SOI.
    static func withExif(_ jpeg: [UInt8], _ tiff: [UInt8]) -> [UInt8] {
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        let length = payload.count + 2
        return [0xFF, 0xD8, 0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload + jpeg.dropFirst(2)
    }

    /// JPEG markers before the scan (APPn, COM, DQT, SOFn, ...).
    static func jpegMarkers(_ jpeg: [UInt8]) -> [UInt8] {
        var markers: [UInt8] = []
        var i = 2
        while i + 3 < jpeg.count, jpeg[i] == 0xFF {
            let marker = jpeg[i + 1]
            markers.append(marker)
            if marker == 0xDA { break }
            i += 2 + (Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3]))
        }
        return markers
    }

    // MARK: PNG

    static func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typeBytes = Array(type.utf8)
        let length = UInt32(data.count)
        let crc = crc32(typeBytes + data)
        return [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)]
            + typeBytes + data
            + [UInt8(crc >> 24), UInt8((crc >> 16) & 0xFF), UInt8((crc >> 8) & 0xFF), UInt8(crc & 0xFF)]
    }

    /// A PNG header declaring `width` × `height`, and a tiny IDAT: a decompression bomb.
    static func pngBomb(width: UInt32, height: UInt32) -> [UInt8] {
        func u32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
        let ihdr = u32(width) + u32(height) + [8, 2, 0, 0, 0]
        // zlib stream of a few zero bytes: would inflate to gigabytes if the decoder kept going.
        let idat: [UInt8] = [0x78, 0x9C, 0x63, 0x60, 0x18, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00]
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + pngChunk("IHDR", ihdr) + pngChunk("IDAT", idat)
            + pngChunk("IEND", [])
    }

    /// Inserts chunks right after IHDR.
    static func insertingPNGChunks(_ png: [UInt8], _ chunks: [[UInt8]]) -> [UInt8] {
        let afterIHDR = 8 + 12 + 13
        return Array(png[..<afterIHDR]) + chunks.joined() + Array(png[afterIHDR...])
    }

    static func pngChunkTypes(_ png: [UInt8]) -> [String] {
        var types: [String] = []
        var i = 8
        while i + 8 <= png.count {
            let length = Int(png[i]) << 24 | Int(png[i + 1]) << 16 | Int(png[i + 2]) << 8 | Int(png[i + 3])
            types.append(String(decoding: png[i + 4..<i + 8], as: UTF8.self))
            i += 12 + length
        }
        return types
    }

    static func webpChunkTypes(_ webp: [UInt8]) -> [String] {
        var types: [String] = []
        var i = 12
        while i + 8 <= webp.count {
            let size = Int(webp[i + 4]) | Int(webp[i + 5]) << 8 | Int(webp[i + 6]) << 16 | Int(webp[i + 7]) << 24
            types.append(String(decoding: webp[i..<i + 4], as: UTF8.self))
            i += 8 + size + (size & 1)
        }
        return types
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }

    static func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let n = Array(needle.utf8)
        guard haystack.count >= n.count else { return false }
        for i in 0...(haystack.count - n.count) where haystack[i] == n[0] && Array(haystack[i..<i + n.count]) == n {
            return true
        }
        return false
    }

    /// Metadata fields libvips found (the loader's own bookkeeping fields excluded).
    static func metadataFields(_ fields: [String]) -> [String] {
        fields.filter { f in
            f.hasPrefix("exif-") || f.hasPrefix("xmp") || f.hasPrefix("iptc") || f.hasPrefix("icc")
                || f == "orientation" || f.contains("comment") || f.hasPrefix("png-")
        }
    }
}

/// A deterministic generator (SplitMix64), so random chunkings are reproducible.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A fresh directory under the system's temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let path: String
    init() {
        path = NSTemporaryDirectory() + "parley-files-" + UUID().uuidString
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}
