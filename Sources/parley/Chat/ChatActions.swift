import ParleyClient
import ParleyCore

/// The message-action commands both chat modes understand: reply to or react on the newest
/// message of someone else, edit or delete your own newest message. The server checks every
/// rule (author, edit window, reaction limits); a refusal comes back as its message.
@MainActor enum ChatActions {
    static let help = "/reply TEXT, /react EMOJI, /unreact EMOJI (the last message of someone else), /edit TEXT, /delete (your last message)"

    /// Runs `line` when it is an action command and returns what to tell the user (empty:
    /// nothing); nil when `line` is no action command.
    static func run(_ line: String, with model: ChatRoomModel) async -> String? {
        let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
        guard let command = parts.first else { return nil }
        let argument = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
        let theirs = model.state.lastOthersMessage
        let mine = model.state.lastOwnMessage
        do {
            switch command {
            case "/reply":
                guard !argument.isEmpty else { return "usage: /reply TEXT" }
                guard let target = theirs else { return "no message to reply to" }
                try await model.reply(to: target.id, argument)
            case "/react", "/unreact":
                guard !argument.isEmpty, !argument.contains(" ") else { return "usage: \(command) EMOJI" }
                guard let target = theirs else { return "no message to react to" }
                if command == "/react" { try await model.react(argument, to: target.id) } else { try await model.unreact(argument, from: target.id) }
            case "/edit":
                guard !argument.isEmpty else { return "usage: /edit TEXT" }
                guard let target = mine else { return "you have no message to edit" }
                try await model.edit(target.id, to: argument)
            case "/delete":
                guard let target = mine else { return "you have no message to delete" }
                try await model.delete(target.id)
            default:
                return nil
            }
        } catch {
            return "\(command.dropFirst()) refused: \(error.message)"
        }
        return ""
    }

    /// What changed between two states of one transcript line, as text for line mode:
    /// `alice (edited): …`, `alice deleted "…"`, `bob reacted 👍 to "…"`,
    /// `bob took back 👍 on "…"`. Changes this client made are not told.
    static func changes(from old: ChatLine, to new: ChatLine, myName: String) -> [String] {
        var out: [String] = []
        let snippet = ChatLine.Quote(id: old.id, name: nil, text: old.text, isDeleted: false).snippet()
        if new.isDeleted, !old.isDeleted {
            if !new.isMine { out.append("\(new.name) deleted \"\(snippet)\"") }
            return out
        }
        if new.text != old.text, new.isEdited, !new.isMine {
            out.append("\(new.heading): \(new.text)")
        }
        let target = ChatLine.Quote(id: new.id, name: nil, text: new.text, isDeleted: false).snippet()
        for reaction in new.reactions {
            let before = old.reactions.first { $0.emoji == reaction.emoji }?.names ?? []
            for name in reaction.names where !before.contains(name) && name != myName {
                out.append("\(name) reacted \(reaction.emoji) to \"\(target)\"")
            }
        }
        for reaction in old.reactions {
            let after = new.reactions.first { $0.emoji == reaction.emoji }?.names ?? []
            for name in reaction.names where !after.contains(name) && name != myName {
                out.append("\(name) took back \(reaction.emoji) on \"\(target)\"")
            }
        }
        return out
    }
}
