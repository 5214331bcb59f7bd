import ParleyCore
import ParleyIO
import ParleyLog
import Synchronization
import Testing
@testable import ParleyServer

/// The chat rules, once for every door: ``ChatSession`` in-process, with no socket and a
/// clock moved by hand. Each rule is checked for each door that uses it.
@Suite struct ChatSessionTests {
    static let secret = String(repeating: "k", count: 32)
    /// One loop for the sessions' guards: nothing here runs on it (no timers start).
    static let group = EventLoopGroup(loopCount: 1)

    /// A context as the server builds it, with a manual clock and an inbox that records.
    final class World: Sendable {
        let clock = ManualClock()
        let inbox = Recorder()
        let hub: Hub
        let context: DoorContext

        init(_ configure: (inout ServerConfiguration) -> Void = { _ in }) {
            var configuration = ServerConfiguration()
            configure(&configuration)
            hub = Hub(clock: clock)
            let logger = Logger.disabled, throttle = LogThrottle()
            let inbox = self.inbox
            context = DoorContext(hub: hub, settings: SettingsSource(configuration), directory: SessionDirectory(), bans: BanList(),
                                  limits: LimitCounters(logger: logger, throttle: throttle), metrics: ServerMetrics(loopCount: 1),
                                  logger: logger, logThrottle: throttle, inbox: { _ in inbox }, memberIDTag: "",
                                  loopContexts: LoopLocal(ChatSessionTests.group) { [hub, lobby = configuration.lobby] _ in
                                      LoopContext(encoders: LoopEncoders(socketChat: SocketChatFanOut(
                                          hub: hub, lobby: lobby, roster: SocketChatRoster()), line: LineTranscript()))
                                  }, historyBytes: DoorContext.byteBudget(configuration.historyBytesPerIPPerSecond),
                                  publishBytes: DoorContext.byteBudget(configuration.publishBytesPerIPPerSecond))
        }

        func session(_ door: DoorKind, channel: String? = "demo", ip: String = "192.0.2.7", id: SessionID = 1) -> ChatSession {
            let loop = ChatSessionTests.group.loops[0]
            let policy = DoorPolicy(door, context.configuration)
            return ChatSession(door: door, context: context, sessionGuard: SessionGuard(policy, loop: loop, context: context, ticket: nil),
                               sessionID: id, inbox: inbox, channel: channel, clientIP: ip, remote: ip)
        }

        var control: SessionControl { SessionControl(Nobody(), on: ChatSessionTests.group.loops[0]) }

        func reload(_ configure: (inout ServerConfiguration) -> Void) {
            var configuration = context.configuration
            configure(&configuration)
            context.settings.replace(with: configuration)
        }

        func token(client: String = "*", expiresIn seconds: Int64 = 60, publish: Bool = true, history: Int = 50) -> String {
            TokenVerifier(hmac: OpenSSLHMAC(), clock: clock)
                .mint(secret: ChatSessionTests.secret, channel: "demo", client: client,
                      expiresAtSeconds: clock.nowMillis() / 1000 + seconds,
                      permissions: [(".*", publish, true, history)], data: ["role": "tester"])
        }
    }

    final class Recorder: Inbox {
        let log = Mutex<[Delivery]>([])
        func post(_ delivery: Delivery) { log.withLock { $0.append(delivery) } }
        var messages: [Message] {
            log.withLock { $0 }.compactMap { if case .event(_, .message(let message)) = $0 { message } else { nil } }
        }
    }

    final class Nobody: AdministeredSession {
        func disconnect(byAdministrator reason: String) {}
        func configurationReloaded() {}
    }

    static let chatDoors: [DoorKind] = [.line, .native, .socketIO]

    /// Enters and identifies as a door does at its handshake.
    func enter(_ session: ChatSession, _ world: World, as id: String, name: String = "alice") throws {
        if let refusal = session.channelRefusal("demo") { throw refusal }
        _ = try session.identify(as: id, name: name).get()
        if let refusal = session.enter("demo", as: id, name: name, control: world.control) { throw refusal }
    }

    // MARK: identity

    @Test(arguments: chatDoors) func oneNameRuleForEveryDoor(_ door: DoorKind) {
        let session = World().session(door)
        for bad in ["", "   ", "a\u{1B}[2J", "x\u{202E}y", String(repeating: "n", count: 65)] {
            guard case .failure(let refusal) = session.identify(as: "m1", name: bad) else {
                Issue.record("\(door) accepted the name \(bad.debugDescription)")
                continue
            }
            #expect(refusal.code == .badIdentity)
        }
        #expect(session.member == nil)
        #expect((try? session.identify(as: "m1", name: "Zoë").get())?.displayName == "Zoë")
    }

    @Test func clientDataIsBoundedAndItsNameFollowsTheRule() {
        let world = World { $0.maxClientDataBytes = 64 }
        let session = world.session(.native, channel: nil)
        let big: JSONValue = ["name": "bob", "bio": .string(String(repeating: "b", count: 100))]
        guard case .failure(let tooBig) = session.identify(as: "c1", clientData: big) else { Issue.record("accepted"); return }
        #expect(tooBig.code == .badIdentity)
        guard case .failure(let badName) = session.identify(as: "c1", clientData: ["name": "\u{07}bell"]) else {
            Issue.record("accepted a control character"); return
        }
        #expect(badName.message.hasPrefix("client_data.name:"))
        #expect((try? session.identify(as: "c1", clientData: ["name": "bob"]).get()) != nil)
    }

    // MARK: channels, bans, the directory

    @Test(arguments: chatDoors) func aClosedChannelIsRefused(_ door: DoorKind) {
        let world = World { $0.openChannels = false }
        #expect(world.session(door).channelRefusal("demo")?.code == .channelClosed)
        let open = World { $0.openChannels = false; $0.channels = [ChannelSettings(id: "demo")] }
        #expect(open.session(door).channelRefusal("demo") == nil)
    }

    /// Open mode creates a channel for any name; a node holds the rooms of at most
    /// `--max-open-channels` of them at once. Configured channels, and channels already held,
    /// are always served; a room leaving memory makes room again.
    @Test(arguments: chatDoors) func openModeHoldsABoundedNumberOfChannels(_ door: DoorKind) throws {
        let world = World {
            $0.maxOpenChannels = 2
            $0.channels = [ChannelSettings(id: "configured")]
            $0.openChannels = true
        }
        try world.hub.subscribe(901, as: Member(id: "a"), to: RoomKey(channel: "first", room: "r"), inbox: world.inbox)
        try world.hub.subscribe(902, as: Member(id: "b"), to: RoomKey(channel: "second", room: "r"), inbox: world.inbox)
        try world.hub.subscribe(903, as: Member(id: "c"), to: RoomKey(channel: "configured", room: "r"), inbox: world.inbox)
        let refusal = world.session(door, channel: "third").channelRefusal("third")
        #expect(refusal?.code == .channelClosed)
        #expect(refusal?.message == "this server holds its maximum of 2 open channels; try again later")
        #expect(world.context.limits.count(.openChannels) == 1)
        #expect(world.session(door).channelRefusal("first") == nil, "a channel already held")
        #expect(world.session(door).channelRefusal("configured") == nil, "a configured channel, which the cap does not count")
        _ = world.hub.unsubscribe(902, from: RoomKey(channel: "second", room: "r"))
        world.clock.advance(millis: 3_600_000)
        world.hub.evictIdleRooms()
        #expect(world.session(door).channelRefusal("third") == nil, "the second channel left memory")
    }

    @Test(arguments: chatDoors) func bansByAddressAndByNameCloseTheConnection(_ door: DoorKind) async throws {
        let world = World()
        let keeper = BanKeeper(store: InMemoryBanStore(), list: world.context.bans, clock: world.clock)
        _ = try await keeper.add(.ip("192.0.2.7"), seconds: 60, reason: "spam")
        _ = try await keeper.add(.name("mallory"), seconds: 60, reason: "spam")
        let byAddress = world.session(door)
        let refusal = byAddress.enter("demo", as: "x", control: world.control)
        #expect(refusal?.code == .banned)
        #expect(refusal?.closes == true)
        #expect(world.context.directory.count == 0)
        let byName = world.session(door, ip: "198.51.100.1")
        guard case .failure(let named) = byName.identify(as: "y", name: "Mallory") else { Issue.record("a banned name got in"); return }
        #expect(named.code == .banned)
        #expect(byName.identify(as: "y", name: "alice").map(\.id) == .success("y"))
    }

    @Test(arguments: chatDoors) func theDirectoryKnowsTheSessionUntilItEnds(_ door: DoorKind) throws {
        let world = World()
        let session = world.session(door)
        #expect(session.enter("demo", as: "s1", control: world.control) == nil)
        #expect(world.context.directory.client("s1")?.name == nil)
        _ = try session.identify(as: "s1", name: "carol").get()
        #expect(world.context.directory.client("s1")?.name == "carol")
        #expect(world.context.directory.client("s1")?.door == door)
        // Nobody again (SocketChat's exitUser, a refused join): no name shown.
        session.forgetIdentity()
        #expect(world.context.directory.client("s1")?.name == nil)
        #expect(world.context.directory.client("s1") != nil)
        session.end()
        #expect(world.context.directory.count == 0)
    }

    // MARK: tokens

    @Test(arguments: chatDoors) func aChannelThatRequiresATokenRefusesUntilOneVerifies(_ door: DoorKind) throws {
        let world = World { $0.channels = [ChannelSettings(id: "demo", secret: ChatSessionTests.secret, requireAuth: true)] }
        let session = world.session(door)
        try enter(session, world, as: "c1")
        #expect(session.needsToken)
        guard case .failure(let refusal) = session.check(.subscribe, room: "r") else { Issue.record("allowed without a token"); return }
        #expect(refusal.code == .authRequired)
        #expect(session.authenticate("not.a.token")?.code == .authFailed)
        #expect(session.authenticate(world.token(publish: false)) == nil)
        #expect(!session.needsToken)
        #expect(session.member?.authData == ["role": "tester"])
        #expect(session.check(.subscribe, room: "r") == .success(50))
        #expect(session.admitPublish(to: "r")?.code == .forbidden)
        world.clock.advance(millis: 61_000)
        guard case .failure(let expired) = session.check(.subscribe, room: "r") else { Issue.record("an expired token still works"); return }
        #expect(expired.message.hasPrefix("token expired"))
    }

    /// A publish the token forbids is counted (`publishes_refused{reason="forbidden"}`) on
    /// every door, also when the door asks the token and the rate apart (SocketChat).
    @Test(arguments: chatDoors) func aForbiddenPublishIsCountedOnEveryDoor(_ door: DoorKind) throws {
        let world = World { $0.channels = [ChannelSettings(id: "demo", secret: ChatSessionTests.secret, requireAuth: true)] }
        let session = world.session(door)
        try enter(session, world, as: "m1")
        #expect(session.authenticate(world.token(publish: false)) == nil)
        let forbidden = world.context.metrics.publishesRefused.counter(.forbidden)
        #expect(session.permitPublish(to: "r")?.code == .forbidden)
        #expect(session.admitPublish(to: "r")?.code == .forbidden)
        #expect(forbidden.count == 2)
        // The rate alone is not the token's business.
        #expect(session.admitRate() == nil)
        #expect(forbidden.count == 2)
    }

    @Test func nativeTokensMustNameTheClient() throws {
        let world = World { $0.channels = [ChannelSettings(id: "demo", secret: ChatSessionTests.secret, requireAuth: true)] }
        let session = world.session(.native, channel: nil)
        _ = try session.identify(as: "c1", clientData: nil).get()
        #expect(session.enter("demo", as: "c1", tokenNamesClient: true, control: world.control) == nil)
        #expect(session.authenticate(world.token(client: "*"))?.code == .authFailed)
        #expect(session.authenticate(world.token(client: "c2"))?.code == .authFailed)
        #expect(session.authenticate(world.token(client: "c1")) == nil)
    }

    // MARK: rates

    @Test(arguments: chatDoors) func theRateRefusesThenAbuseCloses(_ door: DoorKind) throws {
        let world = World {
            $0.lineRatePerSecond = 1; $0.lineBurst = 2
            $0.nativeRatePerSecond = 1; $0.nativeBurst = 2
            $0.rateAbuseFactor = 2; $0.rateAbuseWindowMillis = 10_000
        }
        let session = world.session(door)
        try enter(session, world, as: "r1")
        #expect(session.admitPublish(to: "r") == nil)
        #expect(session.admitPublish(to: "r") == nil)
        #expect(session.admitPublish(to: "r")?.code == .rateLimited)
        world.clock.advance(millis: 1_000)
        #expect(session.admitPublish(to: "r") == nil)
        var last: ChatRefusal?
        for _ in 0..<100 {
            last = session.admitPublish(to: "r")
            if last?.code == .rateAbuse { break }
        }
        #expect(last?.code == .rateAbuse)
        #expect(last?.closes == true)
    }

    /// A channel's `publishRate` holds on every door, not only the native one.
    @Test(arguments: chatDoors) func aChannelsPublishRateHoldsOnEveryDoor(_ door: DoorKind) throws {
        var channel = ChannelSettings(id: "demo")
        channel.publishRate = 1
        let world = World { $0.channels = [channel] }
        let session = world.session(door)
        try enter(session, world, as: "p1")
        #expect(session.admitPublish(to: "r") == nil)
        #expect(session.admitPublish(to: "r") == nil)
        #expect(session.admitPublish(to: "r")?.code == .rateLimited)
    }

    @Test func historyRequestsHaveTheirOwnRate() throws {
        let world = World { $0.historyRatePerSecond = 1; $0.historyBurst = 1 }
        let session = world.session(.native)
        try enter(session, world, as: "h1")
        #expect(session.history(of: "r", before: nil, limit: 10) { _ in } == nil)
        #expect(session.history(of: "r", before: nil, limit: 10) { _ in }?.code == .historyRateLimited)
        // Publishing is not affected.
        #expect(session.admitPublish(to: "r") == nil)
        world.clock.advance(millis: 1_000)
        #expect(session.history(of: "r", before: nil, limit: 10) { _ in } == nil)
    }

    /// Joins have a rate of their own on every door (each is announced to the room): a client
    /// cycling join and leave is refused past the burst, a leave never is, publishing is not
    /// charged, and refusing again and again is abuse, which closes.
    @Test(arguments: chatDoors) func joinsHaveTheirOwnRateOnEveryDoor(_ door: DoorKind) throws {
        let world = World {
            $0.joinRatePerSecond = 1; $0.joinBurst = 2; $0.nativeMaxRooms = 1
            $0.rateAbuseFactor = 2; $0.rateAbuseWindowMillis = 10_000
        }
        let session = world.session(door)
        try enter(session, world, as: "j1")
        for _ in 0..<2 {
            let key = try session.join("observable-room").get()
            session.leave(key)
        }
        guard case .failure(let refusal) = session.join("observable-room") else { Issue.record("a third join"); return }
        #expect(refusal.code == .joinRateLimited)
        #expect(refusal.message == "join rate limit exceeded (1 joins per second); try again shortly")
        #expect(!refusal.closes)
        #expect(world.context.limits.count(.joinRate) == 1)
        #expect(world.hub.members(of: RoomKey(channel: "demo", room: "observable-room")).isEmpty)
        #expect(session.admitPublish(to: "observable-room") == nil)
        world.clock.advance(millis: 1_000)
        let key = try session.join("observable-room").get()
        #expect(world.hub.members(of: key).map(\.id) == ["j1"])
        session.leave(key)
        #expect(world.hub.members(of: key).isEmpty)
        var last: ChatRefusal?
        for _ in 0..<100 {
            guard case .failure(let refusal) = session.join("observable-room") else { continue }
            last = refusal
            if refusal.code == .rateAbuse { break }
        }
        #expect(last?.code == .rateAbuse)
        #expect(last?.closes == true)
    }

    /// On the native door the join burst is at least `--max-rooms`: a client may subscribe to
    /// all its rooms at once, then joins at the rate.
    @Test func aNativeClientJoinsAllItsRoomsAtOnce() throws {
        let world = World { $0.joinRatePerSecond = 1; $0.joinBurst = 2; $0.nativeMaxRooms = 5 }
        let session = world.session(.native)
        try enter(session, world, as: "n1")
        for n in 0..<5 { _ = try session.join("room-\(n)").get() }
        session.leave(RoomKey(channel: "demo", room: "room-0"))
        guard case .failure(let refusal) = session.join("room-0") else { Issue.record("a sixth join"); return }
        #expect(refusal.code == .joinRateLimited)
    }

    /// Bytes of history are budgeted per client address, over all its connections: opening
    /// more connections (each with its own request rate) reads no more.
    @Test func historyBytesAreBudgetedPerAddressAcrossConnections() async throws {
        let world = World { $0.historyBytesPerIPPerSecond = 64 << 10; $0.historyRatePerSecond = 100 }
        let key = RoomKey(channel: "demo", room: "r")
        let big = JSONValue.string(String(repeating: "b", count: 100 << 10))
        for _ in 0..<5 { _ = try await world.hub.publish(big, to: key, from: nil) }
        func read(_ session: ChatSession) async -> ChatRefusal? {
            await withCheckedContinuation { continuation in
                let refusal = session.history(of: "r", before: nil, limit: 10) { result in
                    if case .success(let page) = result { #expect(page.messages.count == 5) } else { Issue.record("\(result)") }
                    continuation.resume(returning: nil)
                }
                if let refusal { continuation.resume(returning: refusal) }
            }
        }
        let first = world.session(.native, ip: "192.0.2.7", id: 1)
        try enter(first, world, as: "h1")
        // 500 KiB read against a burst of 256 KiB: the address is in debt.
        #expect(await read(first) == nil)
        let second = world.session(.native, ip: "192.0.2.7", id: 2)
        try enter(second, world, as: "h2")
        #expect(await read(second)?.code == .historyRateLimited)
        #expect(await read(first)?.code == .historyRateLimited)
        // Another address has its own budget.
        let other = world.session(.native, ip: "198.51.100.9", id: 3)
        try enter(other, world, as: "h3")
        #expect(await read(other) == nil)
        // The debt (about 244 KiB at 64 KiB/s) is waited off in about four seconds.
        world.clock.advance(millis: 3_000)
        #expect(await read(second)?.code == .historyRateLimited)
        world.clock.advance(millis: 1_000)
        #expect(await read(second) == nil)
    }

    /// Replies and edits carry bodies: they are charged to the address like publishes.
    @Test func repliesAndEditsSpendThePublishByteBudget() throws {
        let world = World { $0.publishBytesPerIPPerSecond = 64 << 10 }
        let session = world.session(.native)
        try enter(session, world, as: "r1")
        let big = JSONValue.string(String(repeating: "r", count: 100 << 10))
        for _ in 0..<3 { _ = try session.publish(big, to: "r").get() }
        for request in [MessageActionRequest.reply(to: "m1", body: "me too", messageID: nil), .edit("m1", body: "v2")] {
            let refusal = session.act(request, in: "r") { _ in }
            #expect(refusal?.code == .rateLimited, "\(request.name)")
            #expect(refusal?.message.contains("publish byte budget of your address spent") == true, "\(request.name)")
        }
        // A reaction carries no body: it is not refused for bytes.
        #expect(session.act(.react("m1", emoji: "👍"), in: "r") { _ in } == nil)
    }

    // MARK: rooms and publishing

    @Test func roomsPerConnectionAreLimited() throws {
        let world = World { $0.nativeMaxRooms = 2 }
        let native = world.session(.native)
        try enter(native, world, as: "n1")
        #expect(try native.join("a").get() == RoomKey(channel: "demo", room: "a"))
        _ = try native.join("b").get()
        // The same room again takes no new place.
        _ = try native.join("a").get()
        guard case .failure(let refusal) = native.join("c") else { Issue.record("a third room"); return }
        #expect(refusal.code == .tooManyRooms)
        native.leave(RoomKey(channel: "demo", room: "a"))
        _ = try native.join("c").get()
        // The line and Socket.IO doors are in one room, the lobby.
        let line = world.session(.line, id: 2)
        try enter(line, world, as: "l1", name: "bob")
        _ = try line.join("observable-room").get()
        #expect(throws: ChatRefusal.self) { try line.join("elsewhere").get() }
    }

    @Test(arguments: chatDoors) func aPublishReachesTheRoomAndEndingLeavesIt(_ door: DoorKind) throws {
        let world = World()
        let session = world.session(door)
        try enter(session, world, as: "m1")
        let key = try session.join("observable-room").get()
        #expect(session.isIn(key))
        _ = try session.publish("hello", to: "observable-room").get()
        #expect(world.inbox.messages.map(\.body) == ["hello"])
        #expect(world.inbox.messages.first?.sender?.id == "m1")
        _ = try session.typing(true, in: "observable-room").get()
        #expect(world.hub.members(of: key).map(\.id) == ["m1"])
        session.end()
        #expect(!session.isIn(key))
        #expect(world.hub.members(of: key).isEmpty)
    }

    @Test func nothingIsPublishedBeforeAnIdentity() {
        let world = World()
        let session = world.session(.line)
        guard case .failure(let refusal) = session.publish("hi", to: "observable-room") else { Issue.record("published"); return }
        #expect(refusal.code == .notIdentified)
        #expect(world.inbox.messages.isEmpty)
    }

    // MARK: reloads: one rule for every door

    @Test(arguments: chatDoors) func aReloadThatClosesTheChannelEndsTheSession(_ door: DoorKind) throws {
        let world = World()
        let session = world.session(door)
        try enter(session, world, as: "m1")
        #expect(session.reloaded() == nil)
        world.reload { $0.openChannels = false }
        #expect(session.reloaded()?.code == .noLongerAllowed)
        #expect(session.reloaded()?.closes == true)
    }

    @Test(arguments: chatDoors) func aReloadReverifiesTheToken(_ door: DoorKind) throws {
        let world = World { $0.channels = [ChannelSettings(id: "demo", secret: ChatSessionTests.secret, requireAuth: true)] }
        let session = world.session(door)
        #expect(session.authenticate(world.token()) == nil)
        try enter(session, world, as: "m1")
        #expect(session.reloaded() == nil)
        world.reload { $0.channels = [ChannelSettings(id: "demo", secret: String(repeating: "z", count: 32), requireAuth: true)] }
        let refusal = session.reloaded()
        #expect(refusal?.code == .noLongerAllowed)
        #expect(refusal?.message.hasPrefix("your token is no longer valid") == true)
    }

    @Test(arguments: chatDoors) func aChannelThatNowRequiresATokenEndsSessionsWithout(_ door: DoorKind) throws {
        let world = World()
        let session = world.session(door)
        try enter(session, world, as: "m1")
        world.reload { $0.channels = [ChannelSettings(id: "demo", secret: ChatSessionTests.secret, requireAuth: true)] }
        #expect(session.reloaded()?.message == "channel \"demo\" now requires authentication")
    }

    @Test(arguments: chatDoors) func aReloadPutsTheNewRatesInForce(_ door: DoorKind) throws {
        let world = World()
        let session = world.session(door)
        try enter(session, world, as: "m1")
        var channel = ChannelSettings(id: "demo")
        channel.publishRate = 1
        world.reload { $0.channels = [channel] }
        #expect(session.reloaded() == nil)
        #expect(session.admitPublish(to: "r") == nil)
        #expect(session.admitPublish(to: "r") == nil)
        #expect(session.admitPublish(to: "r")?.code == .rateLimited)
    }

    /// A reload keeps what each rate has spent: a client out of messages, joins or history
    /// requests stays out when the operator reloads (before, every reload refilled every
    /// connection's buckets); a raised limit gives only the difference.
    @Test(arguments: chatDoors) func aReloadRefillsNoRate(_ door: DoorKind) throws {
        let world = World {
            $0.lineRatePerSecond = 1; $0.lineBurst = 2
            $0.nativeRatePerSecond = 1; $0.nativeBurst = 2
            $0.joinRatePerSecond = 1; $0.joinBurst = 1; $0.nativeMaxRooms = 1
            $0.historyRatePerSecond = 1; $0.historyBurst = 1
        }
        let session = world.session(door)
        try enter(session, world, as: "m1")
        while session.admitPublish(to: "r") == nil {}
        while case .success(let key) = session.join("r") { session.leave(key) }
        while session.history(of: "r", before: nil, limit: 1, completion: { _ in }) == nil {}
        world.reload { $0.historyPageLimit = 999 }
        #expect(session.reloaded() == nil)
        #expect(session.admitPublish(to: "r")?.code == .rateLimited)
        guard case .failure(let refusal) = session.join("r") else { Issue.record("a join after the reload"); return }
        #expect(refusal.code == .joinRateLimited)
        #expect(session.history(of: "r", before: nil, limit: 1) { _ in }?.code == .historyRateLimited)
        // A burst raised by 1 gives one more message, no more.
        world.reload { $0.lineBurst = 3; $0.nativeBurst = 3 }
        #expect(session.reloaded() == nil)
        #expect(session.admitPublish(to: "r") == nil)
        #expect(session.admitPublish(to: "r")?.code == .rateLimited)
    }

    /// The refusals counted toward abuse survive a reload too: a client cannot reset its
    /// abuse window by waiting for the operator's SIGHUP.
    @Test func aReloadKeepsTheRefusalsCountedForAbuse() throws {
        let world = World {
            $0.nativeRatePerSecond = 1; $0.nativeBurst = 1
            $0.rateAbuseFactor = 3; $0.rateAbuseWindowMillis = 10_000
        }
        let session = world.session(.native)
        try enter(session, world, as: "a1")
        #expect(session.admitPublish(to: "r") == nil)
        #expect(session.admitPublish(to: "r")?.code == .rateLimited)
        #expect(session.admitPublish(to: "r")?.code == .rateLimited)
        world.reload { $0.historyPageLimit = 999 }
        #expect(session.reloaded() == nil)
        #expect(session.admitPublish(to: "r")?.code == .rateLimited)
        #expect(session.admitPublish(to: "r")?.code == .rateAbuse, "the fourth refusal in the window, past 3 × the rate")
    }

    @Test func doorWording() {
        #expect(DoorWording.seconds(30_000) == "30")
        #expect(DoorWording.seconds(1_500) == "1.5")
        #expect(DoorWording.quoted(String(repeating: "x", count: 40)) == String(repeating: "x", count: 40))
        #expect(DoorWording.quoted(String(repeating: "x", count: 41)) == String(repeating: "x", count: 40) + "…")
    }
}
