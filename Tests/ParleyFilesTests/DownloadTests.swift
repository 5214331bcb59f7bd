import Testing
@testable import ParleyFiles

@Suite struct ByteRangeTests {
    @Test(arguments: [
        // header, size, expected
        (nil, 100, ByteRangeRequest.whole),
        ("bytes=0-9", 100, .partial(0...9)),
        ("bytes=90-", 100, .partial(90...99)),
        ("bytes=-10", 100, .partial(90...99)),
        ("bytes=-1000", 100, .partial(0...99)),
        ("bytes=50-1000", 100, .partial(50...99)),
        ("bytes=99-99", 100, .partial(99...99)),
        (" bytes=1 - 2 ", 100, .partial(1...2)),
        ("BYTES=0-0", 100, .partial(0...0)),
        ("bytes=100-", 100, .unsatisfiable),
        ("bytes=100-200", 100, .unsatisfiable),
        ("bytes=-0", 100, .unsatisfiable),
        ("bytes=0-", 0, .unsatisfiable),
        ("bytes=-5", 0, .unsatisfiable),
        ("bytes=5-1", 100, .whole),  // invalid: ignored
        ("bytes=0-1,5-6", 100, .whole),  // several ranges: not served, whole file
        ("items=0-1", 100, .whole),
        ("bytes=a-b", 100, .whole),
        ("bytes=-", 100, .whole),
        ("bytes=1-2-3", 100, .whole),
        ("bytes=+1-2", 100, .whole),
        ("bytes=99999999999999999999-", 100, .whole),
    ] as [(String?, Int, ByteRangeRequest)])
    func ranges(header: String?, size: Int, expected: ByteRangeRequest) {
        #expect(ByteRangeRequest(header: header, size: size) == expected)
    }
}

@Suite struct DownloadResponseTests {
    let id = ContentID(hex: String(repeating: "1f", count: 32))!
    let image = FileMetadata(mime: "image/jpeg", size: 1000, width: 10, height: 10)

    @Test func imageIsInlineWithSecurityHeaders() {
        let response = DownloadResponse(id: id, metadata: image, name: "cat.jpg")
        #expect(response.status == 200)
        #expect(response.range == 0...999)
        #expect(response.header("content-type") == "image/jpeg")
        #expect(response.header("Content-Length") == "1000")
        #expect(response.header("ETag") == "\"" + String(repeating: "1f", count: 32) + "\"")
        #expect(response.header("Accept-Ranges") == "bytes")
        #expect(response.header("X-Content-Type-Options") == "nosniff")
        #expect(response.header("Content-Security-Policy") == "sandbox")
        #expect(response.header("Content-Disposition") == "inline; filename=\"cat.jpg\"; filename*=UTF-8''cat.jpg")
    }

    @Test func nonRasterTypesAreAttachments() {
        for mime in ["image/svg+xml", "text/html", "application/pdf", "text/plain", "application/zip"] {
            let response = DownloadResponse(id: id, metadata: FileMetadata(mime: mime, size: 5), name: "x")
            #expect(response.header("Content-Disposition")?.hasPrefix("attachment") == true, "\(mime)")
            #expect(response.header("Content-Security-Policy") == "sandbox")
        }
        // An image type without decoded dimensions was never processed: not inline either.
        let unprocessed = DownloadResponse(id: id, metadata: FileMetadata(mime: "image/png", size: 5), name: "x.png")
        #expect(unprocessed.header("Content-Disposition")?.hasPrefix("attachment") == true)
        let text = DownloadResponse(id: id, metadata: FileMetadata(mime: "text/plain", size: 5), name: nil)
        #expect(text.header("Content-Type") == "text/plain; charset=utf-8")
        #expect(text.header("Content-Disposition") == "attachment")
    }

    @Test func rangesAndConditionals() {
        let partial = DownloadResponse(id: id, metadata: image, name: nil, rangeHeader: "bytes=100-")
        #expect(partial.status == 206)
        #expect(partial.range == 100...999)
        #expect(partial.header("Content-Range") == "bytes 100-999/1000")
        #expect(partial.header("Content-Length") == "900")

        let outside = DownloadResponse(id: id, metadata: image, name: nil, rangeHeader: "bytes=1000-")
        #expect(outside.status == 416)
        #expect(outside.range == nil)
        #expect(outside.header("Content-Range") == "bytes */1000")

        let stale = DownloadResponse(id: id, metadata: image, name: nil, rangeHeader: "bytes=0-1", ifRange: "\"other\"")
        #expect(stale.status == 200, "If-Range with another tag: the whole file")
        let fresh = DownloadResponse(id: id, metadata: image, name: nil, rangeHeader: "bytes=0-1", ifRange: id.etag)
        #expect(fresh.status == 206)

        let cached = DownloadResponse(id: id, metadata: image, name: nil, ifNoneMatch: "\"x\", " + id.etag)
        #expect(cached.status == 304)
        #expect(cached.range == nil)
        #expect(DownloadResponse(id: id, metadata: image, name: nil, ifNoneMatch: "*").status == 304)
        #expect(DownloadResponse(id: id, metadata: image, name: nil, ifNoneMatch: "\"x\"").status == 200)

        let empty = DownloadResponse(id: id, metadata: FileMetadata(mime: "text/plain", size: 0), name: nil)
        #expect(empty.status == 200 && empty.range == nil && empty.header("Content-Length") == "0")
    }

    @Test func fileNamesInHeadersAreSafe() {
        let metadata = FileMetadata(mime: "application/pdf", size: 1)
        let value = ContentDisposition.value(for: metadata, name: "Résumé \"final\"\r\nX-Evil: 1.pdf")
        #expect(!value.contains("\r") && !value.contains("\n"))
        #expect(value == "attachment; filename=\"R_sum_ _final_X-Evil: 1.pdf\"; filename*=UTF-8''R%C3%A9sum%C3%A9%20%22final%22X-Evil%3A%201.pdf")
    }

    @Test func fileNamesAreSanitized() {
        #expect(FileName.sanitized("C:\\fakepath\\cat.jpg") == "cat.jpg")
        #expect(FileName.sanitized("../../etc/passwd") == "passwd")
        #expect(FileName.sanitized("..") == "file")
        #expect(FileName.sanitized("  ") == "file")
        #expect(FileName.sanitized("a/") == "a")
        #expect(FileName.sanitized("evil\u{202E}gpj.exe") == "evilgpj.exe")
        #expect(FileName.sanitized("tab\there") == "tabhere")
        let long = String(repeating: "é", count: 300) + ".jpeg"
        let cut = FileName.sanitized(long)
        #expect(cut.utf8.count <= FileName.maxBytes)
        #expect(cut.hasSuffix(".jpeg"))
    }
}

@Suite struct FileTypePolicyTests {
    let policy = FileTypePolicy()
    let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0, 16]

    @Test func rasterImagesAreKnownByTheirBytes() throws {
        for claim in [nil, "image/png", "application/octet-stream", "text/plain"] as [String?] {
            let decision = try policy.decide(leadingBytes: jpeg, claimedType: claim)
            #expect(decision.mime == "image/jpeg")
            #expect(decision.image == .jpeg)
        }
    }

    @Test func claimedImagesThatAreNotImagesAreRefused() {
        var generator = SeededGenerator(seed: 5)
        let garbage = (0..<512).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for claim in ["image/png", "IMAGE/JPEG; q=1", "image/heic", "image/webp", "image/gif"] {
            let error = #expect(throws: FileError.self) { try policy.decide(leadingBytes: garbage, claimedType: claim) }
            #expect(error?.code == .invalidImage)
            #expect(error?.code.httpStatus == 415)
        }
    }

    @Test func svgIsNeverARasterImage() throws {
        let svg = Array("\u{FEFF}  <?xml version=\"1.0\"?><svg onload=\"alert(1)\"></svg>".utf8)
        for claim in ["image/svg+xml", "text/plain", nil] as [String?] {
            let error = #expect(throws: FileError.self) { try policy.decide(leadingBytes: svg, claimedType: claim) }
            #expect(error?.code == .unsupportedType, "SVG is not on the default allowlist")
        }
        #expect((#expect(throws: FileError.self) { try policy.decide(leadingBytes: svg, claimedType: "image/png") })?.code
            == .invalidImage)
        // Allowed by configuration, it is still not an image: stored as-is, served as an attachment.
        let lenient = FileTypePolicy(allowedTypes: FileTypePolicy.defaultAllowedTypes.union(["image/svg+xml"]))
        let decision = try lenient.decide(leadingBytes: svg, claimedType: "image/svg+xml")
        #expect(decision == FileTypePolicy.Decision(mime: "image/svg+xml", image: nil))
        #expect(!FileMetadata(mime: decision.mime, size: 1).isRasterImage)
    }

    @Test func signaturesWinOverClaims() throws {
        let pdf = Array("%PDF-1.7\n".utf8)
        #expect(try policy.decide(leadingBytes: pdf, claimedType: "text/plain").mime == "application/pdf")
        let zip: [UInt8] = [0x50, 0x4B, 0x03, 0x04, 20, 0]
        let docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        #expect(try policy.decide(leadingBytes: zip, claimedType: docx).mime == docx, "a .docx is a ZIP")
        #expect(try policy.decide(leadingBytes: zip, claimedType: "text/plain").mime == "application/zip")
        let html = Array("<!DOCTYPE html><script>alert(1)</script>".utf8)
        #expect((#expect(throws: FileError.self) { try policy.decide(leadingBytes: html, claimedType: "text/plain") })?.code
            == .unsupportedType)
    }

    @Test func plainBytesKeepTheirClaim() throws {
        let text = Array("hello, world\n".utf8)
        #expect(try policy.decide(leadingBytes: text, claimedType: "text/plain; charset=utf-8").mime == "text/plain")
        #expect(try policy.decide(leadingBytes: text, claimedType: "text/csv").mime == "text/csv")
        #expect((#expect(throws: FileError.self) { try policy.decide(leadingBytes: text, claimedType: nil) })?.code
            == .unsupportedType, "application/octet-stream is not allowed by default")
        #expect((#expect(throws: FileError.self) { try policy.decide(leadingBytes: text, claimedType: "video/mp4") })?.code
            == .unsupportedType)
    }

    @Test func allowlistIsConfigurable() throws {
        let onlyImages = FileTypePolicy(allowedTypes: ["image/jpeg", "text/*"])
        #expect(onlyImages.allows("image/jpeg"))
        #expect(onlyImages.allows("text/markdown"))
        #expect(!onlyImages.allows("image/png"))
        #expect(!onlyImages.allows("application/pdf"))
        #expect(throws: FileError.self) { try onlyImages.decide(leadingBytes: Array("%PDF-".utf8), claimedType: nil) }
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        #expect((#expect(throws: FileError.self) { try onlyImages.decide(leadingBytes: png, claimedType: nil) })?.code
            == .unsupportedType)
    }

    @Test func essences() {
        #expect(FileTypePolicy.essence(" Text/Plain ; charset=utf-8") == "text/plain")
        #expect(FileTypePolicy.essence("text") == nil)
        #expect(FileTypePolicy.essence("a/b/c") == nil)
        #expect(FileTypePolicy.essence("te xt/plain") == nil)
    }
}

@Suite struct MetadataScrubberTests {
    @Test func jpegKeepsOnlyWhatDecodingNeeds() throws {
        let app0: [UInt8] = [0xFF, 0xE0, 0, 4, 1, 2]
        let app1: [UInt8] = [0xFF, 0xE1, 0, 6] + Array("Exif".utf8)
        let app14: [UInt8] = [0xFF, 0xEE, 0, 3, 9]
        let com: [UInt8] = [0xFF, 0xFE, 0, 4] + Array("hi".utf8)
        let scan: [UInt8] = [0xFF, 0xDA, 0, 2, 0xFF, 0xE1, 0x12, 0xFF, 0xD9]
        let scrubbed = try MetadataScrubber.scrub([0xFF, 0xD8] + app0 + app1 + app14 + com + scan, format: .jpeg)
        #expect(scrubbed == [0xFF, 0xD8] + app0 + app14 + scan, "entropy-coded data after SOS is untouched")
        #expect(throws: FileError.self) { try MetadataScrubber.scrub([0xFF, 0xD8, 0xFF, 0xE1, 0xFF], format: .jpeg) }
    }

    @Test func webpLosesMetadataChunksAndFlags() throws {
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let n = UInt32(data.count)
            return Array(type.utf8) + [UInt8(n & 0xFF), UInt8((n >> 8) & 0xFF), 0, 0] + data + (data.count % 2 == 1 ? [0] : [])
        }
        let vp8x = chunk("VP8X", [0x2C, 0, 0, 0, 9, 0, 0, 9, 0, 0])  // ICC + EXIF flags
        let body = vp8x + chunk("ICCP", [1, 2, 3]) + chunk("VP8L", [0x2F, 1, 2, 3, 4]) + chunk("EXIF", [5, 6])
            + chunk("XMP ", [7])
        let size = UInt32(4 + body.count)
        let webp = Array("RIFF".utf8) + [UInt8(size & 0xFF), UInt8(size >> 8), 0, 0] + Array("WEBP".utf8) + body
        let scrubbed = try MetadataScrubber.scrub(webp, format: .webp)
        #expect(Fixture.webpChunkTypes(scrubbed) == ["VP8X", "VP8L"])
        #expect(scrubbed[20] == 0x00, "ICC and EXIF flags cleared")
        let riffSize = Int(scrubbed[4]) | Int(scrubbed[5]) << 8 | Int(scrubbed[6]) << 16 | Int(scrubbed[7]) << 24
        #expect(riffSize == scrubbed.count - 8)
    }

    @Test func gifLosesCommentsButKeepsTheLoop() throws {
        _ = try ImageProcessor()
        let gif = Fixture.encode(Fixture.gradient(width: 8, height: 8), as: .gif)
        let comment: [UInt8] = [0x21, 0xFE, 5] + Array("hello".utf8) + [0]
        let xmp: [UInt8] = [0x21, 0xFF, 11] + Array("XMP DataXMP".utf8) + [3, 1, 2, 3, 0]
        let loop: [UInt8] = [0x21, 0xFF, 11] + Array("NETSCAPE2.0".utf8) + [3, 1, 0, 0, 0]
        var headerEnd = 13
        if gif[10] & 0x80 != 0 { headerEnd += 3 << (Int(gif[10] & 7) + 1) }
        let dirty = Array(gif[..<headerEnd]) + comment + xmp + loop + Array(gif[headerEnd...])
        let clean = try MetadataScrubber.scrub(dirty, format: .gif)
        #expect(!Fixture.contains(clean, "hello") && !Fixture.contains(clean, "XMP DataXMP"))
        #expect(Fixture.contains(clean, "NETSCAPE2.0"))
        #expect(Fixture.decode(clean, as: .gif)?.pixels.width == 8)
    }
}
