import ParleyCore

/// What a client asks to do to a message of its room (docs/protocols.md, "Message
/// actions"); the target is named by its id.
enum MessageActionRequest: Sendable, Equatable {
    /// A new message answering the target (an ordinary message to clients that know no replies).
    case reply(to: String, body: JSONValue, messageID: String?)
    /// The target's new body.
    case edit(String, body: JSONValue)
    /// The target becomes a tombstone.
    case delete(String)
    case react(String, emoji: String)
    case unreact(String, emoji: String)

    var targetID: String {
        switch self {
        case .reply(let id, _, _), .edit(let id, _), .delete(let id), .react(let id, _), .unreact(let id, _): id
        }
    }

    /// The body it carries (a reply's message, an edit's new body).
    var body: JSONValue? {
        switch self {
        case .reply(_, let body, _), .edit(_, let body): body
        case .delete, .react, .unreact: nil
        }
    }

    /// The command's name, as the native door spells it.
    var name: String {
        switch self {
        case .reply: "reply"
        case .edit: "edit"
        case .delete: "delete"
        case .react: "react"
        case .unreact: "unreact"
        }
    }
}
