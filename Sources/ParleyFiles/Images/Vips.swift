import CVips

/// libvips for this process: started once, on first use, with the server settings in
/// `parley_vips_start` (no operation cache, one libvips thread per image since the worker
/// pool runs images in parallel, only Parley's five decoders allowed).
enum Vips {
    /// `nil` once libvips runs; the failure message otherwise.
    private static let startFailure: String? = {
        parley_vips_start("parley", 1) == 0 ? nil : lastError()
    }()

    static func start() throws(FileError) {
        if let startFailure { throw FileError(.io, "libvips cannot start: \(startFailure)") }
    }

    /// The libvips version linked in (`major.minor.micro`), read without starting libvips.
    static var libraryVersion: String {
        "\(vips_version(0)).\(vips_version(1)).\(vips_version(2))"
    }

    static var canLoadHEIF: Bool { (try? start()) != nil && parley_vips_can_load_heif() != 0 }
    static var canSaveHEIF: Bool { (try? start()) != nil && parley_vips_can_save_heif() != 0 }

    /// The last libvips error message (shared by all threads, so only a hint), then cleared.
    static func lastError() -> String {
        let message = String(cString: parley_vips_error_message())
        parley_vips_error_clear()
        let firstLine = message.split(separator: "\n").first.map(String.init) ?? ""
        return firstLine.isEmpty ? "libvips failed" : firstLine
    }

    /// Codes of `parley_vips_load`.
    static func loaderCode(_ format: ImageFormat) -> Int32 {
        switch format {
        case .jpeg: Int32(PARLEY_VIPS_JPEG)
        case .png: Int32(PARLEY_VIPS_PNG)
        case .gif: Int32(PARLEY_VIPS_GIF)
        case .webp: Int32(PARLEY_VIPS_WEBP)
        case .heic: Int32(PARLEY_VIPS_HEIF)
        }
    }
}

/// One reference to a libvips image, released with the handle. Not shared across threads:
/// one image job runs on one worker thread from start to end.
final class VipsImageHandle {
    let pointer: UnsafeMutablePointer<VipsImage>

    init(_ pointer: UnsafeMutablePointer<VipsImage>) { self.pointer = pointer }

    deinit { parley_vips_unref(pointer) }

    var width: Int { Int(parley_vips_width(pointer)) }
    var height: Int { Int(parley_vips_height(pointer)) }
    var bands: Int { Int(parley_vips_bands(pointer)) }
    /// The height of one frame (the whole height unless it is an animation strip).
    var pageHeight: Int { Int(parley_vips_page_height(pointer)) }
    var pages: Int { Int(parley_vips_pages(pointer)) }
    var hasAlpha: Bool { parley_vips_has_alpha(pointer) != 0 }

    /// Runs a libvips operation that makes a new image from this one.
    func apply(_ failure: FileError.Code, _ what: String,
               _ operation: (UnsafeMutablePointer<VipsImage>, UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32)
        throws(FileError) -> VipsImageHandle
    {
        var out: UnsafeMutablePointer<VipsImage>?
        guard operation(pointer, &out) == 0, let out else {
            throw FileError(failure, "\(what): \(Vips.lastError())")
        }
        return VipsImageHandle(out)
    }

    /// Encodes with a libvips saver.
    func encode(_ what: String,
                _ saver: (UnsafeMutablePointer<VipsImage>, UnsafeMutablePointer<UnsafeMutableRawPointer?>, UnsafeMutablePointer<Int>) -> Int32)
        throws(FileError) -> [UInt8]
    {
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard saver(pointer, &buffer, &length) == 0, let buffer else {
            throw FileError(.io, "\(what): \(Vips.lastError())")
        }
        defer { parley_vips_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }
}
