import ParleyClient
import ParleyCore

/// The message-action commands both chat modes understand: reply to or react on the newest
/// message of someone else, edit or delete your own newest message. The server checks every
/// rule (author, edit window, reaction limits); a refusal comes back as its message.
@MainActor enum ChatActions {
    static let help = "/reply TEXT, /react EMOJI, /unreact EMOJI (the last message of someone else), /edit TEXT, /delete (your last message), "
        + "/inbox (your conversations, unread first), /dm USER (a direct message), /seen (who has seen your last message)"

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
            case "/inbox":
                let page = try await model.inbox()
                guard !page.conversations.isEmpty else { return "no conversations yet" }
                return page.conversations.map(inboxLine(me: model.userID)).joined(separator: "\n")
            case "/dm":
                let users = argument.split(separator: " ").map(String.init)
                guard !users.isEmpty else { return "usage: /dm USER [USER…]" }
                try await model.openDirectRoom(with: users)
            case "/seen":
                return model.seenByLine ?? "nobody has seen your last message yet"
            default:
                return nil
            }
        } catch {
            return "\(command.dropFirst()) refused: \(error.message)"
        }
        return ""
    }

    /// One conversation as `/inbox` lists it: `@bob (2 unread, 1 mention): bob: hi` or
    /// `#team: alice: morning`.
    static func inboxLine(me: String?) -> (ChatConversation) -> String {
        { conversation in
            let title = conversation.isDirect ? "@" + conversation.title(me: me) : "#" + conversation.room
            var counts: [String] = []
            if let badge = conversation.unread.badge { counts.append("\(badge) unread") }
            if conversation.unread.mentions > 0 { counts.append("\(conversation.unread.mentions) mention\(conversation.unread.mentions == 1 ? "" : "s")") }
            let head = counts.isEmpty ? title : "\(title) (\(counts.joined(separator: ", ")))"
            guard let last = conversation.last else { return head }
            let text = last.text ?? last.caption ?? "…"
            return "\(head): \(conversation.lastSenderName ?? "server"): \(TerminalText.sanitized(text).split(whereSeparator: \.isNewline).joined(separator: " "))"
        }
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
