import CVips
import Foundation
import ParleyFiles
import ParleyTestSupport

/// Files for the upload tests, made at test time (no binary fixtures in the repository):
/// images encoded with libvips, a hand-built EXIF block with a GPS position, and readers
/// that check what came back through the download route.
enum FileFixtures {
    static let secret = "PARLEY-SECRET-PLACE"

    /// Left half red, right half blue, RGB.
    static func halves(width: Int, height: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(width * height * 3)
        for _ in 0..<height {
            for x in 0..<width { bytes += x < width / 2 ? [230, 20, 20] : [20, 20, 230] }
        }
        return bytes
    }

    enum Format { case jpeg, png, heic }

    /// An RGB image of `width` × `height` encoded by libvips, with `exif` attached.
    static func image(_ format: Format, width: Int = 64, height: Int = 32, exif: [UInt8]? = nil) -> [UInt8] {
        _ = try! ImageProcessor()  // starts libvips
        let pixels = halves(width: width, height: height)
        let image = pixels.withUnsafeBytes { raw in
            parley_vips_from_pixels(raw.baseAddress, raw.count, Int32(width), Int32(height), 3)!
        }
        defer { parley_vips_unref(image) }
        if let exif { exif.withUnsafeBytes { parley_vips_set_blob(image, "exif-data", $0.baseAddress, $0.count) } }
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        let status: Int32
        switch format {
        case .jpeg: status = parley_vips_jpegsave(image, &buffer, &length, 90)
        case .png: status = parley_vips_pngsave(image, &buffer, &length)
        case .heic: status = parley_vips_heifsave(image, &buffer, &length, 80)
        }
        precondition(status == 0, "fixture encoding failed")
        defer { parley_vips_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }

    /// A JPEG whose EXIF says: orientation 6, the marker ``secret``, GPS 48°51'29"N 2°17'40"E.
    static func photoWithGPS(width: Int = 64, height: Int = 32) -> [UInt8] {
        withExif(image(.jpeg, width: width, height: height), exif(orientation: 6))
    }

    /// Metadata fields libvips finds in `bytes` (exif, xmp, iptc, icc, orientation...).
    static func metadataFields(_ bytes: [UInt8]) -> [String]? {
        _ = try! ImageProcessor()
        let code: Int32
        switch ImageFormat.sniff(bytes) {
        case .jpeg: code = Int32(PARLEY_VIPS_JPEG)
        case .png: code = Int32(PARLEY_VIPS_PNG)
        case .webp: code = Int32(PARLEY_VIPS_WEBP)
        case .gif: code = Int32(PARLEY_VIPS_GIF)
        default: return nil
        }
        return bytes.withUnsafeBytes { raw -> [String]? in
            var loaded: UnsafeMutablePointer<VipsImage>?
            guard parley_vips_load(code, raw.baseAddress, raw.count, 0, &loaded) == 0, let loaded else { return nil }
            defer { parley_vips_unref(loaded) }
            let names = parley_vips_field_names(loaded)!
            defer { parley_vips_free(names) }
            return String(cString: names).split(separator: ",").map(String.init).filter { f in
                f.hasPrefix("exif-") || f.hasPrefix("xmp") || f.hasPrefix("iptc") || f.hasPrefix("icc")
                    || f == "orientation" || f.contains("comment")
            }
        }
    }

    /// Pixel size libvips reads from `bytes`.
    static func size(_ bytes: [UInt8]) -> (width: Int, height: Int)? {
        _ = try! ImageProcessor()
        let code: Int32 = ImageFormat.sniff(bytes) == .webp ? Int32(PARLEY_VIPS_WEBP)
            : ImageFormat.sniff(bytes) == .png ? Int32(PARLEY_VIPS_PNG) : Int32(PARLEY_VIPS_JPEG)
        return bytes.withUnsafeBytes { raw -> (Int, Int)? in
            var loaded: UnsafeMutablePointer<VipsImage>?
            guard parley_vips_load(code, raw.baseAddress, raw.count, 0, &loaded) == 0, let loaded else { return nil }
            defer { parley_vips_unref(loaded) }
            return (Int(parley_vips_width(loaded)), Int(parley_vips_height(loaded)))
        }
    }

    static func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let n = Array(needle.utf8)
        guard haystack.count >= n.count else { return false }
        for i in 0...(haystack.count - n.count) where haystack[i] == n[0] && Array(haystack[i..<i + n.count]) == n {
            return true
        }
        return false
    }

    /// JPEG markers before the scan (APP1 = 0xE1 holds EXIF).
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

    /// A little-endian TIFF/EXIF block with Orientation, ImageDescription = ``secret`` and a
    /// GPS IFD.
    static func exif(orientation: UInt16) -> [UInt8] {
        var tiff: [UInt8] = [0x49, 0x49, 0x2A, 0x00, 0x08, 0x00, 0x00, 0x00]
        func u16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func u32(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF), UInt8(v >> 24)] }
        let description = Array(secret.utf8) + [0]
        let descriptionOffset: UInt32 = 50
        let gpsOffset = descriptionOffset + UInt32(description.count)
        tiff += u16(3)
        tiff += u16(0x010E) + u16(2) + u32(UInt32(description.count)) + u32(descriptionOffset)
        tiff += u16(0x0112) + u16(3) + u32(1) + u16(orientation) + u16(0)
        tiff += u16(0x8825) + u16(4) + u32(1) + u32(gpsOffset)
        tiff += u32(0)
        tiff += description
        let latitudeOffset = gpsOffset + 54
        let longitudeOffset = latitudeOffset + 24
        tiff += u16(4)
        tiff += u16(0x0001) + u16(2) + u32(2) + Array("N".utf8) + [0, 0, 0]
        tiff += u16(0x0002) + u16(5) + u32(3) + u32(latitudeOffset)
        tiff += u16(0x0003) + u16(2) + u32(2) + Array("E".utf8) + [0, 0, 0]
        tiff += u16(0x0004) + u16(5) + u32(3) + u32(longitudeOffset)
        tiff += u32(0)
        tiff += u32(48) + u32(1) + u32(51) + u32(1) + u32(29) + u32(1)
        tiff += u32(2) + u32(1) + u32(17) + u32(1) + u32(40) + u32(1)
        return tiff
    }

    static func withExif(_ jpeg: [UInt8], _ tiff: [UInt8]) -> [UInt8] {
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        let length = payload.count + 2
        return [0xFF, 0xD8, 0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload + jpeg.dropFirst(2)
    }

    /// A PNG header declaring `width` × `height` with a tiny IDAT: a decompression bomb.
    static func pngBomb(width: UInt32, height: UInt32) -> [UInt8] {
        func u32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(type.utf8) + data
            return u32(UInt32(data.count)) + body + u32(crc32(body))
        }
        let idat: [UInt8] = [0x78, 0x9C, 0x63, 0x60, 0x18, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00]
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", u32(width) + u32(height) + [8, 2, 0, 0, 0])
            + chunk("IDAT", idat) + chunk("IEND", [])
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }

    static let svgWithScript = Array("""
        <?xml version="1.0"?>
        <svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(document.cookie)</script></svg>
        """.utf8)

    static let pdf = Array("%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n".utf8)
}
