/// A message body that carries files: `{"text": "optional caption", "attachments": [...]}`.
///
/// It travels like any other body (stored, offset, history, resume); doors that cannot show
/// files render it as text with ``lineDoorLines(baseURL:)`` or ``socketChatText(baseURL:)``.
public struct AttachmentMessage: Hashable, Sendable {
    /// The most attachments one message may carry.
    public static let maxAttachments = 10

    /// The caption, if any.
    public var text: String?
    public var attachments: [Attachment]

    public init(text: String? = nil, attachments: [Attachment]) {
        self.text = text
        self.attachments = attachments
    }

    /// The body: `text` first when there is a caption, then `attachments`.
    public var jsonValue: JSONValue {
        var object = JSONObject()
        if let text { object["text"] = .string(text) }
        object["attachments"] = .array(attachments.map(\.jsonValue))
        return .object(object)
    }

    /// What a message body is, as far as attachments go.
    public enum Shape: Hashable, Sendable {
        /// No `attachments` member: an ordinary body, none of this type's business.
        case plain
        /// A valid attachment message.
        case attachments(AttachmentMessage)
        /// An `attachments` member that is not valid: refuse the publish with this error.
        case invalid(ParleyError)
    }

    /// Tells attachment messages from other bodies. A body is an attachment message when it
    /// is an object with an `attachments` member; then that member must be an array of 1 to
    /// ``maxAttachments`` valid attachments and `text`, if present, a string (or null). Other
    /// members are allowed and left alone.
    public static func classify(_ body: JSONValue) -> Shape {
        guard case .object(let object) = body, let list = object["attachments"] else { return .plain }
        guard case .array(let items) = list, !items.isEmpty, items.count <= maxAttachments else {
            return .invalid(ParleyError(.badRequest, "attachments must be an array of 1 to \(maxAttachments) attachments"))
        }
        var text: String?
        if let caption = object["text"], !caption.isNull {
            guard let string = caption.stringValue else {
                return .invalid(ParleyError(.badRequest, "text must be a string"))
            }
            text = string
        }
        var attachments: [Attachment] = []
        for item in items {
            do {
                attachments.append(try Attachment(json: item))
            } catch {
                return .invalid(error)
            }
        }
        return .attachments(AttachmentMessage(text: text, attachments: attachments))
    }

    /// The line door's view: the caption (if any), then one line per attachment,
    /// `[image cat.jpg 1.2 MB] http://host/…`. A door prefixes each with `sender:`.
    /// `baseURL` (e.g. `http://host:8080`) goes before URLs that start with `/`.
    public func lineDoorLines(baseURL: String = "") -> [String] {
        var lines: [String] = []
        if let text, !text.isEmpty { lines.append(text) }
        for attachment in attachments {
            let url = AttachmentMessage.absolute(attachment.url, baseURL: baseURL)
            lines.append("[\(attachment.kind) \(attachment.name) \(ByteCount.humanReadable(attachment.size))] \(url)")
        }
        return lines
    }

    /// SocketChat's one-string view: `caption [image] URL [file] URL` (the caption omitted
    /// when there is none).
    public func socketChatText(baseURL: String = "") -> String {
        var parts: [String] = []
        if let text, !text.isEmpty { parts.append(text) }
        for attachment in attachments {
            parts.append("[\(attachment.kind)] \(AttachmentMessage.absolute(attachment.url, baseURL: baseURL))")
        }
        return parts.joined(separator: " ")
    }

    private static func absolute(_ url: String, baseURL: String) -> String {
        url.hasPrefix("/") && !url.hasPrefix("//") ? baseURL + url : url
    }
}

/// Byte counts for people.
public enum ByteCount {
    /// Decimal units, one decimal below 10: `512 B`, `3.4 KB`, `340 KB`, `1.2 MB`, `12 MB`.
    public static func humanReadable(_ bytes: Int) -> String {
        guard bytes >= 1000 else { return "\(max(0, bytes)) B" }
        let units = ["KB", "MB", "GB", "TB", "PB", "EB"]
        var scale = 1000.0
        var unit = 0
        while unit < units.count - 1 && Double(bytes) / scale >= 999.5 {
            scale *= 1000
            unit += 1
        }
        let value = Double(bytes) / scale
        if value < 9.95 {
            let tenths = Int((value * 10).rounded())
            return "\(tenths / 10).\(tenths % 10) \(units[unit])"
        }
        return "\(Int(value.rounded())) \(units[unit])"
    }
}
