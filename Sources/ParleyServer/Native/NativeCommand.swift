import ParleyCore

private typealias Field = NativeProtocol.Field
private typealias MessageType = NativeProtocol.MessageType

/// One client → server message of the Scaledrone v3 protocol (docs/protocols.md, "Native"), validated.
enum NativeCommand: Equatable, Sendable {
    /// `user_id` and `share_receipts` are Parley's (docs/protocols.md, "Users").
    case handshake(channel: String, clientData: JSONValue?, callback: Int?, user: String? = nil, sharesReceipts: Bool = true)
    case authenticate(token: String, callback: Int?)
    /// `receipts` and `unread` ask for the room's `read` events and `unread` counts.
    case subscribe(room: String, historyCount: Int, callback: Int?, since: Int64? = nil, receipts: Bool = false, unread: Bool = false)
    case unsubscribe(room: String, callback: Int?)
    case publish(room: String, message: JSONValue, callback: Int?, messageID: String? = nil)
    /// Parley's extension: a page of stored history, `before` an offset (newest when nil).
    case history(room: String, before: Int64?, limit: Int, callback: Int?)
    /// Parley's message actions: `reply` (or a `publish` with `reply_to`), `edit`, `delete`,
    /// `react`, `unreact`.
    case act(room: String, MessageActionRequest, callback: Int?)
    /// Parley's users: the room is read up to `offset`.
    case read(room: String, offset: Int64, callback: Int?)
    /// Parley's users: the direct room of the user and `users`.
    case dm(users: [String], callback: Int?)
    /// Parley's users: a page of the user's conversations; `watch` starts (or with false
    /// stops) live `conversation` updates.
    case inbox(limit: Int, watch: Bool?, callback: Int?)
    /// Parley's users: the room's members folded into their users.
    case roomUsers(room: String, callback: Int?)
    /// Push: this user's device (docs/push.md); `channel`, `user` and the time are filled in later.
    case registerDevice(PushDeviceRequest, callback: Int?)
    case unregisterDevice(platform: PushDevice.Platform, token: String, callback: Int?)
    /// Push: mute `room` (nil: every room) until a time (Unix seconds; 0 lifts it).
    case mute(room: String?, untilSeconds: Int64, callback: Int?)

    /// Longest accepted `message_id`, in bytes.
    static let maxMessageIDLength = 128
    /// `limit` of a `history` request when none is given.
    static let defaultHistoryLimit = 100

    /// Why a frame was refused: the error reply's text, the callback to echo when one could be
    /// read, and whether it was a handshake (whose reply must carry a `client_id`).
    struct Failure: Error, Equatable, Sendable {
        let callback: Int?
        let isHandshake: Bool
        let message: String
    }

    var callback: Int? {
        switch self {
        case .handshake(_, _, let callback, _, _), .authenticate(_, let callback), .subscribe(_, _, let callback, _, _, _),
             .unsubscribe(_, let callback), .publish(_, _, let callback, _), .history(_, _, _, let callback),
             .act(_, _, let callback), .read(_, _, let callback), .dm(_, let callback), .inbox(_, _, let callback),
             .roomUsers(_, let callback), .registerDevice(_, let callback), .unregisterDevice(_, _, let callback),
             .mute(_, _, let callback):
            callback
        }
    }

    /// Parses one frame's payload. Never throws: every problem becomes a ``Failure`` so the
    /// session can answer it and keep the connection.
    static func parse(_ bytes: [UInt8]) -> Result<NativeCommand, Failure> {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            return .failure(Failure(callback: nil, isHandshake: false, message: "invalid JSON: \(error.description)"))
        }
        guard case .object(let object) = value else {
            return .failure(Failure(callback: nil, isHandshake: false, message: "expected a JSON object"))
        }
        let fields = JSONValue.object(object)
        var callback: Int?
        if let raw = fields[Field.callback], !raw.isNull {
            guard let number = raw.intValue else {
                return .failure(Failure(callback: nil, isHandshake: false, message: "callback must be an integer"))
            }
            callback = number
        }
        guard let type = fields[Field.type]?.stringValue else {
            return .failure(Failure(callback: callback, isHandshake: false, message: "missing or non-string type"))
        }
        func fail(_ message: String) -> Result<NativeCommand, Failure> {
            .failure(Failure(callback: callback, isHandshake: type == MessageType.handshake, message: message))
        }
        func room() -> Result<String, Failure> {
            guard let raw = fields[Field.room] else {
                return .failure(Failure(callback: callback, isHandshake: false, message: "missing room"))
            }
            guard let name = raw.stringValue else {
                return .failure(Failure(callback: callback, isHandshake: false, message: "room must be a string"))
            }
            guard RoomKey.isValidName(name) else {
                return .failure(Failure(callback: callback, isHandshake: false,
                                        message: "invalid room name (1-\(RoomKey.maxNameLength) bytes, no '/' or control characters)"))
            }
            return .success(name)
        }
        switch type {
        case MessageType.handshake:
            guard let raw = fields[Field.channel] else { return fail("missing channel") }
            guard let channel = raw.stringValue else { return fail("channel must be a string") }
            guard RoomKey.isValidName(channel) else { return fail("invalid channel name") }
            var clientData = fields[Field.clientData]
            if clientData?.isNull == true { clientData = nil }
            var user: String?
            if let raw = fields[Field.userID], !raw.isNull {
                guard let id = raw.stringValue else { return fail("user_id must be a string") }
                user = id
            }
            var shares = true
            if let raw = fields[Field.shareReceipts], !raw.isNull {
                guard let flag = raw.boolValue else { return fail("share_receipts must be true or false") }
                shares = flag
            }
            return .success(.handshake(channel: channel, clientData: clientData, callback: callback, user: user, sharesReceipts: shares))
        case MessageType.authenticate:
            guard let token = fields[Field.token]?.stringValue else { return fail("missing or non-string token") }
            return .success(.authenticate(token: token, callback: callback))
        case MessageType.subscribe:
            let name: String
            switch room() {
            case .success(let value): name = value
            case .failure(let failure): return .failure(failure)
            }
            var count = 0
            for key in [Field.historyCount, Field.history] {
                guard let raw = fields[key], !raw.isNull else { continue }
                guard let n = raw.intValue, n >= 0 else { return fail("\(key) must be a non-negative integer") }
                count = max(count, n)
            }
            var since: Int64?
            if let raw = fields[Field.since], !raw.isNull {
                guard let n = raw.intValue, n >= 0 else { return fail("since must be a non-negative integer (an offset)") }
                since = Int64(n)
            }
            var flags = (receipts: false, unread: false)
            for (key, path) in [(Field.receipts, \(receipts: Bool, unread: Bool).receipts), (Field.unread, \.unread)] {
                guard let raw = fields[key], !raw.isNull else { continue }
                guard let flag = raw.boolValue else { return fail("\(key) must be true or false") }
                flags[keyPath: path] = flag
            }
            return .success(.subscribe(room: name, historyCount: count, callback: callback, since: since,
                                       receipts: flags.receipts, unread: flags.unread))
        case MessageType.unsubscribe:
            switch room() {
            case .success(let name): return .success(.unsubscribe(room: name, callback: callback))
            case .failure(let failure): return .failure(failure)
            }
        case MessageType.publish, MessageType.reply:
            let name: String
            switch room() {
            case .success(let value): name = value
            case .failure(let failure): return .failure(failure)
            }
            guard let message = fields[Field.message] else { return fail("missing message") }
            var messageID: String?
            if let raw = fields[Field.messageID], !raw.isNull {
                guard let id = raw.stringValue, !id.isEmpty, id.utf8.count <= maxMessageIDLength else {
                    return fail("message_id must be a string of 1-\(maxMessageIDLength) bytes")
                }
                messageID = id
            }
            if let raw = fields[Field.replyTo], !raw.isNull || type == MessageType.reply {
                guard let target = raw.stringValue else { return fail("reply_to must be a string (a message id)") }
                return .success(.act(room: name, .reply(to: target, body: message, messageID: messageID), callback: callback))
            }
            if type == MessageType.reply { return fail("missing reply_to") }
            return .success(.publish(room: name, message: message, callback: callback, messageID: messageID))
        case MessageType.edit, MessageType.delete, MessageType.react, MessageType.unreact:
            let name: String
            switch room() {
            case .success(let value): name = value
            case .failure(let failure): return .failure(failure)
            }
            guard let target = fields[Field.target]?.stringValue else { return fail("missing or non-string target (a message id)") }
            let request: MessageActionRequest
            switch type {
            case MessageType.edit:
                guard let message = fields[Field.message] else { return fail("missing message") }
                request = .edit(target, body: message)
            case MessageType.delete:
                request = .delete(target)
            default:
                guard let emoji = fields[Field.emoji]?.stringValue else { return fail("missing or non-string emoji") }
                request = type == MessageType.react ? .react(target, emoji: emoji) : .unreact(target, emoji: emoji)
            }
            return .success(.act(room: name, request, callback: callback))
        case MessageType.history:
            let name: String
            switch room() {
            case .success(let value): name = value
            case .failure(let failure): return .failure(failure)
            }
            var before: Int64?
            if let raw = fields[Field.before], !raw.isNull {
                guard let n = raw.intValue, n >= 0 else { return fail("before must be a non-negative integer (an offset)") }
                before = Int64(n)
            }
            var limit = defaultHistoryLimit
            if let raw = fields[Field.limit], !raw.isNull {
                guard let n = raw.intValue, n >= 0 else { return fail("limit must be a non-negative integer") }
                limit = n
            }
            return .success(.history(room: name, before: before, limit: limit, callback: callback))
        case MessageType.read:
            let name: String
            switch room() {
            case .success(let value): name = value
            case .failure(let failure): return .failure(failure)
            }
            guard let n = fields[Field.offset]?.intValue, n >= 0 else { return fail("offset must be a non-negative integer") }
            return .success(.read(room: name, offset: Int64(n), callback: callback))
        case MessageType.registerDevice, MessageType.unregisterDevice:
            switch PushDeviceRequest.parse(fields) {
            case .failure(let problem): return fail(problem.message)
            case .success(let request):
                if type == MessageType.unregisterDevice {
                    return .success(.unregisterDevice(platform: request.platform, token: request.token, callback: callback))
                }
                return .success(.registerDevice(request, callback: callback))
            }
        case MessageType.mute:
            var room: String?
            if let raw = fields[Field.room], !raw.isNull {
                guard let name = raw.stringValue, RoomKey.isValidName(name) else { return fail("room must be a room name (or absent: every room)") }
                room = name
            }
            guard let until = fields[Field.until]?.intValue, until >= 0 else { return fail("until must be Unix seconds (0 lifts the mute)") }
            return .success(.mute(room: room, untilSeconds: Int64(until), callback: callback))
        case MessageType.roomUsers:
            switch room() {
            case .success(let name): return .success(.roomUsers(room: name, callback: callback))
            case .failure(let failure): return .failure(failure)
            }
        case MessageType.dm:
            guard let list = fields[Field.users]?.arrayValue else { return fail("users must be an array of user ids") }
            guard !list.isEmpty, list.count < DirectRoom.maxUsers else {
                return fail("users must name 1-\(DirectRoom.maxUsers - 1) other users")
            }
            var users: [String] = []
            for item in list {
                guard let id = item.stringValue else { return fail("users must be an array of user ids") }
                users.append(id)
            }
            return .success(.dm(users: users, callback: callback))
        case MessageType.inbox:
            var limit = 20
            if let raw = fields[Field.limit], !raw.isNull {
                guard let n = raw.intValue, n >= 0 else { return fail("limit must be a non-negative integer") }
                limit = n
            }
            var watch: Bool?
            if let raw = fields[Field.watch], !raw.isNull {
                guard let flag = raw.boolValue else { return fail("watch must be true or false") }
                watch = flag
            }
            return .success(.inbox(limit: limit, watch: watch, callback: callback))
        default:
            return fail("unknown type \"\(type.prefix(40))\"")
        }
    }
}
