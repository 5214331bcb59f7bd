import CVips

/// Limits and settings of the image pipeline.
public struct ImageLimits: Sendable, Hashable {
    /// The most pixels an image may decode to, all frames of an animation together.
    public var maxPixels: Int
    /// The longest side (of one frame) in pixels.
    public var maxDimension: Int
    /// Thumbnails fit in a square of this side.
    public var thumbnailSize: Int
    /// JPEG quality of re-encoded JPEGs and of HEIC renditions.
    public var jpegQuality: Int
    /// WebP quality of re-encoded lossy WebPs.
    public var webpQuality: Int
    /// WebP quality of thumbnails.
    public var thumbnailQuality: Int

    public init(maxPixels: Int = 50_000_000, maxDimension: Int = 16_384, thumbnailSize: Int = 480,
                jpegQuality: Int = 85, webpQuality: Int = 85, thumbnailQuality: Int = 80) {
        self.maxPixels = maxPixels
        self.maxDimension = maxDimension
        self.thumbnailSize = thumbnailSize
        self.jpegQuality = jpegQuality
        self.webpQuality = webpQuality
        self.thumbnailQuality = thumbnailQuality
    }
}

/// An encoded image and its size.
public struct EncodedImage: Sendable, Hashable {
    public let format: ImageFormat
    public let bytes: [UInt8]
    public let width: Int
    public let height: Int

    public var mime: String { format.mime }
}

/// The result of processing an uploaded image.
public struct ProcessedImage: Sendable, Hashable {
    /// What was uploaded.
    public let source: ImageFormat
    /// What is stored and served: upright, without any metadata, in the source format, except
    /// for HEIC, which becomes a JPEG rendition (browsers cannot show HEIC, and the HEIC
    /// original is not kept since its metadata cannot be stripped without a slow re-encode).
    public let image: EncodedImage
    /// A WebP thumbnail, at most ``ImageLimits/thumbnailSize`` on the long side (never
    /// enlarged), first frame of an animation, alpha kept.
    public let thumbnail: EncodedImage

    /// Whether ``image`` is a conversion to another format (HEIC → JPEG).
    public var isRendition: Bool { image.format != source }
}

/// Checks, decodes and cleans uploaded images with libvips.
///
/// For each image: the format is sniffed from the magic bytes; the declared size is read
/// from the header and refused over the limits before any decoding (decompression bombs);
/// the image is decoded (a file that does not decode is refused); the EXIF orientation is
/// applied to the pixels; colours are converted to sRGB through the embedded ICC profile,
/// then ALL metadata is dropped (EXIF with GPS, XMP, IPTC, ICC, comments); the clean image is
/// re-encoded, a thumbnail made, and both encoded files are scrubbed of metadata containers
/// once more (MetadataScrubber). A photo's location never reaches a room.
///
/// Memory: a job holds its decoded pixels two to three times over (decode, rotation, the
/// clean copy); a 6-megapixel photo peaks around 50 MB, an image at the 50-megapixel limit
/// several hundred MB. The worker pool's thread count bounds how many run at once.
///
/// CPU-bound and blocking (tens to hundreds of milliseconds per photo): call it on a
/// ``FileWorkerPool``, never on an event loop. Thread-safe.
public struct ImageProcessor: Sendable {
    /// The libvips version linked in (for `parley --version`).
    public static var libraryVersion: String { Vips.libraryVersion }

    public let limits: ImageLimits

    /// Starts libvips if needed; throws `io` if it cannot start.
    public init(limits: ImageLimits = .init()) throws(FileError) {
        try Vips.start()
        self.limits = limits
    }

    /// Whether this libvips decodes HEIC (libheif with an HEVC decoder).
    public static var canDecodeHEIC: Bool { Vips.canLoadHEIF }
    /// Whether this libvips encodes HEIC (libheif with an HEVC encoder); tests use it.
    public static var canEncodeHEIC: Bool { Vips.canSaveHEIF }

    /// Sniffs the format and checks the declared size against the limits, without decoding:
    /// `unsupportedType` if the bytes are not a raster image Parley reads, `invalidImage` if
    /// the header is unreadable, `tooLarge` over the pixel limits.
    public func inspect(_ bytes: [UInt8]) throws(FileError) -> ImageHeader {
        guard let format = ImageFormat.sniff(bytes) else {
            throw FileError(.unsupportedType, "not a JPEG, PNG, GIF, WebP or HEIC image")
        }
        guard let header = ImageHeader.read(bytes, format: format) else {
            throw FileError(.invalidImage, "not a valid \(format.rawValue.uppercased()) image (unreadable header)")
        }
        try checkSize(width: header.width, frameHeight: header.height, frames: 1)
        return header
    }

    /// Processes an uploaded image (see the type's description).
    public func process(_ bytes: [UInt8]) throws(FileError) -> ProcessedImage {
        try process(bytes, header: try inspect(bytes))
    }

    /// Processes an image whose header ``inspect(_:)`` has read already.
    public func process(_ bytes: [UInt8], header: ImageHeader) throws(FileError) -> ProcessedImage {
        let result: Result<ProcessedImage, FileError> = bytes.withUnsafeBytes { raw in
            // libvips reads from the caller's buffer lazily: everything happens in this scope.
            Result { () throws(FileError) -> ProcessedImage in try process(raw, header: header) }
        }
        return try result.get()
    }

    private func process(_ raw: UnsafeRawBufferPointer, header: ImageHeader) throws(FileError) -> ProcessedImage {
        let format = header.format
        let name = format.rawValue.uppercased()
        let animated = format == .gif || format == .webp
        var loaded: UnsafeMutablePointer<VipsImage>?
        guard parley_vips_load(Vips.loaderCode(format), raw.baseAddress, raw.count, animated ? 1 : 0, &loaded) == 0,
              let loaded else {
            throw FileError(.invalidImage, "not a valid \(name) image: \(Vips.lastError())")
        }
        var image = VipsImageHandle(loaded)
        // The decoder's view of the size, all frames included, before decoding any pixel.
        try checkSize(width: image.width, frameHeight: image.pageHeight, frames: image.pages)
        let frames = image.pages
        if frames == 1 {
            image = try image.apply(.invalidImage, "cannot orient the \(name) image") { parley_vips_autorot($0, $1) }
        }
        image = try image.apply(.invalidImage, "cannot convert the \(name) image to sRGB") { parley_vips_to_srgb($0, $1) }
        image = try image.apply(.io, "cannot strip metadata") { parley_vips_copy_without_metadata($0, $1) }
        let stored: ImageFormat = format == .heic ? .jpeg : format
        if stored == .jpeg && image.hasAlpha {
            image = try image.apply(.io, "cannot flatten") { parley_vips_flatten($0, $1, 255, 255, 255) }
        }
        // Decode every pixel now, once: a truncated or corrupt file fails here.
        guard let decoded = parley_vips_copy_memory(image.pointer) else {
            throw FileError(.invalidImage, "the \(name) image does not decode: \(Vips.lastError())")
        }
        image = VipsImageHandle(decoded)

        let limits = self.limits
        let bytes: [UInt8]
        switch stored {
        case .jpeg:
            bytes = try image.encode("cannot encode JPEG") { parley_vips_jpegsave($0, $1, $2, Int32(limits.jpegQuality)) }
        case .png:
            bytes = try image.encode("cannot encode PNG") { parley_vips_pngsave($0, $1, $2) }
        case .gif:
            bytes = try image.encode("cannot encode GIF") { parley_vips_gifsave($0, $1, $2) }
        case .webp:
            let lossless: Int32 = header.isLossless ? 1 : 0
            bytes = try image.encode("cannot encode WebP") {
                parley_vips_webpsave($0, $1, $2, Int32(limits.webpQuality), lossless)
            }
        case .heic:
            preconditionFailure("HEIC is stored as a JPEG rendition")
        }
        let frameHeight = frames > 1 ? image.pageHeight : image.height
        let encoded = EncodedImage(format: stored, bytes: try MetadataScrubber.scrub(bytes, format: stored),
                                   width: image.width, height: frameHeight)

        var first = image
        if frames > 1 {
            first = try image.apply(.io, "cannot take the first frame") { parley_vips_page($0, 0, $1) }
        }
        let size = Int32(limits.thumbnailSize)
        let small = try first.apply(.io, "cannot make a thumbnail") { parley_vips_thumbnail_image($0, $1, size, size) }
        let thumbnailBytes = try small.encode("cannot encode the thumbnail") {
            parley_vips_webpsave($0, $1, $2, Int32(limits.thumbnailQuality), 0)
        }
        let thumbnail = EncodedImage(format: .webp, bytes: try MetadataScrubber.scrub(thumbnailBytes, format: .webp),
                                     width: small.width, height: small.height)
        return ProcessedImage(source: format, image: encoded, thumbnail: thumbnail)
    }

    private func checkSize(width: Int, frameHeight: Int, frames: Int) throws(FileError) {
        guard width > 0, frameHeight > 0, frames > 0 else {
            throw FileError(.invalidImage, "the image has no pixels")
        }
        if width > limits.maxDimension || frameHeight > limits.maxDimension {
            throw FileError(.tooLarge, "the image is \(width)×\(frameHeight) pixels; at most \(limits.maxDimension) on a side")
        }
        let (pixels, overflow) = width.multipliedReportingOverflow(by: frameHeight)
        let (total, overflow2) = pixels.multipliedReportingOverflow(by: frames)
        if overflow || overflow2 || total > limits.maxPixels {
            throw FileError(.tooLarge, "the image has more than \(limits.maxPixels / 1_000_000) megapixels")
        }
    }
}
