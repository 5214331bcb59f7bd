import ParleyCore

/// What Parley knows about stored content: facts about the bytes, the same for every upload
/// of them. (A file's name belongs to an upload, not to the content, so it is not here.)
///
/// Kept as a small JSON sidecar beside the content rather than in SQLite: the files directory
/// is the one thing cluster nodes share, so its metadata must live in it too, and SQLite on a
/// shared (network) filesystem is unsafe. The facts are derived from the content, so two nodes
/// writing the same sidecar write the same thing; an atomic rename is all the coordination
/// needed, and garbage collection deletes a file and its sidecar together.
public struct FileMetadata: Hashable, Sendable {
    /// The MIME type the content is served with, e.g. `image/jpeg`.
    public var mime: String
    /// Bytes.
    public var size: Int
    /// Pixels, for images.
    public var width: Int?
    public var height: Int?
    /// The thumbnail's own content id, for images.
    public var thumbnail: ContentID?

    public init(mime: String, size: Int, width: Int? = nil, height: Int? = nil, thumbnail: ContentID? = nil) {
        self.mime = mime
        self.size = size
        self.width = width
        self.height = height
        self.thumbnail = thumbnail
    }

    /// Whether browsers may show it inline: a raster image Parley has decoded.
    public var isRasterImage: Bool { width != nil && FileTypePolicy.isRasterImageType(mime) }

    var jsonValue: JSONValue {
        var object = JSONObject()
        object["mime"] = .string(mime)
        object["size"] = .number(JSONNumber(size))
        if let width { object["width"] = .number(JSONNumber(width)) }
        if let height { object["height"] = .number(JSONNumber(height)) }
        if let thumbnail { object["thumbnail"] = .string(thumbnail.hex) }
        return .object(object)
    }

    init?(json: JSONValue) {
        guard let mime = json["mime"]?.stringValue, let size = json["size"]?.intValue, size >= 0 else { return nil }
        self.mime = mime
        self.size = size
        width = json["width"]?.intValue
        height = json["height"]?.intValue
        if let hex = json["thumbnail"]?.stringValue {
            guard let id = ContentID(hex: hex) else { return nil }
            thumbnail = id
        }
    }
}

/// Content in the store: its id and metadata.
public struct StoredFile: Hashable, Sendable {
    public let id: ContentID
    public let metadata: FileMetadata

    public init(id: ContentID, metadata: FileMetadata) {
        self.id = id
        self.metadata = metadata
    }
}
