import ParleyCore

/// The rules of message actions, for every door: the shape of a request, then its verdict
/// against the target's current state and the limits in force. ``ChatSession`` asks them
/// for every connection door; REST, which has no session, asks the same ones.
struct MessageActionRules: Sendable {
    /// `--edit-window`, in milliseconds (0: no edits).
    let editWindowMillis: Int64
    let maxEdits: Int
    let maxReactionsPerMessage: Int
    let maxReactionsPerMember: Int

    init(_ configuration: ServerConfiguration) {
        editWindowMillis = Int64(configuration.editWindowSeconds) * 1000
        maxEdits = configuration.maxEditsPerMessage
        maxReactionsPerMessage = configuration.maxReactionsPerMessage
        maxReactionsPerMember = configuration.maxReactionsPerMember
    }

    /// Longest target id accepted, in bytes (server ids are far shorter).
    static let maxTargetIDBytes = 128

    /// Why the request is malformed, before any store is asked: no target, a bad reaction
    /// key, or a body no edit or reply may have.
    static func problem(with request: MessageActionRequest) -> ChatRefusal? {
        let id = request.targetID
        if id.isEmpty || id.utf8.count > maxTargetIDBytes {
            return ChatRefusal(.badAction, "\(request.name): the target must be a message id of 1-\(maxTargetIDBytes) bytes")
        }
        switch request {
        case .react(_, let emoji), .unreact(_, let emoji):
            if let problem = Reaction.problem(with: emoji) { return ChatRefusal(.badAction, "\(request.name): \(problem)") }
        case .edit(_, let body), .reply(_, let body, _):
            if Message.isEphemeral(body) {
                return ChatRefusal(.badAction, "\(request.name): a typing signal cannot be \(request.name == "edit" ? "an edit" : "a reply")")
            }
            switch AttachmentBody.inspect(body) {
            case .plain: break
            case .references: return ChatRefusal(.badAction, "\(request.name): attachments in replies and edits are not supported yet")
            case .invalid(let error): return ChatRefusal(.badAction, error.message)
            }
        case .delete:
            break
        }
        return nil
    }

    /// The verdict on `request` by `actor` (a member id; nil: the server, over REST) against
    /// `target` as it stands now in `room`; nil when it may go ahead.
    func refusal(for request: MessageActionRequest, target: Message?, in room: RoomKey, actor: String?, canModerate: Bool,
                 nowMillis: Int64) -> ChatRefusal? {
        let id = request.targetID
        guard let target else {
            return ChatRefusal(.unknownMessage, "\(request.name): room \"\(room.room)\" has no message \"\(DoorWording.quoted(id))\"")
        }
        if target.isDeleted { return ChatRefusal(.messageDeleted, "\(request.name): message \"\(id)\" was deleted") }
        let isAuthor = actor != nil && target.sender?.id == actor
        switch request {
        case .reply:
            return nil
        case .edit:
            guard isAuthor || canModerate else {
                return ChatRefusal(.notAuthor, "edit: only the author of message \"\(id)\" (or a moderator) may edit it")
            }
            guard editWindowMillis > 0 else { return ChatRefusal(.editWindowClosed, "edit: editing is off on this server") }
            guard nowMillis - target.timestampMillis <= editWindowMillis else {
                return ChatRefusal(.editWindowClosed, "edit: message \"\(id)\" is older than the edit window (\(editWindowMillis / 1000) s)")
            }
            guard target.editCount < maxEdits else {
                return ChatRefusal(.tooManyEdits, "edit: message \"\(id)\" was edited \(target.editCount) times already (limit \(maxEdits))")
            }
            return nil
        case .delete:
            guard isAuthor || canModerate else {
                return ChatRefusal(.notAuthor, "delete: only the author of message \"\(id)\" (or a moderator) may delete it")
            }
            return nil
        case .react(_, let emoji):
            let mine = target.reactions(of: actor ?? "")
            if mine.contains(emoji) { return ChatRefusal(.alreadyReacted, "react: you already reacted \(emoji) to message \"\(id)\"") }
            guard mine.count < maxReactionsPerMember else {
                return ChatRefusal(.tooManyReactions, "react: at most \(maxReactionsPerMember) reactions per member on one message")
            }
            guard target.reactions.contains(where: { $0.emoji == emoji }) || target.reactions.count < maxReactionsPerMessage else {
                return ChatRefusal(.tooManyReactions, "react: message \"\(id)\" has \(maxReactionsPerMessage) different reactions already (the limit)")
            }
            return nil
        case .unreact(_, let emoji):
            guard target.reactions(of: actor ?? "").contains(emoji) else {
                return ChatRefusal(.notReacted, "unreact: you have not reacted \(emoji) to message \"\(id)\"")
            }
            return nil
        }
    }

    /// Looks the target up in `key`, checks the verdict, and publishes the action (or the
    /// reply) as `sender`. `completion` runs once, on a store thread: with the stored entry, or
    /// the refusal. The caller has checked the request's shape, the token and the rate.
    func perform(_ request: MessageActionRequest, in key: RoomKey, as sender: Member?, canModerate: Bool, hub: Hub,
                 completion: @escaping @Sendable (Result<Message, ChatRefusal>) -> Void) {
        hub.message(withID: request.targetID, in: key) { [self] result in
            let target: Message?
            switch result {
            case .success(let found): target = found
            case .failure(let error):
                completion(.failure(ChatRefusal(.refused, error.message)))
                return
            }
            if let refusal = refusal(for: request, target: target, in: key, actor: sender?.id, canModerate: canModerate,
                                     nowMillis: hub.clock.nowMillis()) {
                completion(.failure(refusal))
                return
            }
            let reference = MessageReference(id: target!.id, offset: target!.offset)
            let body: JSONValue, action: MessageAction?, replyTo: MessageReference?, messageID: String?
            switch request {
            case .reply(_, let text, let id): (body, action, replyTo, messageID) = (text, nil, reference, id)
            case .edit(_, let text): (body, action, replyTo, messageID) = (text, MessageAction(.edit, target: reference), nil, nil)
            case .delete: (body, action, replyTo, messageID) = (.null, MessageAction(.delete, target: reference), nil, nil)
            case .react(_, let emoji):
                (body, action, replyTo, messageID) = (.null, MessageAction(.react, target: reference, emoji: emoji), nil, nil)
            case .unreact(_, let emoji):
                (body, action, replyTo, messageID) = (.null, MessageAction(.unreact, target: reference, emoji: emoji), nil, nil)
            }
            do throws(ParleyError) {
                try hub.publish(body, to: key, from: sender, messageID: messageID, replyTo: replyTo, action: action) { stored in
                    completion(stored.mapError { ChatRefusal(.refused, $0.message) })
                }
            } catch {
                completion(.failure(ChatRefusal(.refused, error.message)))
            }
        }
    }
}
