import Testing
@testable import ParleyFiles

@Suite struct ImageProcessorTests {
    let processor = try! ImageProcessor()

    @Test func exifGPSIsGoneAndOrientationApplied() throws {
        let plain = Fixture.encode(Fixture.halves(width: 64, height: 32), as: .jpeg)
        let upload = Fixture.withExif(plain, Fixture.exif(orientation: 6))
        // The fixture really carries what must disappear.
        #expect(Fixture.contains(upload, Fixture.secret))
        let before = try #require(Fixture.decode(upload, as: .jpeg))
        #expect(before.fields.contains("exif-ifd3-GPSLatitude"))
        #expect(before.fields.contains("orientation"))

        let result = try processor.process(upload)
        #expect(result.source == .jpeg)
        #expect(result.image.format == .jpeg)
        // Orientation 6: rotate 90° clockwise, so 64×32 becomes 32×64, left (red) on top.
        #expect(result.image.width == 32)
        #expect(result.image.height == 64)
        let after = try #require(Fixture.decode(result.image.bytes, as: .jpeg))
        #expect(after.pixels.width == 32 && after.pixels.height == 64)
        let top = after.pixels.pixel(16, 8), bottom = after.pixels.pixel(16, 56)
        #expect(top[0] > 180 && top[2] < 80, "top is red: \(top)")
        #expect(bottom[2] > 180 && bottom[0] < 80, "bottom is blue: \(bottom)")

        // No EXIF at all, in the stored image or the thumbnail.
        for bytes in [result.image.bytes, result.thumbnail.bytes] {
            #expect(!Fixture.contains(bytes, Fixture.secret))
            #expect(!Fixture.contains(bytes, "Exif"))
        }
        let markers = Fixture.jpegMarkers(result.image.bytes)
        #expect(!markers.contains(0xE1), "no APP1 (EXIF/XMP)")
        #expect(!markers.contains(0xE2), "no APP2 (ICC)")
        #expect(!markers.contains(0xED), "no APP13 (IPTC)")
        #expect(!markers.contains(0xFE), "no comment")
        #expect(Fixture.metadataFields(after.fields).isEmpty, "\(after.fields)")

        #expect(result.thumbnail.format == .webp)
        #expect(result.thumbnail.width == 32 && result.thumbnail.height == 64)
        #expect(Fixture.webpChunkTypes(result.thumbnail.bytes).allSatisfy { !["EXIF", "XMP ", "ICCP"].contains($0) })
        let thumbnail = try #require(Fixture.decode(result.thumbnail.bytes, as: .webp))
        #expect(Fixture.metadataFields(thumbnail.fields).isEmpty, "\(thumbnail.fields)")
        let thumbnailTop = thumbnail.pixels.pixel(16, 8)
        #expect(thumbnailTop[0] > 180 && thumbnailTop[2] < 80, "the thumbnail is rotated too")
    }

    @Test(arguments: [UInt16(1), 3, 6, 8])
    func everyRotationGivesUprightDimensions(orientation: UInt16) throws {
        let upload = Fixture.withExif(Fixture.encode(Fixture.halves(width: 40, height: 20), as: .jpeg),
                                      Fixture.exif(orientation: orientation))
        let result = try processor.process(upload)
        let swapped = orientation >= 5
        #expect(result.image.width == (swapped ? 20 : 40))
        #expect(result.image.height == (swapped ? 40 : 20))
    }

    @Test func largeJPEGGetsThumbnailOfAtMost480() throws {
        let upload = Fixture.encode(Fixture.gradient(width: 1200, height: 800), as: .jpeg)
        let result = try processor.process(upload)
        #expect(result.image.width == 1200 && result.image.height == 800)
        #expect(result.thumbnail.width == 480 && result.thumbnail.height == 320)
        let tall = try processor.process(Fixture.encode(Fixture.gradient(width: 300, height: 1000), as: .jpeg))
        #expect(tall.thumbnail.height == 480 && tall.thumbnail.width == 144)
    }

    @Test func pngMetadataChunksAreDropped() throws {
        let png = Fixture.encode(Fixture.gradient(width: 600, height: 300, alpha: true), as: .png)
        let upload = Fixture.insertingPNGChunks(png, [
            Fixture.pngChunk("tEXt", Array("Comment\u{0}".utf8) + Array(Fixture.secret.utf8)),
            Fixture.pngChunk("eXIf", Fixture.exif(orientation: 1)),
        ])
        #expect(Fixture.pngChunkTypes(upload).contains("eXIf"))
        #expect(try #require(Fixture.decode(upload, as: .png)).fields.contains("exif-data"))

        let result = try processor.process(upload)
        #expect(result.image.format == .png)
        #expect(result.image.width == 600 && result.image.height == 300)
        #expect(result.thumbnail.width == 480 && result.thumbnail.height == 240)
        let chunks = Fixture.pngChunkTypes(result.image.bytes)
        for forbidden in ["tEXt", "zTXt", "iTXt", "eXIf", "iCCP", "tIME"] {
            #expect(!chunks.contains(forbidden), "\(chunks)")
        }
        #expect(!Fixture.contains(result.image.bytes, Fixture.secret))
        // Alpha survives in the PNG and in the WebP thumbnail.
        #expect(try #require(Fixture.decode(result.image.bytes, as: .png)).pixels.bands == 4)
        #expect(try #require(Fixture.decode(result.thumbnail.bytes, as: .webp)).pixels.bands == 4)
    }

    @Test func gifKeepsItsFrames() throws {
        let strip = Fixture.gradient(width: 100, height: 100)
        let upload = Fixture.encode(strip, as: .gif, pageHeight: 50)
        #expect(try #require(Fixture.decode(upload, as: .gif)).pages == 2)
        let result = try processor.process(upload)
        #expect(result.image.format == .gif)
        #expect(result.image.width == 100 && result.image.height == 50)
        #expect(try #require(Fixture.decode(result.image.bytes, as: .gif)).pages == 2)
        #expect(result.thumbnail.width == 100 && result.thumbnail.height == 50, "the first frame")
    }

    @Test func webpLossyAndLossless() throws {
        let lossy = try processor.process(Fixture.encode(Fixture.gradient(width: 900, height: 600), as: .webp))
        #expect(lossy.image.format == .webp)
        #expect(lossy.image.width == 900 && lossy.image.height == 600)
        #expect(lossy.thumbnail.width == 480 && lossy.thumbnail.height == 320)
        #expect(!Fixture.webpChunkTypes(lossy.image.bytes).contains("VP8L"))

        let upload = Fixture.encode(Fixture.gradient(width: 64, height: 48), as: .webp, lossless: true)
        #expect(ImageHeader.read(upload, format: .webp)?.isLossless == true)
        let lossless = try processor.process(upload)
        #expect(lossless.image.width == 64 && lossless.image.height == 48)
        #expect(Fixture.webpChunkTypes(lossless.image.bytes).contains("VP8L"), "stays lossless")
    }

    @Test func heicBecomesAJPEGRenditionWithoutMetadata() throws {
        #expect(ImageProcessor.canDecodeHEIC)
        try #require(ImageProcessor.canEncodeHEIC, "this libheif cannot encode HEIC fixtures")
        let upload = Fixture.encode(Fixture.gradient(width: 800, height: 600), as: .heic, quality: 60,
                                    exif: Fixture.exif(orientation: 1))
        #expect(ImageFormat.sniff(upload) == .heic)
        #expect(ImageHeader.read(upload, format: .heic) == ImageHeader(format: .heic, width: 800, height: 600))
        #expect(Fixture.contains(upload, Fixture.secret), "the fixture carries EXIF")

        let result = try processor.process(upload)
        #expect(result.source == .heic)
        #expect(result.isRendition)
        #expect(result.image.format == .jpeg)
        #expect(result.image.width == 800 && result.image.height == 600)
        #expect(result.thumbnail.width == 480 && result.thumbnail.height == 360)
        #expect(ImageFormat.sniff(result.image.bytes) == .jpeg)
        #expect(!Fixture.contains(result.image.bytes, Fixture.secret))
        #expect(!Fixture.jpegMarkers(result.image.bytes).contains(0xE1))
        let decoded = try #require(Fixture.decode(result.image.bytes, as: .jpeg))
        let pixel = decoded.pixels.pixel(790, 10)
        #expect(pixel[0] > 200, "the gradient survives: right edge is red-ish \(pixel)")
    }

    @Test func heicOrientationIsAppliedOnce() throws {
        try #require(ImageProcessor.canEncodeHEIC)
        // HEIF orients with its irot/imir boxes (libheif applies them while decoding); an EXIF
        // orientation inside a HEIC must not rotate the pixels a second time.
        let upload = Fixture.encode(Fixture.halves(width: 40, height: 20), as: .heic, quality: 80,
                                    exif: Fixture.exif(orientation: 6))
        let result = try processor.process(upload)
        #expect(result.image.width == 40 && result.image.height == 20)
    }

    @Test func truncatedJPEGIsRefused() throws {
        let whole = Fixture.encode(Fixture.gradient(width: 400, height: 300, seed: 7), as: .jpeg)
        #expect(throws: Never.self) { try processor.process(whole) }
        for fraction in [0.9, 0.6, 0.3] {
            let cut = Array(whole.prefix(Int(Double(whole.count) * fraction)))
            let error = #expect(throws: FileError.self) { try processor.process(cut) }
            #expect(error?.code == .invalidImage, "\(fraction): \(String(describing: error))")
            #expect(error?.code.httpStatus == 415)
        }
        // Cut inside the header: refused before libvips sees it.
        let error = #expect(throws: FileError.self) { try processor.process(Array(whole.prefix(40))) }
        #expect(error?.code == .invalidImage)
    }

    @Test func pngDecompressionBombIsRefusedFromItsHeader() throws {
        let bomb = Fixture.pngBomb(width: 100_000, height: 100_000)
        #expect(bomb.count < 100)
        #expect(ImageHeader.read(bomb, format: .png) == ImageHeader(format: .png, width: 100_000, height: 100_000))
        let error = #expect(throws: FileError.self) { try processor.process(bomb) }
        #expect(error?.code == .tooLarge)
        #expect(error?.code.httpStatus == 413)

        // Under the side limit but over the pixel limit (64 MP > 50 MP).
        let wide = #expect(throws: FileError.self) { try processor.process(Fixture.pngBomb(width: 8000, height: 8000)) }
        #expect(wide?.code == .tooLarge)
        // One long side.
        let long = #expect(throws: FileError.self) { try processor.process(Fixture.pngBomb(width: 20_000, height: 1)) }
        #expect(long?.code == .tooLarge)
        // Within the limits, the header is fine but the pixel data is garbage: refused as invalid.
        let small = #expect(throws: FileError.self) { try processor.process(Fixture.pngBomb(width: 300, height: 300)) }
        #expect(small?.code == .invalidImage)
    }

    @Test func limitsAreConfigurable() throws {
        let strict = try ImageProcessor(limits: ImageLimits(maxPixels: 10_000, maxDimension: 200, thumbnailSize: 64))
        let upload = Fixture.encode(Fixture.gradient(width: 150, height: 100), as: .png)
        #expect((try? strict.process(upload)) == nil)
        let fits = try strict.process(Fixture.encode(Fixture.gradient(width: 100, height: 90), as: .png))
        #expect(fits.thumbnail.width == 64)
        #expect(throws: FileError.self) { try strict.process(Fixture.encode(Fixture.gradient(width: 300, height: 10), as: .png)) }
    }

    @Test func svgWithScriptIsNotAnImage() throws {
        let svg = Array("<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(document.cookie)</script></svg>".utf8)
        #expect(ImageFormat.sniff(svg) == nil)
        let error = #expect(throws: FileError.self) { try processor.process(svg) }
        #expect(error?.code == .unsupportedType)
    }

    @Test func garbageIsRefusedWithoutCrashing() throws {
        var generator = SeededGenerator(seed: 42)
        let garbage = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }
        #expect((try? processor.process(garbage)) == nil)
        // A valid signature followed by garbage, for every format.
        let signatures: [[UInt8]] = [
            [0xFF, 0xD8, 0xFF], [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], Array("GIF89a".utf8),
            Array("RIFF\u{0}\u{0}\u{0}\u{0}WEBPVP8 ".utf8),
            [0, 0, 0, 24] + Array("ftypheic".utf8) + [0, 0, 0, 0] + Array("mif1heic".utf8),
        ]
        for signature in signatures {
            let error = #expect(throws: FileError.self) { try processor.process(signature + garbage) }
            #expect(error?.code == .invalidImage || error?.code == .tooLarge, "\(signature): \(String(describing: error))")
        }
        // Valid headers, garbage after: every byte flipped somewhere in a real image.
        let real = Fixture.encode(Fixture.gradient(width: 64, height: 64), as: .png)
        for offset in stride(from: 40, to: real.count, by: max(1, real.count / 16)) {
            var broken = real
            broken[offset] ^= 0xFF
            _ = try? processor.process(broken)  // refused or not: it must not crash
        }
    }

    @Test func processingRunsInParallelOnWorkers() async throws {
        let pool = FileWorkerPool(threads: 2, queueLimit: 8)
        defer { pool.shutdown() }
        let processor = self.processor
        let upload = Fixture.encode(Fixture.gradient(width: 300, height: 200), as: .jpeg)
        try await withThrowingTaskGroup(of: ProcessedImage.self) { group in
            for _ in 0..<4 {
                group.addTask { try await pool.run { () throws(FileError) in try processor.process(upload) } }
            }
            for try await result in group {
                #expect(result.image.width == 300)
            }
        }
    }
}

@Suite struct ImageHeaderTests {
    @Test func sniffingIgnoresClaims() {
        #expect(ImageFormat.sniff([0xFF, 0xD8, 0xFF, 0xE0]) == .jpeg)
        #expect(ImageFormat.sniff(Array("GIF87a".utf8)) == .gif)
        #expect(ImageFormat.sniff(Array("GIF88a".utf8)) == nil)
        #expect(ImageFormat.sniff([]) == nil)
        let avif = [0, 0, 0, 28] + Array("ftypavif".utf8) + [0, 0, 0, 0] + Array("avifmif1miaf".utf8)
        #expect(ImageFormat.sniff(avif) == nil)
        #expect(ContentSignature.mime(of: avif) == "image/avif")
    }

    @Test func headersOfEveryFormat() throws {
        _ = try ImageProcessor()
        for format in [ImageFormat.jpeg, .png, .gif, .webp] {
            let bytes = Fixture.encode(Fixture.gradient(width: 123, height: 45), as: format)
            #expect(ImageFormat.sniff(bytes) == format)
            let header = try #require(ImageHeader.read(bytes, format: format), "\(format)")
            #expect(header.width == 123 && header.height == 45, "\(format)")
        }
        let withAlpha = Fixture.encode(Fixture.gradient(width: 33, height: 22, alpha: true), as: .webp)
        #expect(ImageHeader.read(withAlpha, format: .webp).map { [$0.width, $0.height] } == [33, 22])
    }

    @Test func jpegWithLargeAppSegmentsBeforeTheFrame() throws {
        let jpeg = Fixture.encode(Fixture.gradient(width: 20, height: 10), as: .jpeg)
        // 3 × 60 KB of APP segments, as phones write (EXIF, MPF, XMP) before the frame header.
        var app: [UInt8] = []
        for _ in 0..<3 { app += [0xFF, 0xE2, 0xEA, 0x60] + [UInt8](repeating: 0x20, count: 0xEA60 - 2) }
        let big = [0xFF, 0xD8] + app + jpeg.dropFirst(2)
        #expect(ImageHeader.read(big, format: .jpeg).map { [$0.width, $0.height] } == [20, 10])
        #expect(ImageHeader.read(Array(big.prefix(100_000)), format: .jpeg) == nil)
    }
}
