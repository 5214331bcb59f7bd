import ParleyCore
import ParleyIO

/// The one place where chat rules live, whatever door a client came in by: a door is a codec
/// plus its own wording around one of these per connection (per Socket.IO socket).
///
/// It owns the member (one name rule, bounded client data), the channel and the access
/// rules from the token, the ban checks and the directory registration, the rate and abuse
/// verdicts, the rooms joined and their limit, and the re-check after a reload. Every
/// operation answers at once, with a ``ChatRefusal`` when it is refused; what the store
/// answers later goes to the completion the door passes (on a store thread: the door hops
/// back to its loop if it needs to). It never writes to a connection.
///
/// Confined to its door's loop (or to the thread of a test), like the door's session.
final class ChatSession {
    let door: DoorKind
    let context: DoorContext
    /// The door policy's share of the connection: rate buckets, abuse, throttling.
    let sessionGuard: SessionGuard
    let sessionID: SessionID
    /// Where this session's deliveries go (its loop's inbox).
    let inbox: any Inbox
    /// The client's address: bans and the directory use it. A trusted proxy's header may
    /// change it before the session enters.
    var clientIP: String?
    /// The connection's address for logs.
    var remote: String?

    /// The channel this session speaks in: line and Socket.IO know theirs (the lobby's) from
    /// the start, the native door from its handshake.
    private(set) var channel: String?
    /// The channel's auth rules and this session's verified token, if any.
    private(set) var access: ChannelAccess?
    /// The verified token, kept to verify it again after a reload (never logged).
    private var token: String?
    /// Whom tokens must name: the native door's client id, or `"*"` (line, Socket.IO).
    private var tokenClient: TokenVerifier.ClientRequirement = .wildcard
    /// The id the session is registered under in the directory, once it entered.
    private(set) var clientID: String?
    /// Who the session chats as, once identified.
    private(set) var member: Member?
    /// The user id the client chose (native `user_id`, or a line or Socket.IO name that is a
    /// valid user id): the member's user in an open channel. A token's `user` claim wins.
    private var claimedUser: String?
    /// False when the user keeps read receipts private (native `share_receipts: false`).
    var sharesReceipts = true
    /// Rooms subscribed (or being subscribed) to, so ending leaves every one of them. Read on
    /// every delivery by the native door: held behind a pointer, whose `pointee` accesses
    /// carry no dynamic exclusivity checks (the session's thread only).
    private let subscribed: UnsafeMutablePointer<SubscribedRooms>

    init(door: DoorKind, context: DoorContext, sessionGuard: SessionGuard, sessionID: SessionID, inbox: any Inbox,
         channel: String? = nil, clientIP: String?, remote: String?) {
        self.door = door
        self.context = context
        self.sessionGuard = sessionGuard
        self.sessionID = sessionID
        self.inbox = inbox
        self.clientIP = clientIP
        self.remote = remote
        subscribed = .allocate(capacity: 1)
        subscribed.initialize(to: SubscribedRooms())
        if let channel { use(channel) }
    }

    deinit {
        subscribed.deinitialize(count: 1)
        subscribed.deallocate()
    }

    var configuration: ServerConfiguration { context.configuration }

    /// Speaks in `channel` from now on, with its access rules and its rates.
    private func use(_ channel: String) {
        self.channel = channel
        access = ChannelAccess(channel: channel, configuration: configuration, clock: context.clock)
        applyRates(configuration)
    }

    /// The message and history rates as the configuration and the channel set them: a
    /// channel's `publishRate` replaces the door's.
    private func applyRates(_ configuration: ServerConfiguration) {
        sessionGuard.limitHistoryRate(perSecond: configuration.historyRatePerSecond, burst: configuration.historyBurst)
        // A native client may subscribe to all its rooms at once.
        sessionGuard.limitJoinRate(perSecond: configuration.joinRatePerSecond,
                                   burst: max(configuration.joinBurst, Double(maxRooms)))
        if let rate = channel.flatMap({ configuration.settings(ofChannel: $0) })?.publishRate {
            sessionGuard.limitRate(perSecond: rate, burst: max(1, rate * 2))
        } else if let rate = DoorPolicy(door, configuration).rate {
            sessionGuard.limitRate(perSecond: rate.perSecond, burst: rate.burst)
        }
    }

    // MARK: entering a channel

    /// Why `channel` is closed to clients, or nil.
    func channelRefusal(_ channel: String) -> ChatRefusal? {
        let configuration = self.configuration
        if let refusal = configuration.refusal(ofChannel: channel) { return ChatRefusal(.channelClosed, refusal) }
        return Self.openChannelRefusal(channel, configuration: configuration, hub: context.hub, limits: context.limits)
    }

    /// Open mode: a channel that is not configured and has no room here yet is refused while
    /// the node holds rooms of `--max-open-channels` such channels (each channel costs the
    /// node its rooms, mirrors and per-channel tables). Counted as `open_channels`.
    static func openChannelRefusal(_ channel: String, configuration: ServerConfiguration, hub: Hub, limits: LimitCounters) -> ChatRefusal? {
        guard configuration.openChannels, configuration.settings(ofChannel: channel) == nil,
              !hub.holdsRooms(inChannel: channel) else { return nil }
        // Every channel held, less the configured ones (few): no walk over the held ones.
        let open = hub.channelCount - configuration.channels.filter { hub.holdsRooms(inChannel: $0.id) }.count
        guard open >= configuration.maxOpenChannels else { return nil }
        limits.breached(.openChannels)
        return ChatRefusal(.channelClosed, "this server holds its maximum of \(configuration.maxOpenChannels) open channels; try again later")
    }

    /// Enters `channel` as `id` (after the door asked ``channelRefusal(_:)`` at its
    /// handshake): the address (and `name`) must not be banned. Registers the session in the
    /// directory, where the operator and reloads reach it through `control`. Tokens then must
    /// name `id` when `tokenNamesClient`.
    func enter(_ channel: String, as id: String, name: String? = nil, tokenNamesClient: Bool = false,
               control: SessionControl) -> ChatRefusal? {
        if let refusal = banned(name: name) { return refusal }
        if self.channel != channel { use(channel) }
        if tokenNamesClient { tokenClient = .exactly(id) }
        refreshUser()
        clientID = id
        context.directory.register(ConnectedClient(id: id, door: door, remoteIP: clientIP, channel: channel, name: name,
                                                   connectedAtMillis: context.nowMillis, control: control))
        return nil
    }

    /// A refusal when the client's address, or `name`, is banned (logged, rate-limited).
    func banned(name: String?) -> ChatRefusal? {
        guard let ban = context.bans.ban(ip: clientIP, name: name, nowMillis: context.nowMillis) else { return nil }
        context.logThrottle.log("banned", to: context.logger, .info, "banned client refused",
                                metadata: ["door": .string(door.rawValue), "remote": .string(remote ?? "?"), "ban": .int(ban.id)])
        return ChatRefusal(.banned, "banned from this server")
    }

    // MARK: authentication

    /// Verifies `token` for this session's channel. On success the member (if any) carries
    /// the token's `data` as `authData` from now on.
    func authenticate(_ token: String) -> ChatRefusal? {
        guard var access, let channel else { return ChatRefusal(.notIdentified, "handshake first") }
        if let error = access.authenticate(token, client: tokenClient) {
            context.logAuthFailure(door: door, remote: remote, channel: channel, reason: error)
            return ChatRefusal(.authFailed, error)
        }
        self.access = access
        self.token = token
        if let member {
            self.member = Member(id: member.id, clientData: member.clientData, authData: access.claims?.data, userID: userID)
        }
        return nil
    }

    /// When the verified token expires (nil without one).
    var tokenExpiresMillis: Int64? { access?.claims?.expiresMillis }

    /// Whether the channel needs a token this session has not given.
    var needsToken: Bool { access.map { $0.requiresAuth && !$0.isAuthenticated } ?? false }

    /// The number of history messages `action` on `room` may bring, or why it is refused.
    func check(_ action: AuthAction, room: String) -> Result<Int, ChatRefusal> {
        if let refusal = ChatRules.roomRefusal(room, user: member?.user) { return .failure(refusal) }
        guard let access else { return .success(Int.max) }
        if access.requiresAuth && !access.isAuthenticated {
            return .failure(ChatRefusal(.authRequired, "authentication required: this channel needs a token (send authenticate first)"))
        }
        let check = access.check(action, room: room, nowMillis: context.nowMillis)
        if let error = check.error { return .failure(ChatRefusal(.forbidden, error)) }
        return .success(check.history)
    }

    // MARK: identity

    /// Becomes `id` named `name` (line `iam:`, SocketChat `connectUser`): the one name rule,
    /// then the bans. The member's client data is `{name, color}`.
    func identify(as id: String, name: String) -> Result<Member, ChatRefusal> {
        if let problem = MemberName.problem(with: name) { return .failure(ChatRefusal(.badIdentity, problem.message)) }
        let clientData: JSONValue = .object(["name": .string(name), "color": .string(NameColor.color(for: name))])
        claimedUser = UserID.problem(with: name) == nil ? name : nil
        return identify(as: id, name: name, clientData: clientData)
    }

    /// Becomes `id` with the client's own `clientData` (native handshake): bounded in bytes,
    /// and its `name`, if any, under the one name rule; then the bans.
    func identify(as id: String, clientData: JSONValue?, user: String? = nil) -> Result<Member, ChatRefusal> {
        if let clientData, let problem = MemberName.problem(withClientData: clientData, maxBytes: configuration.maxClientDataBytes) {
            return .failure(ChatRefusal(.badIdentity, problem.message))
        }
        if let user, let problem = UserID.problem(with: user) { return .failure(ChatRefusal(.badIdentity, "user_id: \(problem)")) }
        claimedUser = user
        return identify(as: id, name: clientData?["name"]?.stringValue, clientData: clientData)
    }

    private func identify(as id: String, name: String?, clientData: JSONValue?) -> Result<Member, ChatRefusal> {
        if let refusal = banned(name: name) { return .failure(refusal) }
        let member = Member(id: id, clientData: clientData, authData: access?.claims?.data, userID: userID)
        self.member = member
        if let clientID, name != nil { context.directory.rename(clientID, to: name) }
        return .success(member)
    }

    /// The member's user (docs/protocols.md, "Users"): a verified token's `user` claim; in a
    /// channel without auth, the id the client claimed; else nil (the connection is a user of
    /// its own). Proves nothing in an open channel.
    var userID: String? {
        if let user = access?.claims?.user { return user }
        if access?.requiresAuth == true { return nil }
        return claimedUser
    }

    /// Rebuilds the member with the user the channel's rules give it (the channel is known
    /// only once the session entered it).
    private func refreshUser() {
        guard let member, member.userID != userID else { return }
        self.member = Member(id: member.id, clientData: member.clientData, authData: member.authData, userID: userID)
    }

    /// Is nobody any more (SocketChat's `exitUser`, or a join that was refused); rooms are
    /// left separately. The directory no longer shows the name.
    func forgetIdentity() {
        guard member != nil else { return }
        member = nil
        if let clientID { context.directory.rename(clientID, to: nil) }
    }

    // MARK: rooms

    /// Rooms one connection of this door may be in at once.
    private var maxRooms: Int { door == .native ? configuration.nativeMaxRooms : 1 }

    /// Joins `room` of the channel as the member: the token must allow it, the session must
    /// have room for one more, and the hub must take it. `historyCount` is capped by the
    /// token and the configuration. The snapshot comes to the door's `didSubscribe`.
    func join(_ room: String, historyCount: Int = 0, since: Int64? = nil) -> Result<RoomKey, ChatRefusal> {
        guard let member, let channel else { return .failure(ChatRefusal(.notIdentified, "handshake first")) }
        let allowed: Int
        switch check(.subscribe, room: room) {
        case .success(let count): allowed = count
        case .failure(let refusal): return .failure(refusal)
        }
        let key = RoomKey(channel: channel, room: room)
        if !isIn(key) && subscribed.pointee.count >= maxRooms {
            context.limits.breached(.roomsPerConnection)
            return .failure(ChatRefusal(.tooManyRooms, "too many rooms (limit \(maxRooms) per connection)"))
        }
        let historyCount = min(historyCount, allowed, configuration.nativeMaxHistoryCount)
        if historyCount > 0, let refusal = historyBudgetSpent() { return .failure(refusal) }
        if let refusal = admitJoin() { return .failure(refusal) }
        do {
            try context.hub.subscribe(sessionID, as: member, to: key, inbox: inbox, historyCount: historyCount, since: since)
        } catch {
            return .failure(ChatRefusal(.refused, error.message))
        }
        subscribed.pointee.insert(key)
        noteConversation(key)
        return .success(key)
    }

    /// Takes a token from the join rate: every join is announced to the room's members, so
    /// it is paced on every door alike (sustained refusals are abuse, which closes).
    private func admitJoin() -> ChatRefusal? {
        switch sessionGuard.admitJoin() {
        case .allowed: nil
        case .refused:
            ChatRefusal(.joinRateLimited,
                        "join rate limit exceeded (\(DoorWording.rate(sessionGuard.joinRatePerSecond)) joins per second); try again shortly")
        case .abusive: ChatRefusal(.rateAbuse, "join rate limit exceeded")
        }
    }

    /// Whether the session is in `room` (or joining it). Runs once per delivery.
    @inline(__always) func isIn(_ room: RoomKey) -> Bool { subscribed.pointee.contains(room) }

    /// The room's snapshot said the join failed, or the room closed: out of it.
    func forget(_ room: RoomKey) { subscribed.pointee.remove(room) }

    /// Leaves `room` (nothing when not in it).
    func leave(_ room: RoomKey) {
        guard subscribed.pointee.remove(room) != nil else { return }
        context.hub.unsubscribe(sessionID, from: room)
    }

    /// The key of `room` in this session's channel.
    func key(_ room: String) -> RoomKey? { channel.map { RoomKey(channel: $0, room: room) } }

    // MARK: publishing

    /// Whether the member may publish one more message to `room` now: the token, then the
    /// rate (a refusal is counted; sustained abuse is a refusal that closes).
    func admitPublish(to room: String) -> ChatRefusal? {
        permitPublish(to: room) ?? admitRate()
    }

    /// Whether the token lets the member publish to `room` (a refusal is counted as
    /// `forbidden`). A door that must know before anything else happens (SocketChat, before
    /// an implicit join) asks this first and ``admitRate()`` after.
    func permitPublish(to room: String) -> ChatRefusal? {
        guard case .failure(let refusal) = check(.publish, room: room) else { return nil }
        context.metrics.publishesRefused.counter(.forbidden).increment()
        return refusal
    }

    /// Takes a token from the message rate (refusals counted; sustained abuse closes).
    /// `isPublish: false`: an ask paced like a message that publishes nothing.
    func admitRate(isPublish: Bool = true) -> ChatRefusal? {
        switch sessionGuard.admitMessage(isPublish: isPublish) {
        case .allowed: nil
        case .refused: ChatRefusal(.rateLimited, "rate limit exceeded")
        case .abusive: ChatRefusal(.rateAbuse, "rate limit exceeded")
        }
    }

    /// Publishes an admitted message as `sender` (the member unless the door says otherwise).
    /// `whenStored` runs once the store answered, on a store thread. Returns the room's
    /// backlog, by which the door slows its reader down.
    func publishAdmitted(_ body: JSONValue, to room: String, as sender: Member? = nil, messageID: String? = nil,
                         whenStored: (@Sendable (Result<Message, ParleyError>) -> Void)? = nil) -> Result<RoomBacklog?, ChatRefusal> {
        guard let from = sender ?? member, let key = key(room) else { return .failure(ChatRefusal(.notIdentified, "handshake first")) }
        if let refusal = context.chargePublish(body.approximateSize, from: budgetKey) { return .failure(refusal) }
        do {
            return .success(try context.hub.publish(body, to: key, from: from, session: sessionID, messageID: messageID, whenStored: whenStored))
        } catch {
            context.metrics.publishesRefused.counter(PublishRefusal(error)).increment()
            return .failure(ChatRefusal(.refused, error.message))
        }
    }

    /// ``admitPublish(to:)`` then ``publishAdmitted(_:to:as:messageID:whenStored:)``.
    func publish(_ body: JSONValue, to room: String, as sender: Member? = nil, messageID: String? = nil,
                 whenStored: (@Sendable (Result<Message, ParleyError>) -> Void)? = nil) -> Result<RoomBacklog?, ChatRefusal> {
        if let refusal = admitPublish(to: room) { return .failure(refusal) }
        return publishAdmitted(body, to: room, as: sender, messageID: messageID, whenStored: whenStored)
    }

    /// Starts or stops typing in `room`: a publish (rate and token alike) that is never stored.
    func typing(_ flag: Bool, in room: String, as sender: Member? = nil) -> Result<RoomBacklog?, ChatRefusal> {
        publish(.object(["typing": .bool(flag)]), to: room, as: sender)
    }

    // MARK: message actions

    /// Replies to, edits, deletes or reacts to a message of `room` (docs/protocols.md,
    /// "Message actions"): the request's shape, the token's `publish`, and the message rate
    /// (an action counts like a message) are checked now; then the target is read and the
    /// rules are applied to its current state (only its author, or a token with `moderate`,
    /// edits or deletes it; the edit window and edit count; the reaction limits), and the
    /// action is published. A refusal now is returned; later ones, and the stored entry, go
    /// to `completion`, once, on a store thread.
    func act(_ request: MessageActionRequest, in room: String,
             completion: @escaping @Sendable (Result<Message, ChatRefusal>) -> Void) -> ChatRefusal? {
        if let refusal = admitAction(request, in: room) { return refusal }
        return performAction(request, in: room, completion: completion)
    }

    /// The checks of ``act(_:in:completion:)`` made when the action arrives: its shape, the
    /// token's `publish`, the message rate and the publish byte budget. A door that holds
    /// actions to run them one at a time admits each before holding it, so what waits was
    /// paid for (``performAction(_:in:completion:)`` runs it later).
    func admitAction(_ request: MessageActionRequest, in room: String) -> ChatRefusal? {
        guard member != nil, key(room) != nil else { return ChatRefusal(.notIdentified, "handshake first") }
        if let problem = MessageActionRules.problem(with: request) { return problem }
        if let refusal = admitPublish(to: room) { return refusal }
        // A reply or an edit carries a body, like a publish.
        if let body = request.body, let refusal = context.chargePublish(body.approximateSize, from: budgetKey) { return refusal }
        return nil
    }

    /// Runs an action ``admitAction(_:in:)`` let through (see ``act(_:in:completion:)``).
    func performAction(_ request: MessageActionRequest, in room: String,
                       completion: @escaping @Sendable (Result<Message, ChatRefusal>) -> Void) -> ChatRefusal? {
        guard let member, let key = key(room) else { return ChatRefusal(.notIdentified, "handshake first") }
        // Held for its turn, it may meet a token refreshed meanwhile: the permission again.
        if let refusal = permitPublish(to: room) { return refusal }
        // Moderation needs a token that grants it: without one, everything else is allowed on
        // an open channel, but nobody moderates.
        let canModerate = if access?.isAuthenticated == true, case .success = check(.moderate, room: room) { true } else { false }
        MessageActionRules(configuration).perform(request, in: key, as: member, canModerate: canModerate, hub: context.hub,
                                                  completion: completion)
        return nil
    }

    // MARK: history

    /// Reads a page of `room`'s stored history (at most `limit` messages, capped by the
    /// token and `--history-page-limit`, and `--history-page-bytes`), within the history
    /// rate. `completion` runs on a store thread.
    func history(of room: String, before offset: Int64?, limit: Int,
                 completion: @escaping @Sendable (Result<MessagePage, ParleyError>) -> Void) -> ChatRefusal? {
        guard let key = key(room) else { return ChatRefusal(.notIdentified, "handshake first") }
        let allowed: Int
        switch check(.history, room: room) {
        case .success(let count): allowed = count
        case .failure(let refusal): return refusal
        }
        guard sessionGuard.admitHistoryRequest() else {
            return ChatRefusal(.historyRateLimited,
                               "history rate limit exceeded (\(Int(sessionGuard.historyRatePerSecond)) requests per second); try again shortly")
        }
        if let refusal = historyBudgetSpent() { return refusal }
        let charge = historyCharge
        context.hub.storedHistory(of: key, before: offset, limit: min(limit, configuration.historyPageLimit, allowed)) { result in
            if case .success(let page) = result { charge(page.messages) }
            completion(result)
        }
        return nil
    }

    /// The refusal of a read of history (a `history` page, a subscribe's `history_count`)
    /// when the client's address has spent its history bytes (`--history-bytes-per-ip`).
    func historyBudgetSpent() -> ChatRefusal? {
        context.historyBudgetSpent(budgetKey)
    }

    /// Charges history messages read for this session to its address, over all its
    /// connections: a page's cost is known once it is read, so the address may go into debt
    /// and waits it off. Callable from any thread.
    var historyCharge: @Sendable ([Message]) -> Void {
        let charge = historyBytesCharge
        return { messages in charge(messages.reduce(0) { $0 + $1.approximateSize }) }
    }

    /// ``historyCharge`` by the bytes read.
    var historyBytesCharge: @Sendable (Int) -> Void {
        let (context, key) = (context, budgetKey)
        return { bytes in context.chargeHistory(bytes, to: key) }
    }

    /// Charges `bytes` of a received message that is neither a publish nor an action (those
    /// are charged when admitted) to the address's publish byte budget: a malformed message,
    /// a subscribe, anything. A compressed frame inflates up to the message limit, and
    /// inflating, parsing and answering it costs the server in proportion to what it became,
    /// not to what was sent. The refusal when the budget is spent.
    func chargeReceived(_ bytes: Int) -> ChatRefusal? {
        context.chargePublish(bytes, from: budgetKey)
    }

    /// The address per-address budgets count against (the forwarded one behind a trusted proxy).
    private var budgetAddress: String { clientIP ?? remote ?? "" }

    /// ``budgetAddress`` as the limiters key it, worked out again only when the address
    /// changed (a proxy header named the client), not on every publish.
    private var budgetKey: IPRateLimiter.Key {
        let address = budgetAddress
        if let cached = cachedBudgetKey, cached.address == address { return cached }
        let key = IPRateLimiter.Key(address)
        cachedBudgetKey = key
        return key
    }
    private var cachedBudgetKey: IPRateLimiter.Key?

    // MARK: reloads

    /// The configuration was reloaded. One rule for every door: the channel must still be
    /// open, a kept token must still verify (its secret may have changed), and a session
    /// without one must not be in a channel that now requires one. Otherwise the refusal
    /// (which closes); else the fresh rules and rates are in force.
    func reloaded() -> ChatRefusal? {
        guard let channel else { return nil }
        let configuration = self.configuration
        var fresh = ChannelAccess(channel: channel, configuration: configuration, clock: context.clock)
        var problem: String?
        if let refusal = configuration.refusal(ofChannel: channel) {
            problem = refusal
        } else if let token {
            if let error = fresh.authenticate(token, client: tokenClient) { problem = "your token is no longer valid: \(error)" }
        } else if fresh.requiresAuth, clientID != nil {
            problem = "channel \"\(channel)\" now requires authentication"
        }
        if let problem {
            context.logger.info("connection closed after a configuration reload",
                                metadata: ["door": .string(door.rawValue), "remote": .string(remote ?? "?"),
                                           "channel": .string(channel), "reason": .string(problem)])
            return ChatRefusal(.noLongerAllowed, problem)
        }
        access = fresh
        applyRates(configuration)
        return nil
    }

    // MARK: ending

    /// The connection is gone: out of every room and the directory.
    func end() {
        for key in subscribed.pointee { context.hub.unsubscribe(sessionID, from: key) }
        subscribed.pointee.removeAll()
        if let clientID { context.directory.unregister(clientID) }
        clientID = nil
        member = nil
    }
}

/// A session's rooms: a set, plus the one room when there is exactly one (most sessions), so
/// the check made on every delivery compares two keys instead of hashing one.
struct SubscribedRooms: Sequence {
    private var all: Set<RoomKey> = []
    private var only: RoomKey?

    var count: Int { all.count }

    @inline(__always) func contains(_ room: RoomKey) -> Bool {
        if let only { return only == room }
        return all.contains(room)
    }

    @discardableResult
    mutating func insert(_ room: RoomKey) -> Bool {
        defer { only = all.count == 1 ? all.first : nil }
        return all.insert(room).inserted
    }

    @discardableResult
    mutating func remove(_ room: RoomKey) -> RoomKey? {
        defer { only = all.count == 1 ? all.first : nil }
        return all.remove(room)
    }

    mutating func removeAll() {
        all.removeAll()
        only = nil
    }

    func makeIterator() -> Set<RoomKey>.Iterator { all.makeIterator() }
}
