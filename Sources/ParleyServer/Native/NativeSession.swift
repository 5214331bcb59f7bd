import ParleyCore
import ParleyIO
import ParleyWebSocket

/// One Scaledrone v3 connection (docs/protocols.md, "Native") after the WebSocket upgrade.
///
/// A thin door: it parses commands, calls the hub, and writes replies; room events arrive
/// already encoded once per loop (``NativeEncoding``) and are written as shared bytes, or
/// compressed per connection when permessage-deflate was negotiated. The WebSocket itself
/// (control frames, ping, the closing handshake) is its ``WebSocketServerConnection``'s.
final class NativeSession: WebSocketServerDelegate, RoomSubscriber {
    /// The WebSocket this session speaks through; it holds the session until it closes.
    let webSocket: WebSocketServerConnection
    let connection: TCPConnection
    let context: DoorContext
    /// Attachments: a publish that names uploads is checked against them.
    let files: ServerFiles
    var sessionID: SessionID { connection.id }
    let wireFormat = WireFormat.native
    /// Sent in the handshake reply; the member id in every room.
    let clientID: String
    /// The chat rules: the channel, the token, the member, the rooms, bans, rates.
    let chat: ChatSession
    /// Rooms whose `read` events (`receipts`) or `unread` counts the client asked for.
    var roomOptions: [RoomKey: (receipts: Bool, unread: Bool)] = [:]
    /// The unread count of each room that has `unread`, kept live from the deliveries.
    var unreadCounts: [RoomKey: (readOffset: Int64, count: UnreadCount)] = [:]
    /// Messages delivered while a room's count is being read from the store: the count may
    /// not have seen them (at most ``NativeSession/maxUnreadPending`` kept).
    var unreadPending: [RoomKey: [Message]] = [:]
    static let maxUnreadPending = 1_000
    /// The rooms' unread counts read again after own receipts: one read at a time per room,
    /// at most one every 250 ms (a flood of receipts costs the store that much, no more).
    var unreadRecounts = RefreshPacer<RoomKey>(intervalMillis: NativeSession.usersRefreshMillis)
    static let usersRefreshMillis: Int64 = 250
    /// Whether any room asked for `unread` or `receipts` (checked on every delivery).
    var followsUsers = false
    /// The live inbox, once the client asked `inbox` with `watch`.
    var inboxWatch: InboxWatch?
    /// Closes the connection when the token expires (unless a fresher one came).
    private var expiryTimer: LoopTimer?
    /// Callbacks of subscribes waiting for their snapshot, per room, in order.
    private var pendingSubscribes: [RoomKey: [Int?]] = [:]
    /// The door policy's share of this connection: its place, idle watch and publish rate.
    private let sessionGuard: SessionGuard
    /// A publish with attachments is being checked against the upload registry (on a worker
    /// thread); later publishes wait here so they keep their order.
    private var resolvingAttachments = false
    private var heldPublishes: [HeldPublish] = []
    private struct HeldPublish {
        let room: String
        let message: JSONValue
        let callback: Int?
        let messageID: String?
    }
    /// Most publishes that may wait behind one being checked.
    static let maxHeldPublishes = 256
    /// A message action is being checked and stored; later ones wait here, so each is checked
    /// against the state the one before left (a react then an unreact of the same emoji).
    private var actionInFlight = false
    private var heldActions: [(request: MessageActionRequest, room: String, callback: Int?)] = []
    /// Most actions that may wait behind the one in flight.
    static let maxHeldActions = 256
    /// A command (not a publish or an action) up to this size is not charged to the
    /// address's publish byte budget; a bigger one, and anything that is no command, is.
    static let freeCommandBytes = 16 << 10
    /// The size of the message being handled (``chargeRefused()``).
    private var receivedBytes = 0
    /// This loop's count of native deliveries.
    private let delivered: MetricCounter

    /// A session on `webSocket`, which the caller then opens with it as delegate.
    init(webSocket: WebSocketServerConnection, context: DoorContext, files: ServerFiles, sessionGuard: SessionGuard) {
        self.webSocket = webSocket
        connection = webSocket.connection
        self.context = context
        self.files = files
        self.sessionGuard = sessionGuard
        clientID = NativeSession.makeClientID(connectionID: connection.id)
        delivered = context.loopMetrics(connection.loop).delivered.counter(.native)
        chat = ChatSession(door: .native, context: context, sessionGuard: sessionGuard, sessionID: connection.id,
                           inbox: context.inbox(connection.loop), clientIP: connection.clientIP, remote: connection.remoteAddress)
    }

    /// Random letters plus the connection id: unguessable enough for a public id, and unique
    /// within the process without coordination.
    static func makeClientID(connectionID: UInt64) -> String {
        // Ten base-62 digits of one 64-bit random number (62^10 < 2^64): one call for
        // randomness per connection, not one per character.
        var generator = SystemRandomNumberGenerator()
        var random = generator.next() as UInt64
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        for _ in 0..<10 {
            bytes.append(clientIDAlphabet[Int(random % 62)])
            random /= 62
        }
        var id = String(decoding: bytes, as: UTF8.self)
        id += String(connectionID, radix: 36)
        return id
    }

    private static let clientIDAlphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)

    func start() {
        // `unowned`: the idle watch and the expiry timer belong to the session and stop when
        // it closes (see `webSocketDidClose`), so they never fire after it is gone; a weak
        // reference would give every session a side table and make each retain in the
        // fan-out a slow one.
        // The upgrade was the HTTP handshake; the door's own comes next, within the same time:
        // a `handshake` (and an `authenticate` where the channel needs a token), as the line
        // door's `iam:` and Socket.IO's CONNECT. Frames that say nothing else do not extend it.
        let handshakeTimeout = sessionGuard.policy.handshakeTimeoutMillis
        // `unowned`, as the idle watch: the session's end stops the timer (`SessionGuard.end`).
        sessionGuard.expectHandshake { [unowned self] in
            guard self.connection.state == .open else { return }
            self.closeWith(.policyViolation, reason: "no handshake within \(DoorWording.seconds(handshakeTimeout)) s")
        }
        let idle = sessionGuard.policy.idleTimeoutMillis
        sessionGuard.watchIdle { [unowned self] in
            guard self.connection.state == .open else { return }
            self.closeWith(.goingAway, reason: "idle timeout (no message for \(DoorWording.seconds(idle)) s)")
        }
    }

    /// Sends a close frame, then waits for the client's (``WebSocketServerConnection/close(_:reason:waitForPeer:)``).
    private func closeWith(_ code: WebSocketCloseCode, reason: String) {
        webSocket.close(code, reason: reason)
    }

    // MARK: reading

    /// One text or binary message (the Scaledrone Swift SDK sends its JSON in binary
    /// frames). Its reply is written before anything a later frame in the same read causes.
    func webSocket(_ socket: WebSocketServerConnection, didReceive kind: WebSocketMessageKind, payload: UnsafeRawBufferPointer) {
        sessionGuard.heard()
        handle(Array(payload))
    }

    func webSocket(_ socket: WebSocketServerConnection, didFail code: WebSocketCloseCode) {
        if code == .messageTooBig { context.limits.breached(.messageSize) }
    }

    private func handle(_ payload: [UInt8]) {
        let parsed = NativeCommand.parse(payload)
        // Publishes and actions are charged when admitted; what is not a command, or is a big
        // one, here: a stream of junk (each frame up to a megabyte once inflated) is bounded by
        // the address's publish byte budget, and past it the connection goes. Small commands
        // (a handshake, a subscribe) are not charged, so an address in publish debt can still
        // connect and read.
        // A publish's or an action's body is charged when admitted; what its frame carries
        // beyond the body (fields nobody reads) is charged here like a big command.
        func beyondFree(_ bytes: Int) -> Int { bytes > Self.freeCommandBytes ? bytes : 0 }
        let charged: Int
        receivedBytes = payload.count
        switch parsed {
        case .success(.publish(_, let message, _, _)): charged = beyondFree(payload.count - message.approximateSize)
        case .success(.act(_, let request, _)): charged = beyondFree(payload.count - (request.body?.approximateSize ?? 0))
        case .success: charged = beyondFree(payload.count)
        case .failure: charged = payload.count
        }
        if charged > 0, let refusal = chat.chargeReceived(charged) {
            closeWith(.policyViolation, reason: refusal.message)
            return
        }
        switch parsed {
        case .failure(let failure):
            sendJSON(NativeEncoding.reply(callback: failure.callback, error: failure.message,
                                          clientID: failure.isHandshake ? clientID : nil))
        case .success(let command):
            handle(command)
        }
    }

    private func handle(_ command: NativeCommand) {
        if case .handshake(let channel, let clientData, let callback, let user, let shares) = command {
            handshake(channel, clientData: clientData, user: user, sharesReceipts: shares, callback: callback)
            return
        }
        guard let member = chat.member, let channel = chat.channel else {
            sendJSON(NativeEncoding.reply(callback: command.callback, error: "handshake first"))
            if case .publish = command { chargeRefused(nil) } else if case .act = command { chargeRefused(nil) }
            return
        }
        switch command {
        case .handshake:
            break
        case .authenticate(let token, let callback):
            authenticate(token, callback: callback)
        case .subscribe(let room, let historyCount, let callback, let since, let receipts, let unread):
            let key = RoomKey(channel: channel, room: room)
            pendingSubscribes[key, default: []].append(callback)
            if case .failure(let refusal) = chat.join(room, historyCount: historyCount, since: since) {
                pendingSubscribes[key]?.removeLast()
                if pendingSubscribes[key]?.isEmpty == true { pendingSubscribes[key] = nil }
                sendJSON(NativeEncoding.refusal(callback: callback, refusal))
                // Sustained abuse of the join rate: as with the message rate.
                if refusal.code == .rateAbuse { closeWith(.policyViolation, reason: "rate limit exceeded") }
            } else {
                setOptions(receipts: receipts, unread: unread, for: key)
            }
        case .unsubscribe(let room, let callback):
            let key = RoomKey(channel: channel, room: room)
            chat.leave(key)
            setOptions(receipts: false, unread: false, for: key)
            if let callback { sendJSON(NativeEncoding.reply(callback: callback)) }
        case .publish(let room, let message, let callback, let messageID):
            if let refusal = chat.admitPublish(to: room) {
                sendJSON(NativeEncoding.reply(callback: callback, error: refusal.message))
                // Sustained abuse: refusing each message costs more than the peer is worth.
                if refusal.closes { closeWith(.policyViolation, reason: "rate limit exceeded") } else { chargeRefused(refusal) }
                return
            }
            let publish = HeldPublish(room: room, message: message, callback: callback, messageID: messageID)
            guard !resolvingAttachments else {
                guard heldPublishes.count < Self.maxHeldPublishes else {
                    sendJSON(NativeEncoding.reply(callback: callback, error: "too many publishes waiting for attachments to be checked; slow down"))
                    return
                }
                heldPublishes.append(publish)
                return
            }
            startPublish(publish, channel: channel, member: member)
        case .act(let room, let request, let callback):
            act(request, in: room, callback: callback)
        case .read(let room, let offset, let callback):
            markRead(room, upTo: offset, callback: callback)
        case .dm(let users, let callback):
            openDirect(with: users, callback: callback)
        case .inbox(let limit, let watch, let callback):
            inbox(limit: limit, watch: watch, callback: callback)
        case .roomUsers(let room, let callback):
            roomUsers(room, callback: callback)
        case .registerDevice(let request, let callback):
            answerPush(callback) { chat.registerDevice(request, completion: $0) }
        case .unregisterDevice(let platform, let token, let callback):
            answerPush(callback) { chat.unregisterDevice(platform, token: token, completion: $0) }
        case .mute(let room, let until, let callback):
            answerPush(callback) { chat.mute(room, untilSeconds: until, completion: $0) }
        case .history(let room, let before, let limit, let callback):
            let me = LoopBound(self, on: connection.loop)
            // Each request reads a page (up to --history-page-bytes) from the store.
            // The page (up to a MiB) is encoded here, on the store thread that read it, so the
            // connection's loop and its other connections do not wait for it.
            let refusal = chat.history(of: room, before: before, limit: limit) { result in
                let reply = switch result {
                case .success(let page): NativeEncoding.historyPage(callback: callback, page)
                case .failure(let error): NativeEncoding.reply(callback: callback, error: error.message)
                }
                me.execute { $0.sendJSON(reply) }
            }
            if let refusal { sendJSON(NativeEncoding.reply(callback: callback, error: refusal.message)) }
        }
    }

    /// The Scaledrone handshake: the channel must be open, the client data acceptable and the
    /// client not banned; the reply says whether the channel needs a token.
    private func handshake(_ channel: String, clientData: JSONValue?, user: String?, sharesReceipts: Bool, callback: Int?) {
        guard chat.member == nil else {
            sendJSON(NativeEncoding.reply(callback: callback, error: "already handshaken", clientID: clientID))
            return
        }
        var refusal = chat.channelRefusal(channel)
        if let closed = refusal {
            context.logAuthFailure(door: .native, remote: connection.remoteAddress, channel: channel, reason: closed.message)
        } else if case .failure(let problem) = chat.identify(as: clientID, clientData: clientData, user: user) {
            refusal = problem
        } else {
            refusal = chat.enter(channel, as: clientID, name: clientData?["name"]?.stringValue, tokenNamesClient: true,
                                 control: SessionControl(self, on: connection.loop))
        }
        if let refusal {
            chat.end()
            sendJSON(NativeEncoding.reply(callback: callback, error: refusal.message, clientID: clientID))
            if refusal.code == .banned { closeWith(.policyViolation, reason: "banned") }
            return
        }
        chat.sharesReceipts = sharesReceipts
        let requiresAuth = chat.needsToken
        let userID = chat.member?.userID
        let vapid = context.push.service?.settings.vapid.map { Base64URL.encode($0.publicKey) }
        if !requiresAuth { sessionGuard.handshakeCompleted() }
        sendJSON(NativeEncoding.reply(callback: callback, clientID: clientID) { w in
            if requiresAuth { w.key(NativeProtocol.Field.requireAuth); w.writeBool(true) }
            if let userID { w.key(NativeProtocol.Field.userID); w.writeString(userID) }
            if let vapid { w.key(NativeProtocol.Field.vapidPublicKey); w.writeString(vapid) }
        })
    }

    // MARK: publishing

    /// Publishes now, or first fills in its attachments from the upload registry
    /// (Files/AttachmentPublish.swift): ids this channel never issued are refused.
    private func startPublish(_ publish: HeldPublish, channel: String, member: Member) {
        switch AttachmentBody.inspect(publish.message) {
        case .plain:
            self.publish(publish, body: publish.message, uploads: [], channel: channel, member: member)
        case .invalid(let error):
            sendJSON(NativeEncoding.reply(callback: publish.callback, error: error.message))
        case .references:
            resolvingAttachments = true
            let me = LoopBound(self, on: connection.loop)
            files.resolve(publish.message, channel: channel, rooms: [publish.room]) { result in
                me.execute { $0.resolved(publish, result, channel: channel, member: member) }
            }
        }
    }

    private func resolved(_ publish: HeldPublish, _ result: Result<ResolvedPublish, ParleyError>,
                          channel: String, member: Member) {
        resolvingAttachments = false
        guard connection.state == .open else { return }
        switch result {
        case .success(let resolved):
            self.publish(publish, body: resolved.body, uploads: resolved.ids, channel: channel, member: member)
        case .failure(let error):
            sendJSON(NativeEncoding.reply(callback: publish.callback, error: error.message))
        }
        while !resolvingAttachments, !heldPublishes.isEmpty, connection.state == .open {
            startPublish(heldPublishes.removeFirst(), channel: channel, member: chat.member ?? member)
        }
    }

    private func publish(_ publish: HeldPublish, body: JSONValue, uploads: [String], channel: String, member: Member) {
        let callback = publish.callback
        let files = self.files
        // The receipt (or, with no callback, only an error) is sent once the message is
        // durable: an acknowledged message is never lost.
        let me = LoopBound(self, on: connection.loop)
        let outcome = chat.publishAdmitted(body, to: publish.room, as: member, messageID: publish.messageID) { result in
            switch result {
            case .success(let published):
                files.noteReferences(uploads, in: published)
                guard let callback else { return }
                me.execute { session in
                    session.sendJSON(NativeEncoding.reply(callback: callback) { w in
                        w.key(NativeProtocol.Field.id); w.writeString(published.id)
                        w.key(NativeProtocol.Field.offset); w.writeInt(Int(published.offset))
                    })
                }
            case .failure(let error):
                me.execute { $0.sendJSON(NativeEncoding.reply(callback: callback, error: error.message)) }
            }
        }
        switch outcome {
        case .success(let backlog): sessionGuard.throttle(by: backlog, reading: connection)
        case .failure(let refusal): sendJSON(NativeEncoding.reply(callback: callback, error: refusal.message))
        }
    }

    /// A message action: refused at once (the reply says why, with its `code`), or answered
    /// as a publish is, `{callback, id, offset}`, once the store has it. One at a time, in
    /// the order sent.
    private func act(_ request: MessageActionRequest, in room: String, callback: Int?) {
        // Admitted when it arrives (rate, bytes, permission), not when its turn comes: what
        // waits has been paid for, so a burst of big edits cannot pile up unchecked.
        if let refusal = chat.admitAction(request, in: room) {
            refuseAction(refusal, callback: callback)
            if !refusal.closes { chargeRefused(refusal) }
            return
        }
        guard !actionInFlight else {
            guard heldActions.count < Self.maxHeldActions else {
                sendJSON(NativeEncoding.refusal(callback: callback, ChatRefusal(.rateLimited,
                    "too many message actions waiting (limit \(Self.maxHeldActions)); slow down")))
                return
            }
            heldActions.append((request, room, callback))
            return
        }
        perform(request, in: room, callback: callback)
    }

    private func perform(_ request: MessageActionRequest, in room: String, callback: Int?) {
        actionInFlight = true
        let me = LoopBound(self, on: connection.loop)
        let refusal = chat.performAction(request, in: room) { result in
            me.execute { session in
                defer { session.actionAnswered() }
                switch result {
                case .success(let stored):
                    guard let callback else { return }
                    session.sendJSON(NativeEncoding.reply(callback: callback) { w in
                        w.key(NativeProtocol.Field.id); w.writeString(stored.id)
                        w.key(NativeProtocol.Field.offset); w.writeInt(Int(stored.offset))
                    })
                case .failure(let refusal):
                    session.sendJSON(NativeEncoding.refusal(callback: callback, refusal))
                }
            }
        }
        guard let refusal else { return }
        refuseAction(refusal, callback: callback)
        actionAnswered()
    }

    /// A publish or an action refused before its own charge (no handshake, a room it may not
    /// use) is paid for like junk: refusing it cost the server its inflating and parsing. Not
    /// one refused by a rate (`rate_limited`): the message rate counts those, and closes on
    /// sustained abuse, and the byte budget has already refused it.
    private func chargeRefused(_ why: ChatRefusal?) {
        guard why?.code != .rateLimited, connection.state == .open, let refusal = chat.chargeReceived(receivedBytes) else { return }
        closeWith(.policyViolation, reason: refusal.message)
    }

    private func refuseAction(_ refusal: ChatRefusal, callback: Int?) {
        sendJSON(NativeEncoding.refusal(callback: callback, refusal))
        // Sustained abuse: refusing each message costs more than the peer is worth.
        if refusal.closes {
            heldActions.removeAll()
            closeWith(.policyViolation, reason: "rate limit exceeded")
        }
    }

    /// The action in flight was answered: the next waiting one goes.
    private func actionAnswered() {
        actionInFlight = false
        guard !heldActions.isEmpty, connection.state == .open else { return }
        let next = heldActions.removeFirst()
        perform(next.request, in: next.room, callback: next.callback)
    }

    // MARK: authentication

    /// Verifies the token for this connection's client id; the member then carries the
    /// token's `data` as `authData` in every room joined from now on.
    private func authenticate(_ token: String, callback: Int?) {
        if let refusal = chat.authenticate(token) {
            sendJSON(NativeEncoding.reply(callback: callback, error: refusal.message))
            return
        }
        sessionGuard.handshakeCompleted()
        guard let expires = chat.tokenExpiresMillis else { return }
        sendJSON(NativeEncoding.reply(callback: callback))
        // At expiry the connection is closed (1008 "token expired") unless a fresher token
        // came meanwhile: rooms already joined must not keep streaming on a dead token.
        let timer = expiryTimer ?? LoopTimer(loop: connection.loop)
        expiryTimer = timer
        let delay = max(0, expires - context.hub.clock.nowMillis())
        timer.start(after: UInt64(delay) + 1) { [unowned self] in self.tokenExpired() }
    }

    private func tokenExpired() {
        guard connection.state == .open, let expires = chat.tokenExpiresMillis else { return }
        let left = expires - context.hub.clock.nowMillis()
        if left > 0 {
            // Early: libuv times timers from the loop's cached clock, which can lag the wall
            // clock by however long the loop's turn took. Wait for the rest.
            expiryTimer?.start(after: UInt64(left) + 1) { [unowned self] in self.tokenExpired() }
            return
        }
        sendJSON(NativeEncoding.reply(callback: nil, error: "token expired: authenticate again with a fresh token"))
        closeWith(.policyViolation, reason: "token expired")
    }

    // MARK: writing

    /// One JSON text frame for this connection alone (compressed when negotiated).
    /// Sends JSONWriter output: valid UTF-8 by construction (its strings are Swift strings),
    /// so it goes as it is, without a copy into a String and a second validation.
    func sendJSON(_ json: [UInt8]) {
        webSocket.sendText(utf8: json)
    }

    // MARK: room events

    func receive(_ event: RoomEvent, in room: RoomKey, frame: IOBuffer?) {
        // Between our unsubscribe and the hub's confirmation, the room is already gone for us.
        guard let frame, chat.isIn(room), webSocket.canSend else { return }
        if followsUsers || event.isRead {
            // Receipts only for rooms that asked; unread counts kept from the deliveries.
            guard usersEvent(event, in: room, frame: frame) else { return }
        }
        // The shared bytes as they are, or compressed for this connection when negotiated.
        webSocket.sendPreEncoded(frame)
        delivered.incrementFromOwner()
        if case .roomClosed = event {
            // Told (`room_closed`): now out of the room, as after an unsubscribe.
            chat.leave(room)
        }
    }

    /// Runs of one room's messages in one write, unless this session looks at each message
    /// (it follows users: unread counts and receipts).
    var takesRuns: Bool { !followsUsers }

    func receive(run events: ArraySlice<RoomEvent>, in room: RoomKey, frames: IOBuffer) {
        guard chat.isIn(room), webSocket.canSend else { return }
        webSocket.sendPreEncoded(frames)
        delivered.incrementFromOwner(by: events.count)
    }

    func didSubscribe(_ snapshot: SubscribeSnapshot) {
        let callback = pendingSubscribes[snapshot.room]?.isEmpty == false
            ? pendingSubscribes[snapshot.room]!.removeFirst() : nil
        if pendingSubscribes[snapshot.room]?.isEmpty == true { pendingSubscribes[snapshot.room] = nil }
        guard chat.isIn(snapshot.room) else { return }
        if let failure = snapshot.failure {
            chat.forget(snapshot.room)
            sendJSON(NativeEncoding.reply(callback: callback, error: failure.message))
            return
        }
        // The reply first, so the client knows the room before anything arrives for it.
        if let callback { sendJSON(NativeEncoding.reply(callback: callback)) }
        if snapshot.room.isObservable {
            let limit = context.configuration.maxMembersListed
            if snapshot.members.count > limit { context.limits.breached(.membersListed) }
            let members = NativeEncoding.observableMembers(room: snapshot.room, members: snapshot.members, limit: limit,
                                                           maxBytes: context.configuration.maxMembersListedBytes)
            if members.truncated && snapshot.members.count <= limit { context.limits.breached(.membersListed) }
            sendJSON(members.json)
        }
        chat.historyCharge(snapshot.history)
        for (index, message) in snapshot.history.enumerated() {
            sendJSON(NativeEncoding.historyMessage(message, index: index))
        }
        // `since`: everything missed, as ordinary pushes, before anything live.
        didReplay(snapshot.replay, in: snapshot.room, complete: snapshot.replayComplete)
        subscribed(snapshot)
    }

    /// Bytes left to write before the next page of a long replay is read.
    static let replayLowWater = 256 << 10

    func didReplay(_ messages: [Message], in room: RoomKey, complete: Bool) {
        guard chat.isIn(room), connection.state == .open else { return }
        for message in messages { sendJSON(NativeEncoding.replayMessage(message)) }
        guard !complete else { return }
        // A long replay goes page by page: the next is read once this one is mostly out,
        // so a client that was away long enough still resumes, and memory stays flat.
        let (hub, session) = (context.hub, sessionID)
        connection.whenDrained(below: Self.replayLowWater) { hub.continueReplay(session, in: room) }
    }

    func didUnsubscribe(from room: RoomKey) {}

    // MARK: closing

    func webSocketDidClose(_ socket: WebSocketServerConnection, close: WebSocketServerClose) {
        expiryTimer?.stop()
        expiryTimer = nil
        stopWatchingInbox()
        context.loopHub(connection.loop).unregister(sessionID)
        chat.end()
        sessionGuard.end(closing: connection, reason: close.connection, code: close.code.map { Int($0.rawValue) },
                         why: close.sent?.reason)
    }
}

extension NativeSession: AdministeredSession {
    func disconnect(byAdministrator reason: String) {
        guard connection.state == .open else { return }
        sendJSON(NativeEncoding.reply(callback: nil, error: "disconnected by an administrator: \(reason)"))
        closeWith(.policyViolation, reason: String(decoding: Array("disconnected: \(reason)".utf8.prefix(120)), as: UTF8.self))
    }

    /// The one reload rule (``ChatSession/reloaded()``): a refusal is told and closes.
    func configurationReloaded() {
        guard connection.state == .open, let refusal = chat.reloaded() else { return }
        sendJSON(NativeEncoding.reply(callback: nil, error: "\(refusal.message); disconnecting"))
        closeWith(.policyViolation, reason: "permissions changed")
    }
}
