import ParleyCore

/// Turns a finished upload into stored files: decides its real type against the allowlist,
/// and for a raster image stores the cleaned image (or HEIC's JPEG rendition) and its
/// thumbnail instead of the uploaded bytes, which may carry a GPS position.
///
/// Blocking (disk and image work): run ``ingest(_:claimedType:)`` on a ``FileWorkerPool``.
///
/// The intended HTTP flow: `POST` → ``FileStore/beginUpload(maxBytes:)`` → body chunks (or
/// ``MultipartParser`` body events) → ``FileUpload/append(_:)`` on a
/// ``FileWorkerLane`` → ``FileUpload/finish()`` → ``ingest(_:claimedType:)`` → answer with
/// ``StoredUpload/attachment(id:name:url:thumbnailURL:)``'s JSON.
public struct AttachmentPipeline: Sendable {
    public let store: FileStore
    public let policy: FileTypePolicy
    public let images: ImageProcessor

    public init(store: FileStore, policy: FileTypePolicy = .init(), images: ImageProcessor) {
        self.store = store
        self.policy = policy
        self.images = images
    }

    /// Stores a finished upload (consuming it: it is committed or discarded, never left
    /// behind). `claimedType` is the client's Content-Type, if any. For a raster image,
    /// `admit` sees its header (the declared pixels) before any pixel is decoded, and may
    /// refuse the work by throwing: a budget of image work per client.
    public func ingest(_ upload: PendingFile, claimedType: String?,
                       admit: (ImageHeader) throws(FileError) -> Void = { _ in }) throws(FileError) -> StoredUpload {
        let decision: FileTypePolicy.Decision
        do {
            decision = try policy.decide(leadingBytes: upload.leadingBytes, claimedType: claimedType)
        } catch {
            upload.discard()
            throw error
        }
        guard decision.image != nil else {
            let file = try store.commit(upload, mime: decision.mime)
            return StoredUpload(file: file, thumbnail: nil, source: nil)
        }
        let bytes: [UInt8]
        do {
            bytes = try upload.readAll()
        } catch {
            upload.discard()
            throw error
        }
        upload.discard()  // the original is never stored: it may carry metadata
        return try storeImage(bytes, admit: admit)
    }

    /// Stores a file already in memory (e.g. a small raw `POST` body).
    public func ingest(bytes: [UInt8], claimedType: String?) throws(FileError) -> StoredUpload {
        let decision = try policy.decide(leadingBytes: Array(bytes.prefix(FileUpload.leadingByteCount)),
                                         claimedType: claimedType)
        guard decision.image != nil else {
            return StoredUpload(file: try store.store(bytes, mime: decision.mime), thumbnail: nil, source: nil)
        }
        return try storeImage(bytes, admit: { _ in })
    }

    private func storeImage(_ bytes: [UInt8], admit: (ImageHeader) throws(FileError) -> Void) throws(FileError) -> StoredUpload {
        let header = try images.inspect(bytes)
        try admit(header)
        let processed = try images.process(bytes, header: header)
        let thumbnail = try store.store(processed.thumbnail.bytes, mime: processed.thumbnail.mime,
                                        width: processed.thumbnail.width, height: processed.thumbnail.height)
        let file = try store.store(processed.image.bytes, mime: processed.image.mime, width: processed.image.width,
                                   height: processed.image.height, thumbnail: thumbnail.id)
        return StoredUpload(file: file, thumbnail: thumbnail, source: processed.source)
    }
}

/// What an upload became in the store.
public struct StoredUpload: Sendable, Hashable {
    /// The file served as the attachment (for images: the cleaned image or rendition).
    public let file: StoredFile
    /// The thumbnail, for images.
    public let thumbnail: StoredFile?
    /// The uploaded image format, for images (HEIC when ``file`` is its JPEG rendition).
    public let source: ImageFormat?

    public init(file: StoredFile, thumbnail: StoredFile?, source: ImageFormat?) {
        self.file = file
        self.thumbnail = thumbnail
        self.source = source
    }

    /// The client's file name made safe, with the extension of what is served when the
    /// image was converted (`IMG_1.HEIC` → `IMG_1.jpg`).
    public func fileName(from clientName: String?) -> String {
        var name = FileName.sanitized(clientName ?? "")
        if let source, source.mime != file.metadata.mime, let served = ImageFormat.allCases.first(where: { $0.mime == file.metadata.mime }) {
            if let dot = name.lastIndex(of: "."), dot != name.startIndex { name = String(name[..<dot]) }
            name += "." + served.fileExtension
        }
        return name
    }

    /// The attachment a message carries for this upload. `id` is the upload's id (the
    /// server's record of who uploaded what where), the URLs are where the door serves the
    /// file and the thumbnail.
    public func attachment(id: String, name: String, url: String, thumbnailURL: String?) -> Attachment {
        let metadata = file.metadata
        var thumbnailInfo: Attachment.Thumbnail?
        if let thumbnail, let thumbnailURL, let width = thumbnail.metadata.width, let height = thumbnail.metadata.height {
            thumbnailInfo = Attachment.Thumbnail(url: thumbnailURL, width: width, height: height)
        }
        return Attachment(id: id, url: url, name: name, mime: metadata.mime, size: metadata.size,
                          width: metadata.width, height: metadata.height, thumbnail: thumbnailInfo)
    }
}
