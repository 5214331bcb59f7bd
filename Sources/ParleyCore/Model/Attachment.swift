/// A file a message carries: what the server answered to its upload.
///
/// In a message body it is the JSON object
/// `{"id", "url", "name", "mime", "size", "width"?, "height"?, "thumbnail"?: {"url", "width", "height"}}`.
/// Every string that a door may print (name, URLs) is free of control characters, so an
/// attachment cannot inject lines into a line-oriented door.
public struct Attachment: Hashable, Sendable {
    /// A smaller image for previews.
    public struct Thumbnail: Hashable, Sendable {
        public var url: String
        public var width: Int
        public var height: Int

        public init(url: String, width: Int, height: Int) {
            self.url = url
            self.width = width
            self.height = height
        }
    }

    /// The id the server issued for the upload.
    public var id: String
    /// Where to download it (absolute, or relative to the server).
    public var url: String
    /// The file name to show and save as.
    public var name: String
    /// The MIME type it is served with.
    public var mime: String
    /// Bytes.
    public var size: Int
    /// Pixels, for images.
    public var width: Int?
    public var height: Int?
    public var thumbnail: Thumbnail?

    public init(id: String, url: String, name: String, mime: String, size: Int,
                width: Int? = nil, height: Int? = nil, thumbnail: Thumbnail? = nil) {
        self.id = id
        self.url = url
        self.name = name
        self.mime = mime
        self.size = size
        self.width = width
        self.height = height
        self.thumbnail = thumbnail
    }

    /// A raster image a client can show inline (it has pixel dimensions); anything else,
    /// SVG included, is a file to download.
    public var isImage: Bool {
        width != nil && height != nil && mime.hasPrefix("image/") && mime != "image/svg+xml"
    }

    /// `image` or `file`: how doors without pictures name it.
    public var kind: String { isImage ? "image" : "file" }

    /// The JSON object, keys in the documented order.
    public var jsonValue: JSONValue {
        var object = JSONObject()
        object["id"] = .string(id)
        object["url"] = .string(url)
        object["name"] = .string(name)
        object["mime"] = .string(mime)
        object["size"] = .number(JSONNumber(size))
        if let width { object["width"] = .number(JSONNumber(width)) }
        if let height { object["height"] = .number(JSONNumber(height)) }
        if let thumbnail {
            object["thumbnail"] = [
                "url": .string(thumbnail.url),
                "width": .number(JSONNumber(thumbnail.width)),
                "height": .number(JSONNumber(thumbnail.height)),
            ]
        }
        return .object(object)
    }

    /// Limits on the fields of an attachment a client sends.
    public enum Limits {
        public static let maxIDBytes = 128
        public static let maxURLBytes = 2048
        public static let maxNameBytes = 255
        public static let maxMIMEBytes = 255
        public static let maxDimension = 1_000_000
    }

    /// Parses and validates an attachment object; `badRequest` says which field is wrong.
    /// Unknown members are ignored (and not kept).
    public init(json: JSONValue) throws(ParleyError) {
        guard case .object(let object) = json else { throw Attachment.invalid("an attachment must be an object") }
        id = try Attachment.string(object["id"], "id", max: Limits.maxIDBytes)
        guard id.utf8.allSatisfy({ Attachment.isIDByte($0) }) else {
            throw Attachment.invalid("attachment id may only hold letters, digits, '.', '_' and '-'")
        }
        url = try Attachment.url(object["url"], "url")
        name = try Attachment.string(object["name"], "name", max: Limits.maxNameBytes)
        mime = try Attachment.string(object["mime"], "mime", max: Limits.maxMIMEBytes)
        let halves = mime.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, !halves[0].isEmpty, !halves[1].isEmpty, !mime.contains(" ") else {
            throw Attachment.invalid("attachment mime must be a type/subtype")
        }
        guard let size = object["size"]?.intValue, size >= 0 else {
            throw Attachment.invalid("attachment size must be a non-negative integer")
        }
        self.size = size
        width = try Attachment.dimension(object["width"], "width")
        height = try Attachment.dimension(object["height"], "height")
        guard (width == nil) == (height == nil) else {
            throw Attachment.invalid("attachment width and height go together")
        }
        if let value = object["thumbnail"], !value.isNull {
            guard case .object(let thumb) = value,
                  let width = try Attachment.dimension(thumb["width"], "thumbnail width"),
                  let height = try Attachment.dimension(thumb["height"], "thumbnail height") else {
                throw Attachment.invalid("attachment thumbnail must be {url, width, height}")
            }
            thumbnail = Thumbnail(url: try Attachment.url(thumb["url"], "thumbnail url"), width: width, height: height)
        }
    }

    private static func invalid(_ message: String) -> ParleyError { ParleyError(.badRequest, message) }

    private static func string(_ value: JSONValue?, _ field: String, max: Int) throws(ParleyError) -> String {
        guard let text = value?.stringValue, !text.isEmpty, text.utf8.count <= max else {
            throw invalid("attachment \(field) must be a string of 1 to \(max) bytes")
        }
        guard !text.unicodeScalars.contains(where: isControl) else {
            throw invalid("attachment \(field) must not contain control characters")
        }
        return text
    }

    private static func url(_ value: JSONValue?, _ field: String) throws(ParleyError) -> String {
        let text = try string(value, field, max: Limits.maxURLBytes)
        guard !text.unicodeScalars.contains(where: { $0 == " " || $0.properties.isWhitespace }) else {
            throw invalid("attachment \(field) must not contain spaces")
        }
        return text
    }

    private static func dimension(_ value: JSONValue?, _ field: String) throws(ParleyError) -> Int? {
        guard let value, !value.isNull else { return nil }
        guard let number = value.intValue, number > 0, number <= Limits.maxDimension else {
            throw invalid("attachment \(field) must be a positive integer")
        }
        return number
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}"
            || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
    }

    private static func isIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }
}
