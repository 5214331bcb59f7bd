import Foundation
import ParleyCore

private typealias Field = NativeProtocol.Field
private typealias MessageType = NativeProtocol.MessageType

/// A client of Parley's native protocol (Scaledrone API v3 plus Parley's durability extensions).
///
/// ```swift
/// let client = ParleyClient(url: URL(string: "ws://127.0.0.1:8080/v3/websocket")!, channel: "demo",
///                           clientData: ["name": "alice", "color": "#FF8800"])
/// try await client.connect()
/// let room = try await client.subscribe("observable-room", historyCount: 20)
/// Task { for await event in room.events { print(event) } }
/// let ack = try await room.publish(text: "hello")   // ack.id, ack.offset
/// ```
///
/// After a dropped connection the client reconnects with jittered exponential backoff
/// (``ReconnectPolicy``), handshakes again, re-subscribes every room asking for what it
/// missed (`since` = the last offset seen, plus `history_count` for servers without `since`),
/// drops anything it has already delivered (by offset), and re-sends unacknowledged publishes
/// with the same `message_id`. It does not reconnect after a rejection: an error reply to the
/// handshake or the token, or a 1008 / 4000–4999 close.
public actor ParleyClient {
    /// The server's native door, e.g. `ws://127.0.0.1:8080/v3/websocket`.
    public nonisolated let url: URL
    /// The channel (tenant) to join.
    public nonisolated let channel: String
    /// Sent with the handshake; other members see it (`{name, color}` by convention).
    public nonisolated let clientData: JSONValue?
    /// The reconnect policy.
    public nonisolated let reconnectPolicy: ReconnectPolicy
    /// How many stored messages a re-subscribe asks for when the server ignores `since`.
    public nonisolated let resumeHistoryCount: Int
    private let token: String?
    /// Uploads files over HTTP to the same host and port (``upload(_:name:mime:room:progress:)``).
    public nonisolated let uploader: FileUploader
    private let transport: any ParleyTransport
    private let requestTimeout: Duration
    /// How long a publish waits for its receipt in all (reconnects included) by default.
    public let publishTimeout: Duration

    /// The connection state now.
    public private(set) var state: ConnectionState = .disconnected(.notStarted)
    /// This connection's id on the server (changes on every reconnect).
    public private(set) var clientID: String?
    /// The user id asked for at handshake (open channels; a token's `user` claim wins).
    public nonisolated let requestedUserID: String?
    /// Whether this user's read receipts are shown to others.
    public nonisolated let sharesReceipts: Bool
    /// The user the server says this connection belongs to (nil: the connection is its own).
    public private(set) var userID: String?
    /// The server's VAPID public key (base64url), when it sends Web Push: what a browser's
    /// `pushManager.subscribe` takes as `applicationServerKey`.
    public private(set) var vapidPublicKey: String?
    /// Live inbox updates, once ``watchInbox(limit:)`` was called.
    private var inboxWatch: (limit: Int, continuation: AsyncStream<ChatConversation>.Continuation)?
    /// Every id this client has had, so its own messages stay "mine" across reconnects.
    private var ownIDs: Set<String> = []

    private var connection: (any ParleyTransportConnection)?
    private var generation = 0
    private var nextCallback = 1
    private var pending: [Int: CheckedContinuation<Result<JSONValue, ParleyClientError>, Never>] = [:]
    private var rooms: [String: RoomRecord] = [:]
    private var outbox: [PendingPublish] = []
    private var stateObservers: [UUID: AsyncStream<ConnectionState>.Continuation] = [:]
    private var stopped = true
    private var reconnecting: Task<Void, Never>?

    /// Creates a client; nothing happens until ``connect()``.
    /// - Parameters:
    ///   - url: the native door, `ws://HOST:PORT/v3/websocket`.
    ///   - channel: the channel id.
    ///   - clientData: any JSON the other members see (e.g. `["name": "alice", "color": "#FF0000"]`).
    ///   - token: a JWT for channels with authentication (sent with `authenticate`).
    ///   - transport: how to reach the server; the platform's default when nil.
    ///   - reconnectPolicy: backoff and attempt limit.
    ///   - resumeHistoryCount: how far back a re-subscribe looks when the server lacks `since`.
    ///   - requestTimeout: how long a request (subscribe, history) waits for its reply.
    ///   - publishTimeout: how long a publish waits for its receipt in all, reconnects
    ///     included, unless ``publish(_:to:timeout:)`` is given its own.
    ///   - uploader: how files are uploaded (e.g. which certificates to trust for https).
    ///   - userID: the user this client is (docs/protocols.md, "Users"): in an open channel the
    ///     server takes it as given (it proves nothing); with a token, its `user` claim decides.
    ///   - sharesReceipts: false keeps this user's read receipts private.
    public init(url: URL, channel: String, clientData: JSONValue? = nil, token: String? = nil,
                transport: (any ParleyTransport)? = nil, reconnectPolicy: ReconnectPolicy = ReconnectPolicy(),
                resumeHistoryCount: Int = 100, requestTimeout: Duration = .seconds(10),
                publishTimeout: Duration = .seconds(30), uploader: FileUploader = FileUploader(),
                userID: String? = nil, sharesReceipts: Bool = true) {
        self.requestedUserID = userID
        self.sharesReceipts = sharesReceipts
        self.url = url
        self.channel = channel
        self.clientData = clientData
        self.token = token
        self.transport = transport ?? DefaultTransport()
        self.reconnectPolicy = reconnectPolicy
        self.resumeHistoryCount = resumeHistoryCount
        self.requestTimeout = requestTimeout
        self.publishTimeout = publishTimeout
        self.uploader = uploader
    }

    // MARK: connection

    /// Connects and handshakes (and authenticates when a token was given). Throws when the
    /// first attempt fails; after that, drops are repaired by reconnecting.
    public func connect() async throws(ParleyClientError) {
        switch state {
        case .connected, .connecting, .reconnecting: return
        case .disconnected: break
        }
        stopped = false
        setState(.connecting)
        do {
            if try await !establish() { startReconnecting() }
        } catch {
            if !stopped {
                stopped = true
                setState(.disconnected(error.code == .rejected ? .rejected(error.message) : .failed(error.message)))
                failEverything(error)
            }
            throw error
        }
    }

    /// Closes the connection for good: no reconnect; pending publishes fail with
    /// ``ParleyClientError/Code/notConnected``; room event streams finish.
    public func disconnect() async {
        guard !stopped else { return }
        stopped = true
        reconnecting?.cancel()
        reconnecting = nil
        connection?.close(code: 1000, reason: "bye")
        connection = nil
        generation += 1
        setState(.disconnected(.closedByClient))
        failEverything(ParleyClientError(.notConnected, "the client disconnected"))
    }

    /// A stream of connection states, starting with the current one. Each call makes a new
    /// stream; it finishes when the caller stops iterating.
    public func stateUpdates() -> AsyncStream<ConnectionState> {
        let (stream, continuation) = AsyncStream.makeStream(of: ConnectionState.self, bufferingPolicy: .bufferingNewest(64))
        let id = UUID()
        stateObservers[id] = continuation
        continuation.yield(state)
        continuation.onTermination = { _ in Task { await self.removeObserver(id) } }
        return stream
    }

    private func removeObserver(_ id: UUID) { stateObservers[id] = nil }

    private func setState(_ new: ConnectionState) {
        guard new != state else { return }
        state = new
        for observer in stateObservers.values { observer.yield(new) }
    }

    /// One connection attempt: open, handshake, authenticate, re-subscribe, re-send. Returns
    /// false when the connection was lost right after a successful handshake (the server may
    /// close at any moment): the caller then keeps reconnecting.
    private func establish() async throws(ParleyClientError) -> Bool {
        let endpoint = try ParleyEndpoint(url: url)
        generation += 1
        let current = generation
        let (events, sink) = AsyncStream.makeStream(of: TransportEvent.self)
        let opened = try await transport.open(endpoint) { event in
            sink.yield(event)
            if case .closed = event { sink.finish() }
        }
        guard !stopped, current == generation else {
            opened.close(code: 1000, reason: "bye")
            throw ParleyClientError(.notConnected, "the client disconnected")
        }
        connection = opened
        Task { [weak self] in
            for await event in events {
                guard let self else { return }
                await self.handle(event, generation: current)
            }
        }
        var handshake: JSONObject = [Field.type: .string(MessageType.handshake), Field.channel: .string(channel)]
        if let clientData { handshake.append(key: Field.clientData, value: clientData) }
        if let requestedUserID { handshake.append(key: Field.userID, value: .string(requestedUserID)) }
        if !sharesReceipts { handshake.append(key: Field.shareReceipts, value: false) }
        let reply = try await request(handshake)
        if let error = reply[Field.error]?.stringValue {
            opened.close(code: 1000, reason: "rejected")
            throw ParleyClientError(.rejected, "handshake refused: \(error)")
        }
        guard let id = reply[Field.clientID]?.stringValue else {
            throw ParleyClientError(.protocolViolation, "handshake reply without client_id")
        }
        clientID = id
        ownIDs.insert(id)
        userID = reply[Field.userID]?.stringValue
        vapidPublicKey = reply[Field.vapidPublicKey]?.stringValue
        if let token {
            let answer = try await request([Field.type: .string(MessageType.authenticate), Field.token: .string(token)])
            if let error = answer[Field.error]?.stringValue {
                opened.close(code: 1000, reason: "rejected")
                throw ParleyClientError(.rejected, "token refused: \(error)")
            }
        } else if reply[Field.requireAuth]?.boolValue == true {
            opened.close(code: 1000, reason: "rejected")
            throw ParleyClientError(.rejected, "channel \(channel) requires a token")
        }
        for name in rooms.keys.sorted() {
            guard let record = rooms[name] else { continue }
            let answer = try await request(subscribeCommand(record))
            if answer[Field.error] != nil {
                // The server no longer lets us in (e.g. a permission changed): end that room's
                // stream rather than the whole session.
                rooms[name]?.finish()
                rooms[name] = nil
            }
        }
        if let watch = inboxWatch {
            // A new connection follows the inbox again, and what changed meanwhile arrives.
            let page = try await request(inboxCommand(limit: watch.limit, watch: true))
            for conversation in conversations(page) { watch.continuation.yield(conversation) }
        }
        guard current == generation, !stopped else { return false }
        setState(.connected)
        for index in outbox.indices { sendPublish(at: index) }
        return true
    }

    private func startReconnecting() {
        guard reconnecting == nil, !stopped else { return }
        reconnecting = Task { await self.reconnectLoop() }
    }

    private func subscribeCommand(_ record: RoomRecord) -> JSONObject {
        var command: JSONObject = [Field.type: .string(MessageType.subscribe), Field.room: .string(record.name)]
        if record.lastOffset > 0 {
            command.append(key: Field.since, value: .number(JSONNumber(record.lastOffset)))
            command.append(key: Field.historyCount, value: .number(JSONNumber(resumeHistoryCount)))
        } else {
            command.append(key: Field.historyCount, value: .number(JSONNumber(record.historyCount)))
        }
        if record.receipts { command.append(key: Field.receipts, value: true) }
        if record.unread { command.append(key: Field.unread, value: true) }
        return command
    }

    /// The transport reported something on connection `generation`.
    private func handle(_ event: TransportEvent, generation: Int) {
        guard generation == self.generation else { return }
        switch event {
        case .text(let text):
            guard case .object(let object) = try? JSONParser.parse(text) else { return }
            let value = JSONValue.object(object)
            if let callback = value[Field.callback]?.intValue {
                resolve(callback, value)
            } else {
                dispatchPush(value)
            }
        case .closed(let code, let reason):
            connectionLost(code: code, reason: reason)
        }
    }

    private func connectionLost(code: UInt16, reason: String) {
        connection = nil
        generation += 1
        let lost = ParleyClientError(.connectionLost, "connection closed (\(code)\(reason.isEmpty ? "" : ": \(reason)"))")
        let waiting = pending
        pending = [:]
        for (_, continuation) in waiting { continuation.resume(returning: .failure(lost)) }
        for index in outbox.indices { outbox[index].callback = nil }
        for name in rooms.keys { rooms[name]?.connectionLost() }
        guard !stopped else { return }
        if ReconnectPolicy.isFatal(closeCode: code) {
            stopped = true
            setState(.disconnected(.rejected("closed by the server (\(code)\(reason.isEmpty ? "" : ": \(reason)"))")))
            failEverything(ParleyClientError(.rejected, "closed by the server with \(code) \(reason)"))
            return
        }
        // During connect() or a reconnect attempt, that attempt sees the failure and decides.
        guard state == .connected else { return }
        startReconnecting()
    }

    private func reconnectLoop() async {
        var attempt = 0
        while !stopped {
            attempt += 1
            if let limit = reconnectPolicy.maxAttempts, attempt > limit {
                stopped = true
                setState(.disconnected(.failed("gave up after \(limit) attempts")))
                failEverything(ParleyClientError(.connectionLost, "gave up reconnecting"))
                break
            }
            setState(.reconnecting(attempt: attempt))
            try? await Task.sleep(for: reconnectPolicy.delay(forAttempt: attempt))
            if stopped || Task.isCancelled { break }
            do {
                if try await establish() { break }
            } catch {
                if stopped { break }
                if error.isFatal {
                    stopped = true
                    connection?.close(code: 1000, reason: "bye")
                    connection = nil
                    setState(.disconnected(.rejected(error.message)))
                    failEverything(error)
                    break
                }
                connection?.close(code: 1000, reason: "retry")
                connection = nil
                generation += 1
            }
        }
        reconnecting = nil
    }

    private func failEverything(_ error: ParleyClientError) {
        let waiting = pending
        pending = [:]
        for (_, continuation) in waiting { continuation.resume(returning: .failure(error)) }
        let publishes = outbox
        outbox = []
        for entry in publishes { entry.continuation.resume(returning: .failure(error)) }
        for record in rooms.values { record.finish() }
        rooms = [:]
    }

    // MARK: requests

    /// Sends `command` with a fresh callback and waits for the reply (or a timeout / drop).
    /// One request and its reply, for the SDK's other files (push).
    func send(_ command: JSONObject) async throws(ParleyClientError) -> JSONValue { try await request(command) }

    private func request(_ command: JSONObject) async throws(ParleyClientError) -> JSONValue {
        guard let connection else { throw ParleyClientError(.notConnected, "not connected") }
        let callback = nextCallback
        nextCallback += 1
        var command = command
        command.append(key: Field.callback, value: .number(JSONNumber(callback)))
        let timeout = requestTimeout
        let result = await withCheckedContinuation { continuation in
            pending[callback] = continuation
            connection.send(JSONValue.object(command).jsonString)
            Task { [weak self] in
                try? await Task.sleep(for: timeout)
                await self?.resolve(callback, nil)
            }
        }
        return try result.get()
    }

    /// Delivers a reply (nil: the request timed out).
    private func resolve(_ callback: Int, _ reply: JSONValue?) {
        if let continuation = pending.removeValue(forKey: callback) {
            if let reply {
                continuation.resume(returning: .success(reply))
            } else {
                continuation.resume(returning: .failure(ParleyClientError(.timeout, "no reply from the server in time")))
            }
            return
        }
        guard let reply, let index = outbox.firstIndex(where: { $0.callback == callback }) else { return }
        let entry = outbox.remove(at: index)
        if let error = reply[Field.error]?.stringValue {
            entry.continuation.resume(returning: .failure(ParleyClientError(.server, error, serverCode: reply[Field.code]?.stringValue)))
        } else {
            let ack = PublishAck(id: reply[Field.id]?.stringValue ?? "", offset: reply[Field.offset]?.intValue ?? 0,
                                 messageID: entry.messageID)
            entry.continuation.resume(returning: .success(ack))
        }
    }

    // MARK: rooms

    /// Subscribes to `room`; the returned ``Room`` streams its events. `historyCount` stored
    /// messages arrive first as ``RoomEvent/history(_:)``. Subscribing twice returns the same room.
    ///
    /// With `receipts` the room's read receipts arrive (``RoomEvent/receipts(_:)`` then
    /// ``RoomEvent/read(_:)``); with `unread` this user's unread count (``RoomEvent/unread(_:)``).
    public func subscribe(_ room: String, historyCount: Int = 0, receipts: Bool = false,
                          unread: Bool = false) async throws(ParleyClientError) -> Room {
        if let existing = rooms[room] { return existing.handle }
        guard !stopped else { throw ParleyClientError(.notConnected, "call connect() first") }
        let (events, continuation) = AsyncStream.makeStream(of: RoomEvent.self)
        let handle = Room(name: room, events: events, client: self)
        let record = RoomRecord(name: room, historyCount: historyCount, handle: handle, continuation: continuation)
        record.receipts = receipts
        record.unread = unread
        rooms[room] = record
        guard state == .connected else { return handle }   // subscribed on (re)connect
        let reply: JSONValue
        do {
            reply = try await request(subscribeCommand(record))
        } catch where error.code == .connectionLost {
            return handle                                  // the reconnect subscribes it
        } catch {
            rooms[room]?.finish()
            rooms[room] = nil
            throw error
        }
        if let error = reply[Field.error]?.stringValue {
            rooms[room]?.finish()
            rooms[room] = nil
            throw ParleyClientError(.server, error)
        }
        return handle
    }

    /// Leaves a room; its event stream finishes.
    public func unsubscribe(_ room: String) async {
        guard let record = rooms.removeValue(forKey: room) else { return }
        record.finish()
        connection?.send(JSONValue.object([Field.type: .string(MessageType.unsubscribe), Field.room: .string(room)]).jsonString)
    }

    /// The members of a subscribed observable room, as last reported.
    public func members(of room: String) -> [ChatMember] {
        rooms[room]?.members ?? []
    }

    /// The last offset delivered for a room (0 before any stored message).
    public func lastOffset(of room: String) -> Int {
        rooms[room]?.lastOffset ?? 0
    }

    private func dispatchPush(_ value: JSONValue) {
        if value[Field.type]?.stringValue == MessageType.conversation {
            if let conversation = value[Field.conversation].flatMap(makeConversation) { inboxWatch?.continuation.yield(conversation) }
            return
        }
        guard let type = value[Field.type]?.stringValue, let name = value[Field.room]?.stringValue,
              let record = rooms[name] else { return }
        switch type {
        case MessageType.receipts:
            record.yield(.receipts((value[Field.readers]?.arrayValue ?? []).compactMap(ReadReceiptInfo.init)))
        case MessageType.read:
            if let receipt = ReadReceiptInfo(value) { record.yield(.read(receipt)) }
        case MessageType.unread:
            record.yield(.unread(UnreadInfo(value)))
        case MessageType.publish, MessageType.historyMessage:
            guard let message = makeMessage(value, room: name, members: record.knownMembers) else { return }
            if case .object(let body) = message.body, body.count == 1, let typing = body["typing"]?.boolValue,
               message.offset == nil {
                record.typing(message.clientID, typing, sender: message.sender)
                return
            }
            record.deliver(message, asHistory: type == MessageType.historyMessage && !record.hasBaseline,
                           fromSnapshot: type == MessageType.historyMessage)
        case MessageType.observableMembers:
            let members = (value[Field.data]?.arrayValue ?? []).compactMap(makeMember)
            record.setMembers(members)
        case MessageType.observableMemberJoin:
            if let member = value[Field.data].flatMap(makeMember) { record.joined(member) }
        case MessageType.observableMemberLeave:
            if let member = value[Field.data].flatMap(makeMember) { record.left(member) }
        case MessageType.edit, MessageType.delete, MessageType.react, MessageType.unreact:
            guard let action = makeAction(value, type: type, members: record.knownMembers) else { return }
            record.deliver(action)
        case MessageType.messageDeleted:
            if let offset = value[Field.offset]?.intValue, offset > 0 { record.deleted(offset: offset) }
        case MessageType.roomClosed:
            // The server has already taken this client out of the room: forget it without an
            // unsubscribe, and do not subscribe it again on reconnect.
            rooms[name] = nil
            record.closed(reason: value[Field.reason]?.stringValue ?? "")
        default:
            break
        }
    }

    private func makeMember(_ value: JSONValue) -> ChatMember? {
        guard let id = value[Field.id]?.stringValue else { return nil }
        return ChatMember(id: id, clientData: value[Field.memberClientData], authData: value[Field.memberAuthData], isMe: ownIDs.contains(id))
    }

    func makeMessage(_ value: JSONValue, room: String, members: [String: ChatMember]) -> ChatMessage? {
        guard let id = value[Field.id]?.stringValue, let body = value[Field.message] else { return nil }
        let sender = value[Field.clientID]?.stringValue
        let reactions: [ChatReaction] = (value[Field.reactions]?.arrayValue ?? []).compactMap { reaction in
            guard let emoji = reaction[Field.emoji]?.stringValue, let count = reaction[Field.count]?.intValue, count > 0 else { return nil }
            let names = (reaction[Field.names]?.arrayValue ?? []).compactMap(\.stringValue)
            let mine = clientData?["name"]?.stringValue.map(names.contains) ?? false
            return ChatReaction(emoji: emoji, count: count, names: names, isMine: mine)
        }
        var message = ChatMessage(id: id, room: room, body: body, clientID: sender,
                                  sender: sender.flatMap { members[$0] }, offset: value[Field.offset]?.intValue,
                                  timestamp: Date(timeIntervalSince1970: Double(value[Field.timestamp]?.intValue ?? 0)),
                                  isMine: sender.map(ownIDs.contains) ?? false,
                                  isDeleted: value[Field.deleted]?.boolValue ?? false,
                                  replyTo: value[Field.replyTo]?.stringValue,
                                  editedAt: value[Field.edited]?.intValue.map { Date(timeIntervalSince1970: Double($0)) },
                                  reactions: reactions)
        message.user = value[Field.user]?.stringValue
        return message
    }

    func makeConversation(_ value: JSONValue) -> ChatConversation? {
        guard let room = value[Field.room]?.stringValue else { return nil }
        var last: ChatMessage?
        if let message = value[Field.last], !message.isNull {
            last = makeMessage(message, room: room, members: rooms[room]?.knownMembers ?? [:])
            // A message of this user from another device is theirs too.
            if let sent = last, !sent.isMine, let user = userID, sent.user == user {
                last = ChatMessage(id: sent.id, room: room, body: sent.body, clientID: sent.clientID, sender: sent.sender, offset: sent.offset,
                                   timestamp: sent.timestamp, isMine: true, isDeleted: sent.isDeleted, replyTo: sent.replyTo,
                                   editedAt: sent.editedAt, reactions: sent.reactions)
                last?.user = user
            }
        }
        return ChatConversation(room: room, users: value[Field.users]?.arrayValue?.compactMap(\.stringValue), unread: UnreadInfo(value),
                                activity: Date(timeIntervalSince1970: Double(value[Field.activity]?.intValue ?? 0)), last: last,
                                lastSenderName: value[Field.last]?[Field.name]?.stringValue)
    }

    private func conversations(_ reply: JSONValue) -> [ChatConversation] {
        (reply[Field.conversations]?.arrayValue ?? []).compactMap(makeConversation)
    }

    private func inboxCommand(limit: Int, watch: Bool?) -> JSONObject {
        var command: JSONObject = [Field.type: .string(MessageType.inbox), Field.limit: .number(JSONNumber(limit))]
        if let watch { command.append(key: Field.watch, value: .bool(watch)) }
        return command
    }

    // MARK: users

    /// Marks `room` read up to `offset` (a mark only moves forward; the server caps it at the
    /// room's newest message). Returns the mark as stored. Other members see it when they ask
    /// for receipts, unless this client keeps them private.
    @discardableResult
    public func markRead(_ room: String, upTo offset: Int) async throws(ParleyClientError) -> Int {
        let reply = try await request([Field.type: .string(MessageType.read), Field.room: .string(room),
                                       Field.offset: .number(JSONNumber(offset))])
        if let error = reply[Field.error]?.stringValue { throw ParleyClientError(.server, error) }
        return reply[Field.offset]?.intValue ?? 0
    }

    /// Opens the direct room of this user and `users` (made on first use by any of them) and
    /// returns its name; subscribe to it like any room. Only its users may use it.
    public func openDirectRoom(with users: [String]) async throws(ParleyClientError) -> String {
        let reply = try await request([Field.type: .string(MessageType.dm), Field.users: .array(users.map { .string($0) })])
        if let error = reply[Field.error]?.stringValue { throw ParleyClientError(.server, error) }
        guard let room = reply[Field.room]?.stringValue else { throw ParleyClientError(.protocolViolation, "dm reply without room") }
        return room
    }

    /// The users in `room` now (on every node): its members folded by user, each with how
    /// many of their devices are there, in the order each first joined.
    public func roomUsers(in room: String) async throws(ParleyClientError) -> [RoomUser] {
        let reply = try await request([Field.type: .string(MessageType.roomUsers), Field.room: .string(room)])
        if let error = reply[Field.error]?.stringValue { throw ParleyClientError(.server, error) }
        return (reply[Field.users]?.arrayValue ?? []).compactMap { value in
            guard let user = value[Field.user]?.stringValue else { return nil }
            return RoomUser(user: user, name: value[Field.name]?.stringValue ?? user, devices: value[Field.devices]?.intValue ?? 1)
        }
    }

    /// The newest `limit` conversations of this user (at most 50), newest activity first.
    public func inbox(limit: Int = 20) async throws(ParleyClientError) -> InboxPage {
        let reply = try await request(inboxCommand(limit: limit, watch: nil))
        if let error = reply[Field.error]?.stringValue { throw ParleyClientError(.server, error) }
        return InboxPage(conversations: conversations(reply), hasMore: reply[Field.hasMore]?.boolValue ?? false)
    }

    /// The inbox now, and a stream of every conversation that changes from then on (also
    /// after reconnects, which send the page again). One watch per client: a second call
    /// ends the first stream.
    public func watchInbox(limit: Int = 20) async throws(ParleyClientError) -> (page: InboxPage, updates: AsyncStream<ChatConversation>) {
        let (updates, continuation) = AsyncStream.makeStream(of: ChatConversation.self)
        inboxWatch?.continuation.finish()
        inboxWatch = (limit, continuation)
        let reply = try await request(inboxCommand(limit: limit, watch: true))
        if let error = reply[Field.error]?.stringValue {
            inboxWatch = nil
            continuation.finish()
            throw ParleyClientError(.server, error)
        }
        return (InboxPage(conversations: conversations(reply), hasMore: reply[Field.hasMore]?.boolValue ?? false), updates)
    }

    func makeAction(_ value: JSONValue, type: String, members: [String: ChatMember]) -> ChatAction? {
        guard let kind = ChatAction.Kind(rawValue: type), let id = value[Field.id]?.stringValue,
              let target = value[Field.target]?.stringValue else { return nil }
        let sender = value[Field.clientID]?.stringValue
        let body = kind == .edit && value[Field.deleted]?.boolValue != true ? value[Field.message] : nil
        return ChatAction(id: id, kind: kind, target: target, body: body, emoji: value[Field.emoji]?.stringValue,
                          clientID: sender, sender: sender.flatMap { members[$0] }, offset: value[Field.offset]?.intValue,
                          timestamp: Date(timeIntervalSince1970: Double(value[Field.timestamp]?.intValue ?? 0)),
                          isMine: sender.map(ownIDs.contains) ?? false)
    }

    // MARK: publishing

    /// Publishes `message` to `room` (no subscription needed) and returns the server's
    /// receipt, which the server sends once the message is stored. While disconnected the
    /// publish waits; it is re-sent after each reconnect with the same `message_id`, so a
    /// server with idempotency stores it once.
    ///
    /// It waits at most `timeout` (``publishTimeout`` by default) in all, then throws
    /// ``ParleyClientError/Code/timeout``; cancelling the calling task throws
    /// ``ParleyClientError/Code/cancelled`` at once. Either way the publish is no longer
    /// re-sent, but one already sent may still have been stored: publish it again with the
    /// same content if it must get through (a duplicate is possible then).
    @discardableResult
    public func publish(_ message: JSONValue, to room: String, timeout: Duration? = nil) async throws(ParleyClientError) -> PublishAck {
        try await publish(message, to: room, replyTo: nil, timeout: timeout)
    }

    /// Publishes `message` to `room` as a reply to the message `target` (its id): a publish
    /// with `reply_to`, acknowledged, queued and re-sent like ``publish(_:to:timeout:)``.
    /// A refusal (e.g. an unknown target) throws ``ParleyClientError/Code/server`` with the
    /// server's ``ParleyClientError/serverCode``.
    @discardableResult
    public func reply(to target: String, with message: JSONValue, in room: String,
                      timeout: Duration? = nil) async throws(ParleyClientError) -> PublishAck {
        try await publish(message, to: room, replyTo: target, timeout: timeout)
    }

    private func publish(_ message: JSONValue, to room: String, replyTo: String?, timeout: Duration?) async throws(ParleyClientError) -> PublishAck {
        guard !stopped else { throw ParleyClientError(.notConnected, "call connect() first") }
        guard !Task.isCancelled else { throw ParleyClientError(.cancelled, "the publishing task was cancelled") }
        rooms[room]?.stopOwnTyping(silently: true)
        let messageID = UUID().uuidString.lowercased()
        let limit = timeout ?? publishTimeout
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                outbox.append(PendingPublish(messageID: messageID, room: room, message: message, replyTo: replyTo, continuation: continuation))
                if state == .connected { sendPublish(at: outbox.count - 1) }
                Task { [weak self] in
                    try? await Task.sleep(for: limit)
                    await self?.abandonPublish(messageID, ParleyClientError(.timeout, "no receipt for the publish within \(limit)"))
                }
            }
        } onCancel: {
            Task { [weak self] in
                await self?.abandonPublish(messageID, ParleyClientError(.cancelled, "the publishing task was cancelled"))
            }
        }
        return try result.get()
    }

    /// Fails a publish still waiting for its receipt and stops re-sending it.
    private func abandonPublish(_ messageID: String, _ error: ParleyClientError) {
        guard let index = outbox.firstIndex(where: { $0.messageID == messageID }) else { return }
        outbox.remove(at: index).continuation.resume(returning: .failure(error))
    }

    private func sendPublish(at index: Int) {
        guard let connection else { return }
        let callback = nextCallback
        nextCallback += 1
        outbox[index].callback = callback
        let entry = outbox[index]
        var command: JSONObject = [Field.type: .string(MessageType.publish), Field.room: .string(entry.room), Field.message: entry.message,
                                   Field.messageID: .string(entry.messageID), Field.callback: .number(JSONNumber(callback))]
        if let replyTo = entry.replyTo { command.append(key: Field.replyTo, value: .string(replyTo)) }
        connection.send(JSONValue.object(command).jsonString)
    }

    /// Sends an ephemeral `{"typing": Bool}` (never stored, never queued).
    fileprivate func sendTyping(_ typing: Bool, in room: String) {
        guard state == .connected, let connection else { return }
        let command: JSONValue = [Field.type: .string(MessageType.publish), Field.room: .string(room), Field.message: ["typing": .bool(typing)]]
        connection.send(command.jsonString)
    }

    /// Says whether this client is typing in `room`, debounced: `true` goes out at most once
    /// per ``typingRefreshInterval`` (the server forgets a flag after 6 s), and stops by itself
    /// after ``typingIdleTimeout`` without another `true`, or when a message is published.
    public func setTyping(_ typing: Bool, in room: String) {
        guard let record = rooms[room] else { return }
        if typing {
            let now = ContinuousClock.now
            if record.ownTypingSentAt.map({ now - $0 >= Self.typingRefreshInterval }) ?? true {
                record.ownTypingSentAt = now
                sendTyping(true, in: room)
            }
            record.ownTypingStop?.cancel()
            record.ownTypingStop = Task { [weak self] in
                try? await Task.sleep(for: Self.typingIdleTimeout)
                guard !Task.isCancelled else { return }
                await self?.setTyping(false, in: room)
            }
        } else {
            record.stopOwnTyping(silently: false)
        }
    }

    /// How often a continuing `setTyping(true)` is re-sent.
    public static let typingRefreshInterval: Duration = .seconds(3)
    /// How long after the last `setTyping(true)` typing stops by itself.
    public static let typingIdleTimeout: Duration = .seconds(4)

    // MARK: message actions

    /// Replaces the body of this client's message `target` (its id) in `room` with `message`.
    /// Returns the edit's receipt once it is stored. Actions are not queued: while
    /// disconnected, or when the connection drops before the receipt, this throws
    /// (``ParleyClientError/Code/notConnected``, ``ParleyClientError/Code/connectionLost``)
    /// and the caller may try again (a lost receipt may mean the edit was stored). A refusal
    /// throws ``ParleyClientError/Code/server`` with the server's
    /// ``ParleyClientError/serverCode`` (`not_author`, `edit_window_closed`, …).
    @discardableResult
    public func edit(_ target: String, to message: JSONValue, in room: String) async throws(ParleyClientError) -> ActionAck {
        try await act(MessageType.edit, target: target, in: room, extra: [Field.message: message])
    }

    /// Deletes message `target` (this client's own, or any with a `moderate` token): it
    /// becomes a tombstone for everyone. Errors as ``edit(_:to:in:)``.
    @discardableResult
    public func delete(_ target: String, in room: String) async throws(ParleyClientError) -> ActionAck {
        try await act(MessageType.delete, target: target, in: room, extra: [:])
    }

    /// Adds the reaction `emoji` to message `target`. Errors as ``edit(_:to:in:)``
    /// (`already_reacted`, `too_many_reactions`, …).
    @discardableResult
    public func react(_ emoji: String, to target: String, in room: String) async throws(ParleyClientError) -> ActionAck {
        try await act(MessageType.react, target: target, in: room, extra: [Field.emoji: .string(emoji)])
    }

    /// Takes back this client's reaction `emoji` on message `target`. Errors as
    /// ``edit(_:to:in:)`` (`not_reacted`, …).
    @discardableResult
    public func unreact(_ emoji: String, from target: String, in room: String) async throws(ParleyClientError) -> ActionAck {
        try await act(MessageType.unreact, target: target, in: room, extra: [Field.emoji: .string(emoji)])
    }

    private func act(_ type: String, target: String, in room: String, extra: JSONObject) async throws(ParleyClientError) -> ActionAck {
        guard !stopped else { throw ParleyClientError(.notConnected, "call connect() first") }
        var command: JSONObject = [Field.type: .string(type), Field.room: .string(room), Field.target: .string(target)]
        for (key, value) in extra { command.append(key: key, value: value) }
        let reply = try await request(command)
        if let error = reply[Field.error]?.stringValue {
            throw ParleyClientError(error.hasPrefix("unknown type") ? .unsupported : .server, error,
                                    serverCode: reply[Field.code]?.stringValue)
        }
        guard let id = reply[Field.id]?.stringValue, let offset = reply[Field.offset]?.intValue else {
            throw ParleyClientError(.protocolViolation, "\(type) receipt without id and offset")
        }
        return ActionAck(id: id, offset: offset)
    }

    // MARK: files

    /// Uploads a file to this client's channel (`POST /{channel}/files` on the server's host
    /// and port, with this client's token) and returns the attachment to publish. `room` names
    /// the room it is for (a token must allow publishing there). No connection is needed.
    public nonisolated func upload(_ source: UploadSource, name: String, mime: String? = nil, room: String? = nil,
                                   progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }) async throws(ParleyClientError) -> Attachment {
        try await uploader.upload(source, name: name, mime: mime ?? MIMEType.guess(forName: name), channel: channel,
                                  room: room, serverURL: url, token: token, progress: progress)
    }

    // MARK: history

    /// A page of stored messages older than offset `before` (the newest when nil), oldest
    /// first. Needs a server with the `history` command; others answer
    /// ``ParleyClientError/Code/unsupported``.
    public func history(of room: String, before: Int? = nil, limit: Int = 50) async throws(ParleyClientError) -> HistoryPage {
        var command: JSONObject = [Field.type: .string(MessageType.history), Field.room: .string(room), Field.limit: .number(JSONNumber(limit))]
        if let before { command.append(key: Field.before, value: .number(JSONNumber(before))) }
        let reply = try await request(command)
        if let error = reply[Field.error]?.stringValue {
            throw ParleyClientError(error.hasPrefix("unknown type") ? .unsupported : .server, error)
        }
        let known = rooms[room]?.knownMembers ?? [:]
        let messages = (reply[Field.messages]?.arrayValue ?? []).compactMap { makeMessage($0, room: room, members: known) }
        return HistoryPage(messages: messages, hasMore: reply[Field.hasMore]?.boolValue ?? false)
    }
}

/// A publish waiting for its receipt; survives reconnects.
private struct PendingPublish {
    let messageID: String
    let room: String
    let message: JSONValue
    /// The message it answers (`reply_to`), if it is a reply.
    let replyTo: String?
    let continuation: CheckedContinuation<Result<PublishAck, ParleyClientError>, Never>
    /// The callback of the attempt on the current connection; nil while not sent.
    var callback: Int?
}

/// The client's bookkeeping for one subscribed room. Actor-isolated: only the owning
/// ``ParleyClient`` touches it.
private final class RoomRecord {
    let name: String
    let historyCount: Int
    let handle: Room
    /// Asked for the room's receipts and this user's unread count.
    var receipts = false
    var unread = false
    private let continuation: AsyncStream<RoomEvent>.Continuation
    /// Highest offset delivered; messages at or below it are duplicates.
    var lastOffset = 0
    /// Set once a connection has dropped: history frames of a re-subscribe are catch-up and
    /// count as new messages (those of the first subscribe are ``RoomEvent/history(_:)``).
    var hasBaseline = false
    var members: [ChatMember] = []
    /// Everyone ever seen here, so messages from people who left still have a name.
    var knownMembers: [String: ChatMember] = [:]
    var typists: [ChatMember] = []
    var ownTypingSentAt: ContinuousClock.Instant?
    var ownTypingStop: Task<Void, Never>?
    private var deliveredIDs: Set<String> = []
    /// Offsets a resume's snapshot showed ahead of ``lastOffset``: the replay after `since`
    /// brings them again, with the actions between them, which must not be skipped.
    private var seenAhead: Set<Int> = []

    init(name: String, historyCount: Int, handle: Room, continuation: AsyncStream<RoomEvent>.Continuation) {
        self.name = name
        self.historyCount = historyCount
        self.handle = handle
        self.continuation = continuation
    }

    func deliver(_ message: ChatMessage, asHistory: Bool, fromSnapshot: Bool = false) {
        if let offset = message.offset {
            guard offset > lastOffset else { return }
            if seenAhead.remove(offset) != nil {
                // The replay's copy of a message the snapshot showed: shown already.
                advance(to: offset)
                return
            }
            if fromSnapshot && hasBaseline {
                // A resume's snapshot comes before the replay (`since`), which holds the
                // actions up to this message: the resume point stays until the replay.
                seenAhead.insert(offset)
            } else {
                advance(to: offset)
            }
        } else {
            guard deliveredIDs.insert(message.id).inserted else { return }
        }
        if let sender = message.clientID, let index = typists.firstIndex(where: { $0.id == sender }) {
            typists.remove(at: index)
            continuation.yield(.typingChanged(typists))
        }
        continuation.yield(asHistory ? .history(message) : .message(message))
    }

    /// An action, deduplicated by offset like a message (it advances the resume point, so a
    /// reconnect does not replay it again).
    func deliver(_ action: ChatAction) {
        if let offset = action.offset {
            guard offset > lastOffset else { return }
            advance(to: offset)
        } else {
            guard deliveredIDs.insert(action.id).inserted else { return }
        }
        continuation.yield(.action(action))
    }

    private func advance(to offset: Int) {
        lastOffset = offset
        if !seenAhead.isEmpty { seenAhead = seenAhead.filter { $0 > offset } }
    }

    func setMembers(_ list: [ChatMember]) {
        members = list
        for member in list { knownMembers[member.id] = member }
        continuation.yield(.members(list))
    }

    func joined(_ member: ChatMember) {
        members.removeAll { $0.id == member.id }
        members.append(member)
        knownMembers[member.id] = member
        continuation.yield(.memberJoined(member))
    }

    func left(_ member: ChatMember) {
        members.removeAll { $0.id == member.id }
        if let index = typists.firstIndex(where: { $0.id == member.id }) {
            typists.remove(at: index)
            continuation.yield(.typingChanged(typists))
        }
        continuation.yield(.memberLeft(member))
    }

    /// A users event (receipts, unread), passed on as it came.
    func yield(_ event: RoomEvent) { continuation.yield(event) }

    func deleted(offset: Int) {
        continuation.yield(.messageDeleted(offset: offset))
    }

    func closed(reason: String) {
        continuation.yield(.roomClosed(reason: reason))
        finish()
    }

    func typing(_ clientID: String?, _ isTyping: Bool, sender: ChatMember?) {
        guard let clientID else { return }
        let member = sender ?? knownMembers[clientID] ?? ChatMember(id: clientID)
        if isTyping {
            guard !typists.contains(where: { $0.id == clientID }) else { return }
            typists.append(member)
        } else {
            guard let index = typists.firstIndex(where: { $0.id == clientID }) else { return }
            typists.remove(at: index)
        }
        continuation.yield(.typingChanged(typists))
    }

    func stopOwnTyping(silently: Bool) {
        ownTypingStop?.cancel()
        ownTypingStop = nil
        if ownTypingSentAt != nil, !silently {
            let room = name
            Task { [handle] in await handle.client.sendTyping(false, in: room) }
        }
        ownTypingSentAt = nil
    }

    func connectionLost() {
        hasBaseline = true
        if !typists.isEmpty {
            typists = []
            continuation.yield(.typingChanged([]))
        }
        ownTypingSentAt = nil
    }

    func finish() {
        ownTypingStop?.cancel()
        continuation.finish()
    }
}
