import ParleyCore

/// The server's record of one upload: the id it issued, in which channel (and for which
/// room), the name it was uploaded under, and the stored content it became.
///
/// A message may only carry attachments the server has a record of in the message's
/// channel, and every attachment field in a published message is taken from the record,
/// never from the client (``attachment``).
public struct UploadRecord: Sendable, Hashable {
    /// The id a client names the upload by: 32 lowercase hex digits, random.
    public let id: String
    public let channel: String
    /// The room the upload was made for (`?room=`), if one was named.
    public let room: String?
    /// The file name shown and offered on download (already sanitized).
    public let name: String
    /// What was stored (for images: the cleaned image or rendition) and its facts.
    public let file: StoredFile
    /// The thumbnail, for images.
    public let thumbnail: StoredFile?
    /// `scheme://host[:port]` the upload's URLs start with.
    public let baseURL: String
    /// When it was uploaded, milliseconds since the epoch.
    public let uploadedMillis: Int64

    public init(id: String, channel: String, room: String?, name: String, file: StoredFile, thumbnail: StoredFile?,
                baseURL: String, uploadedMillis: Int64) {
        self.id = id
        self.channel = channel
        self.room = room
        self.name = name
        self.file = file
        self.thumbnail = thumbnail
        self.baseURL = baseURL
        self.uploadedMillis = uploadedMillis
    }

    /// Where the file is served: `BASE/{channel}/files/{id}`.
    public var url: String { baseURL + UploadRecord.path(channel: channel, id: id) }

    /// Where the thumbnail is served, for images: `BASE/{channel}/files/{id}/thumbnail`.
    public var thumbnailURL: String? { thumbnail == nil ? nil : url + "/thumbnail" }

    /// The attachment a message carries for this upload.
    public var attachment: Attachment {
        let metadata = file.metadata
        var thumbnailInfo: Attachment.Thumbnail?
        if let thumbnail, let thumbnailURL, let width = thumbnail.metadata.width, let height = thumbnail.metadata.height {
            thumbnailInfo = Attachment.Thumbnail(url: thumbnailURL, width: width, height: height)
        }
        return Attachment(id: id, url: url, name: name, mime: metadata.mime, size: metadata.size,
                          width: metadata.width, height: metadata.height, thumbnail: thumbnailInfo)
    }

    /// The path of an upload's download URL; the channel is percent-encoded as one segment.
    public static func path(channel: String, id: String) -> String {
        "/" + percentEncodedSegment(channel) + "/files/" + id
    }

    /// Everything but unreserved characters percent-encoded (RFC 3986), so any channel name
    /// is one path segment with no space or control character.
    public static func percentEncodedSegment(_ text: String) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: JSON (the record file)

    var jsonValue: JSONValue {
        var object = JSONObject()
        object["v"] = 1
        object["id"] = .string(id)
        object["channel"] = .string(channel)
        if let room { object["room"] = .string(room) }
        object["name"] = .string(name)
        object["file"] = .string(file.id.hex)
        object["meta"] = file.metadata.jsonValue
        if let thumbnail {
            object["thumbnail"] = .string(thumbnail.id.hex)
            object["thumbnailMeta"] = thumbnail.metadata.jsonValue
        }
        object["base"] = .string(baseURL)
        object["uploaded"] = .number(JSONNumber(Int(uploadedMillis)))
        return .object(object)
    }

    init?(json: JSONValue) {
        guard json["v"]?.intValue == 1,
              let id = json["id"]?.stringValue, UploadRegistry.isValidID(id),
              let channel = json["channel"]?.stringValue,
              let name = json["name"]?.stringValue,
              let fileHex = json["file"]?.stringValue, let fileID = ContentID(hex: fileHex),
              let meta = json["meta"].flatMap(FileMetadata.init(json:)),
              let base = json["base"]?.stringValue,
              let uploaded = json["uploaded"]?.intValue else { return nil }
        self.id = id
        self.channel = channel
        room = json["room"]?.stringValue
        self.name = name
        file = StoredFile(id: fileID, metadata: meta)
        if let hex = json["thumbnail"]?.stringValue {
            guard let thumbnailID = ContentID(hex: hex), let thumbnailMeta = json["thumbnailMeta"].flatMap(FileMetadata.init(json:)) else {
                return nil
            }
            thumbnail = StoredFile(id: thumbnailID, metadata: thumbnailMeta)
        } else {
            thumbnail = nil
        }
        baseURL = base
        uploadedMillis = Int64(uploaded)
    }
}

/// A message that carries an upload: the room and the message's offset there. The upload
/// is kept while the store still keeps that message.
public struct UploadReference: Sendable, Hashable {
    public let room: String
    public let offset: Int64

    public init(room: String, offset: Int64) {
        self.room = room
        self.offset = offset
    }
}
