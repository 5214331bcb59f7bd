/// Why a ``ChatSession`` refused an operation: a stable code that a door may word its own
/// way, the session's text for everybody else, and whether the door must end the connection
/// after telling the client.
struct ChatRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    let code: Code
    let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A ban, sustained abuse, or a reload that no longer lets the session in: telling the
    /// client is the last thing the door does before it closes.
    var closes: Bool { code == .banned || code == .rateAbuse || code == .noLongerAllowed }

    var description: String { "\(message) [\(code.rawValue)]" }

    /// Stable codes, named as in logs.
    struct Code: RawRepresentable, Hashable, Sendable {
        let rawValue: String
        init(rawValue: String) { self.rawValue = rawValue }

        /// The channel is not open on this server (not configured, with `--open-channels` off).
        static let channelClosed = Code(rawValue: "channel_closed")
        /// The channel needs a verified token first.
        static let authRequired = Code(rawValue: "auth_required")
        /// A token did not verify.
        static let authFailed = Code(rawValue: "auth_failed")
        /// The token does not allow this, or it expired.
        static let forbidden = Code(rawValue: "forbidden")
        /// A direct room that cannot be (one user, too many, a bad id).
        static let badDirectRoom = Code(rawValue: "bad_direct_room")
        /// The address or the name is banned.
        static let banned = Code(rawValue: "banned")
        /// The name or client data breaks the one name rule (``MemberName``) or its size limit.
        static let badIdentity = Code(rawValue: "bad_identity")
        /// The command needs an identity first (`iam:`, the handshake, `connectUser`).
        static let notIdentified = Code(rawValue: "not_identified")
        /// Over the message rate: this message is dropped.
        static let rateLimited = Code(rawValue: "rate_limited")
        /// Over the message rate again and again: dropped, and the connection ends.
        static let rateAbuse = Code(rawValue: "rate_abuse")
        /// Over the history request rate.
        static let historyRateLimited = Code(rawValue: "history_rate_limited")
        /// Over the join rate (`--join-rate`): this join is refused.
        static let joinRateLimited = Code(rawValue: "join_rate_limited")
        /// Already in as many rooms as one connection may be.
        static let tooManyRooms = Code(rawValue: "too_many_rooms")
        /// After a reload the channel, or the token, no longer lets the session in.
        static let noLongerAllowed = Code(rawValue: "no_longer_allowed")
        /// The hub refused it (a bad room name, too large, a server limit, the store).
        static let refused = Code(rawValue: "refused")

        // Message actions (reply, edit, delete, react, unreact):
        /// The action is malformed: no target id, a bad reaction key, a body that cannot be
        /// an edit or a reply (a typing signal, attachments).
        static let badAction = Code(rawValue: "bad_action")
        /// The room has no message with that id (never had, retention dropped it, it is in
        /// another room, or it is an action's id).
        static let unknownMessage = Code(rawValue: "unknown_message")
        /// The target was deleted: a tombstone takes no action.
        static let messageDeleted = Code(rawValue: "message_deleted")
        /// Only the message's author, or a token with `moderate`, may edit or delete it.
        static let notAuthor = Code(rawValue: "not_author")
        /// The message is older than `--edit-window` (or edits are off).
        static let editWindowClosed = Code(rawValue: "edit_window_closed")
        /// The message has had `actions.max_edits` edits.
        static let tooManyEdits = Code(rawValue: "too_many_edits")
        /// The message has `actions.max_reactions_per_message` distinct reactions, or the
        /// member has `actions.max_reactions_per_member` on it.
        static let tooManyReactions = Code(rawValue: "too_many_reactions")
        /// The member already has this reaction on the message.
        static let alreadyReacted = Code(rawValue: "already_reacted")
        /// The member has no such reaction on the message.
        static let notReacted = Code(rawValue: "not_reacted")
    }
}

/// Texts every door words alike.
enum DoorWording {
    /// `millis` as seconds for people: `30`, or `0.5`.
    static func seconds(_ millis: UInt64) -> String {
        millis % 1000 == 0 ? String(millis / 1000) : String(Double(millis) / 1000)
    }

    /// A rate for people: `10`, or `0.5`.
    static func rate(_ perSecond: Double) -> String {
        perSecond == perSecond.rounded() && perSecond < 1e15 ? String(Int(perSecond)) : String(perSecond)
    }

    /// Most characters of a client's unknown command or event quoted back in an error.
    static let quotedLimit = 40

    /// What a client sent, cut to ``quotedLimit`` characters for an error that quotes it.
    static func quoted(_ text: String) -> String {
        text.count > quotedLimit ? String(text.prefix(quotedLimit)) + "…" : text
    }
}
