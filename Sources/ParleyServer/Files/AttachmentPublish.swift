import ParleyCore
import ParleyFiles

/// What a publish body says about attachments, read without touching the disk.
///
/// A body is an attachment message when it is an object with an `attachments` member
/// (AttachmentMessage in ParleyCore). The client names each upload by its id, either as
/// the object the upload answered (`{"id": ..., ...}`, its other fields ignored) or as the
/// id string; the server then fills in every field from its own record of the upload.
enum AttachmentBody: Equatable {
    /// No `attachments` member: published as it is.
    case plain
    /// The upload ids named, in order.
    case references([String])
    /// Refused, saying why.
    case invalid(ParleyError)

    static func inspect(_ body: JSONValue) -> AttachmentBody {
        guard case .object(let object) = body, let list = object["attachments"] else { return .plain }
        // The server rewrites this object (its `attachments`), and readers differ on which
        // copy of a repeated key counts: a forged first `attachments` would stay beside the
        // server's. So in a body with attachments every key may appear once.
        var seen = Set<String>()
        for key in object.keys where !seen.insert(key).inserted {
            let shown = key.count > 40 ? String(key.prefix(40)) + "…" : key
            return .invalid(ParleyError(.badRequest, "\"\(shown)\" appears more than once in the message; in a message with attachments each key may appear only once"))
        }
        guard case .array(let items) = list, !items.isEmpty, items.count <= AttachmentMessage.maxAttachments else {
            return .invalid(ParleyError(.badRequest, "attachments must be an array of 1 to \(AttachmentMessage.maxAttachments) uploads"))
        }
        if let caption = object["text"], !caption.isNull, caption.stringValue == nil {
            return .invalid(ParleyError(.badRequest, "text must be a string"))
        }
        var ids: [String] = []
        for item in items {
            guard let id = item.stringValue ?? item["id"]?.stringValue else {
                return .invalid(ParleyError(.badRequest, "each attachment must be an upload's id or {\"id\": ...}"))
            }
            guard UploadRegistry.isValidID(id) else {
                return .invalid(ParleyError(.badRequest, "\"\(id.prefix(40))\" is not an upload id"))
            }
            ids.append(id)
        }
        return .references(ids)
    }
}

/// A publish body with its attachments filled in from the registry.
struct ResolvedPublish: Sendable {
    let body: JSONValue
    /// The uploads it carries (references are recorded once it is stored).
    let ids: [String]
}

extension ServerFiles {
    /// Fills in the attachments of `body` from the uploads recorded in `channel` (on a worker
    /// thread), to be published in `rooms`; refuses ids this channel never issued, and
    /// uploads already published in ``UploadRegistry/roomsPerUpload`` other rooms.
    /// `completion` runs on a worker thread. Plain bodies complete at once, on the caller's
    /// thread.
    func resolve(_ body: JSONValue, channel: String, rooms: [String],
                 completion: @escaping @Sendable (Result<ResolvedPublish, ParleyError>) -> Void) {
        let ids: [String]
        switch AttachmentBody.inspect(body) {
        case .plain:
            completion(.success(ResolvedPublish(body: body, ids: [])))
            return
        case .invalid(let error):
            completion(.failure(error))
            return
        case .references(let named):
            ids = named
        }
        let registry = self.registry
        do throws(FileError) {
            try checks.submit {
                completion(Result { () throws(ParleyError) -> ResolvedPublish in
                    try ServerFiles.fill(body, ids: ids, channel: channel, rooms: rooms, registry: registry)
                })
            }
        } catch {
            completion(.failure(ParleyError(.unavailable, "the server is busy with files; try again")))
        }
    }

    /// The async form of ``resolve(_:channel:completion:)``.
    func resolve(_ body: JSONValue, channel: String, rooms: [String]) async throws(ParleyError) -> ResolvedPublish {
        if case .plain = AttachmentBody.inspect(body) { return ResolvedPublish(body: body, ids: []) }
        let result = await withCheckedContinuation { continuation in
            resolve(body, channel: channel, rooms: rooms) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Remembers that the stored message `message` carries uploads `ids`, so garbage
    /// collection keeps them while the message is kept. Fire and forget, on a worker thread.
    func noteReferences(_ ids: [String], in message: Message) {
        guard !ids.isEmpty, message.offset > 0 else { return }
        let (registry, room) = (self.registry, message.room)
        let reference = UploadReference(room: room.room, offset: message.offset)
        try? checks.submit {
            for id in Set(ids) { try? registry.addReference(reference, to: id, channel: room.channel) }
        }
    }

    static func fill(_ body: JSONValue, ids: [String], channel: String, rooms: [String],
                             registry: UploadRegistry) throws(ParleyError) -> ResolvedPublish {
        var attachments: [JSONValue] = []
        for id in ids {
            let record: UploadRecord?
            do throws(FileError) {
                record = try registry.record(id: id, channel: channel)
            } catch {
                throw ParleyError(.unavailable, "cannot read the upload \(id): \(error.message)")
            }
            guard let record else {
                throw ParleyError(.badRequest, "unknown attachment \(id): upload the file to channel \"\(channel)\" first")
            }
            guard registry.admitsReferences(to: id, inRooms: rooms, channel: channel) else {
                throw ParleyError(.limitReached, "the upload \(id) is already attached in \(registry.roomsPerUpload) rooms; upload the file again to attach it elsewhere")
            }
            // A publish is about to refer to it: garbage collection must not take it meanwhile.
            registry.touch(id: id, channel: channel)
            attachments.append(record.attachment.jsonValue)
        }
        guard case .object(var object) = body else { throw ParleyError(.badRequest, "attachments need an object body") }
        object["attachments"] = .array(attachments)
        let filled = JSONValue.object(object)
        if case .invalid(let error) = AttachmentMessage.classify(filled) { throw error }
        return ResolvedPublish(body: filled, ids: ids)
    }
}
