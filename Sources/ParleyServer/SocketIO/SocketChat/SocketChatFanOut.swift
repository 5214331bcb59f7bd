import ParleyCore
import ParleyIO

/// SocketChat's room-event encoder on one loop (see ``RoomEventEncoding``): the events need
/// the lobby's members and typists, mirrored from the event stream (see ``RoomMirror``) while
/// this loop has SocketChat sockets in the lobby. One per loop, owned by the Socket.IO door
/// (``SocketIODoor/fanOuts``) and confined to its loop.
///
/// A join or leave shows as `userList` followed by other events. The frame it encodes for such
/// an event holds only the others: each socket sends the `userList` itself, from
/// ``currentUserListFrame(_:limit:)``, so a socket can coalesce the lists of a storm of joins (see
/// ``SocketChatUserListPacer``) while the list itself is still encoded at most once per
/// change and transport on this loop, and only when some socket sends it.
final class SocketChatFanOut {
    private let hub: Hub
    /// The lobby (restart-only).
    private let lobby: RoomKey
    private let roster: SocketChatRoster
    /// Cluster mode: told of lobby leaves (another node may have listed a departure).
    private let sync: SocketChatRosterSync?
    /// This loop's SocketChat applications with a connected socket, told when the roster
    /// changed elsewhere.
    private var apps: [ObjectIdentifier: WeakApplication] = [:]
    private final class WeakApplication { weak var app: SocketChatApplication?; init(_ app: SocketChatApplication) { self.app = app } }
    private var mirror: RoomMirror?
    private var sessionsInLobby = 0
    /// The last event and its packets: both framings of one event share one encoding and
    /// apply it to the mirror once.
    private var last: (event: RoomEvent, packets: [String])?
    /// Bumped whenever the member list may have changed, so the cached lists go stale.
    private var membersVersion = 0
    /// The list as last encoded: for the members at `version` and the roster's departed users
    /// at `rosterGeneration` (which changes without a room event: an `exitUser` from a socket
    /// not in the lobby, another node's departures).
    private var userListCache: (version: Int, rosterGeneration: Int, limit: ListLimit, packet: String, webSocket: IOBuffer?,
                                polling: IOBuffer?)?

    /// `--max-members-listed` and `--max-members-list-bytes` as the asking socket reads them
    /// (reloadable): the most a `userList` holds.
    struct ListLimit: Equatable {
        var count: Int
        var bytes: Int
    }

    /// Cluster mode: a lobby leave's roster read has not come back yet. Meanwhile sockets
    /// hold the leave's `userList` (and what follows it), so the list they send lists the
    /// departure (``rosterSettled()``).
    private(set) var rosterReadPending = false
    /// Another leave came while the read was out: one more read follows it (one for all of
    /// them), so this loop has at most one read asked for at a time, however fast members
    /// leave.
    private var rosterReadAgain = false
    private let loop: EventLoop?

    init(hub: Hub, lobby: RoomKey, roster: SocketChatRoster, sync: SocketChatRosterSync? = nil, loop: EventLoop? = nil) {
        self.hub = hub
        self.lobby = lobby
        self.roster = roster
        self.sync = sync
        self.loop = loop
    }

    /// A roster read after a lobby leave came back: unless another leave came meanwhile
    /// (then the read after it), the held lists go, built from the roster as it is now.
    func rosterSettled() {
        guard !rosterReadAgain else {
            rosterReadAgain = false
            askRosterRead()
            return
        }
        rosterReadPending = false
        membersVersion += 1
        for entry in Array(apps.values) { entry.app?.rosterSettled() }
    }

    /// A lobby leave: read the cluster's roster, which the leaving node wrote the departure
    /// to before it left; while a read is out, once more after it.
    private func rosterReadForLeave() {
        guard !rosterReadPending else {
            rosterReadAgain = true
            return
        }
        rosterReadPending = true
        askRosterRead()
    }

    private func askRosterRead() {
        guard let sync, let loop else { return }
        let me = LoopBound(self, on: loop)
        sync.refreshNow { me.run { $0.rosterSettled() } }
    }

    func register(_ app: SocketChatApplication) { apps[ObjectIdentifier(app)] = WeakApplication(app) }
    func unregister(_ app: SocketChatApplication) { apps.removeValue(forKey: ObjectIdentifier(app)) }

    /// The cluster's roster changed (not through this node): the cached lists are stale, and
    /// every socket sends the new one.
    func rosterChanged() {
        membersVersion += 1
        for entry in Array(apps.values) { entry.app?.rosterChanged() }
    }

    func sessionJoined(_ snapshot: SubscribeSnapshot) {
        if sessionsInLobby == 0 || mirror == nil {
            mirror = RoomMirror(members: snapshot.members, typing: hub.typingMembers(of: snapshot.room))
            last = nil
            membersVersion += 1
        }
        sessionsInLobby += 1
    }

    func sessionLeft() {
        sessionsInLobby = max(0, sessionsInLobby - 1)
        if sessionsInLobby == 0 {
            mirror = nil
            membersVersion += 1
        }
    }

    func encode(_ format: WireFormat, _ room: RoomKey, _ event: RoomEvent) -> IOBuffer? {
        guard room == lobby else { return nil }
        let packets: [String]
        if let last, last.event == event {
            packets = last.packets
        } else {
            if case .memberLeft = event, sync != nil, loop != nil { rosterReadForLeave() }
            var mirror = self.mirror ?? RoomMirror(members: hub.members(of: room), typing: hub.typingMembers(of: room))
            if self.mirror != nil { mirror.apply(event) }
            self.mirror = mirror
            if event.changesMembers { membersVersion += 1 }
            var events = SocketChatEncoding.events(for: event, users: [], typing: mirror.typing)
            // The userList leads a join or leave; each socket sends it (see the type's comment).
            if event.changesMembers, events.first?.name == "userList" { events.removeFirst() }
            packets = events.map { SocketIOPacket.event($0.name, $0.arguments).engineIOText }
            last = (event, packets)
        }
        return SocketChatEncoding.frame(packets, as: format)
    }

    /// The last event and its opt-in packets (``SocketChatEncoding/optInEvents(for:)``).
    private var lastOptIn: (event: RoomEvent, packets: [String])?

    /// The opt-in action events of a lobby message (for sockets that sent
    /// `subscribeActions`), encoded once per event and loop; nil when it has none.
    func optInFrame(_ format: WireFormat, _ room: RoomKey, _ event: RoomEvent) -> IOBuffer? {
        guard room == lobby else { return nil }
        let packets: [String]
        if let lastOptIn, lastOptIn.event == event {
            packets = lastOptIn.packets
        } else {
            packets = SocketChatEncoding.optInEvents(for: event).map { SocketIOPacket.event($0.name, $0.arguments).engineIOText }
            lastOptIn = (event, packets)
        }
        return packets.isEmpty ? nil : SocketChatEncoding.frame(packets, as: format)
    }

    /// The `userList` packet for the lobby as this loop has seen it up to the last event (the
    /// state a socket shows after the events it was given), framed for `format`.
    func currentUserListFrame(_ format: WireFormat, limit: ListLimit) -> IOBuffer? {
        // Read before the list is built: a change while it is built shows at the next ask.
        let generation = roster.generation
        if userListCache?.version != membersVersion || userListCache?.rosterGeneration != generation || userListCache?.limit != limit {
            let members = mirror?.members ?? hub.members(of: lobby)
            let event = SocketChatEncoding.userList(roster.users(connected: members), limit: limit.count, maxBytes: limit.bytes)
            userListCache = (membersVersion, generation, limit, SocketIOPacket.event(event.name, event.arguments).engineIOText, nil, nil)
        }
        guard var cache = userListCache else { return nil }
        let transport = format.engineIOTransport
        if let frame = transport == .webSocket ? cache.webSocket : cache.polling { return frame }
        let frame = SocketChatEncoding.frame([cache.packet], as: format)
        if transport == .webSocket { cache.webSocket = frame } else { cache.polling = frame }
        userListCache = cache
        return frame
    }
}

extension RoomEvent {
    /// A join or a leave: SocketChat shows it with a new `userList`.
    var changesMembers: Bool {
        switch self {
        case .memberJoined, .memberLeft: true
        case .message, .messageDeleted, .roomClosed, .read, .conversationAdded: false
        }
    }
}

/// One socket's `userList` pacing: at most one list per ``windowMillis``. A list due within
/// the window waits, with every room event after it (so the order of events never changes),
/// and lists due later in the window merge into it: when the window ends one list goes, in
/// the place of the first, carrying the latest state. So each `userConnectUpdate` and
/// `userExitUpdate` still comes after a list that shows it, as SocketChat sends them (a list
/// moved to the last place would put the updates before it ahead of any list showing them),
/// unless the same user changed again later in the window (the list shows the latest state).
/// The client replaces its list with each one it gets, so it ends in the same state, and a
/// storm of n joins costs each socket O(n) bytes instead of O(n²). Loop-confined.
struct SocketChatUserListPacer {
    enum Item {
        /// Pre-encoded room events for a transport.
        case frame(IOBuffer, EngineIOTransport)
        /// The list as it is when it is sent.
        case userList
    }

    /// The window: short enough that a person sees no delay, long enough to merge a burst.
    static let windowMillis: Int64 = 50

    private(set) var lastSentMillis: Int64 = .min
    private(set) var held: [Item] = []

    var isHolding: Bool { !held.isEmpty }
    /// A list is held (it is built when it goes, with the state of then).
    var holdsList: Bool { held.contains { if case .userList = $0 { true } else { false } } }

    /// A list is due at `nowMillis`: true when it may go now (the caller sends it and calls
    /// ``sent(at:)``); false when it is held, to go at ``flushDueMillis``.
    mutating func userListDue(at nowMillis: Int64) -> Bool {
        if held.isEmpty && (lastSentMillis == .min || nowMillis - lastSentMillis >= Self.windowMillis) { return true }
        hold()
        return false
    }

    /// Holds a list (and every event after it) until the next flush, whenever it is due. A
    /// list already held stays where it is: it is built when it goes, so it shows this change
    /// too.
    mutating func hold() {
        if !holdsList { held.append(.userList) }
    }

    /// Cluster mode: while roster reads are out (a leave makes the node read who departed
    /// and who exited), the held list waits for them until then at the latest, even when
    /// the window would end sooner. Set by the first such hold of a held run and kept: later
    /// joins and leaves do not push it out, so nothing is held longer than the wait.
    private(set) var rosterWaitUntil: Int64 = .min

    /// Holds a list (and every event after it) while the loop's roster reads are out, until
    /// they are back or `waitMillis` after the first such hold of this held run.
    mutating func holdForRoster(at nowMillis: Int64, waitMillis: Int64) {
        hold()
        if rosterWaitUntil == .min { rosterWaitUntil = nowMillis + waitMillis }
    }

    /// Milliseconds the held items must still wait at `nowMillis` (0: they go now): until the
    /// window ends (``flushDueMillis``), and while roster reads are out (`rosterPending`) for a
    /// run that waits for them, until ``rosterWaitUntil`` (the reads coming back flush it
    /// sooner). Sent before the reads are back, a leave's list would show the leave without
    /// the departure, and a client waiting for the list that shows it would skip the leave's
    /// update and then wait for it in vain.
    func heldDelay(at nowMillis: Int64, rosterPending: Bool) -> Int64 {
        var due = flushDueMillis
        if rosterPending && rosterWaitUntil != .min { due = max(due, rosterWaitUntil) }
        return max(0, due - nowMillis)
    }

    /// A list went out (now or by a flush).
    mutating func sent(at nowMillis: Int64) { lastSentMillis = nowMillis }

    /// Room events: true when they may go now; false when they wait behind a held list.
    mutating func frame(_ frame: IOBuffer, _ transport: EngineIOTransport) -> Bool {
        guard !held.isEmpty else { return true }
        held.append(.frame(frame, transport))
        return false
    }

    /// When the held items are due: the first window boundary (multiples of the window on the
    /// clock) a full window after the last list. The boundaries are the same for every socket,
    /// so the sockets of a loop flush together and share one encoding of the list.
    var flushDueMillis: Int64 {
        guard lastSentMillis != .min else { return 0 }
        let earliest = lastSentMillis + Self.windowMillis
        let slot = (earliest + Self.windowMillis - 1) / Self.windowMillis
        return slot * Self.windowMillis
    }

    /// Everything held, in order; nothing is held afterwards.
    mutating func takeHeld() -> [Item] {
        defer {
            held = []
            rosterWaitUntil = .min
        }
        return held
    }

    mutating func reset() {
        held = []
        rosterWaitUntil = .min
    }
}
