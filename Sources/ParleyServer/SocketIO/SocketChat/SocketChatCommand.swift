import ParleyCore

/// The SocketChat events a client emits, parsed from an EVENT.
enum SocketChatCommand: Equatable {
    case connectUser(nickname: String)
    case chatMessage(nickname: String?, text: String)
    case typing(nickname: String?, Bool)
    case exitUser(nickname: String?)
    /// Parley's extension: this socket wants the opt-in events for message actions
    /// (`messageInfo`, `messageEdited`, `messageDeleted`, `reaction`).
    case subscribeActions

    /// The event names SocketChat speaks.
    static let names: Set<String> = ["connectUser", "chatMessage", "startType", "stopType", "exitUser", "subscribeActions"]

    /// The events as a client is told them when it sends another.
    static let spoken = "connectUser, chatMessage, startType, stopType, exitUser, subscribeActions"

    /// Whether `name` is a SocketChat event (anything else is an unknown event).
    static func knows(_ name: String) -> Bool { names.contains(name) }

    /// Parses an event (binary attachments as base64 text); the error text is what the client
    /// is told. Only the arguments SocketChat reads (the nickname and the message) are
    /// converted, once.
    static func parse(_ event: SocketIOEvent) -> Result<SocketChatCommand, SocketIOError> {
        guard !event.nameIsNumber else { return .failure(SocketIOError("an event needs a name")) }
        return parse(name: event.name, arguments: event.argumentsWithAttachmentsAsBase64(first: argumentsRead))
    }

    /// How many arguments after the name any SocketChat event reads.
    static let argumentsRead = 2

    /// Parses `["name", args...]`.
    static func parse(_ data: JSONValue?) -> Result<SocketChatCommand, SocketIOError> {
        guard let array = data?.arrayValue, let name = array.first?.stringValue else {
            return .failure(SocketIOError("an event needs a name"))
        }
        return parse(name: name, arguments: Array(array.dropFirst()))
    }

    static func parse(name: String, arguments args: [JSONValue]) -> Result<SocketChatCommand, SocketIOError> {
        func string(_ index: Int) -> String? { index < args.count ? args[index].stringValue : nil }
        switch name {
        case "connectUser":
            guard let nickname = string(0) else { return .failure(SocketIOError("connectUser needs a nickname")) }
            if let problem = MemberName.problem(with: nickname) {
                return .failure(SocketIOError("connectUser needs a nickname: \(problem.message)"))
            }
            return .success(.connectUser(nickname: nickname))
        case "chatMessage":
            guard args.count >= 2 else { return .failure(SocketIOError("chatMessage needs (nickname, message)")) }
            let text = args[1].stringValue ?? args[1].jsonString
            guard !text.isEmpty else { return .failure(SocketIOError("chatMessage with an empty message")) }
            return .success(.chatMessage(nickname: string(0), text: text))
        case "startType", "stopType":
            return .success(.typing(nickname: string(0), name == "startType"))
        case "exitUser":
            return .success(.exitUser(nickname: string(0)))
        case "subscribeActions":
            return .success(.subscribeActions)
        default:
            let shown = name.count > 40 ? String(name.prefix(40)) + "…" : name
            return .failure(SocketIOError("unknown event \"\(shown)\"; this server speaks \(spoken)"))
        }
    }
}
