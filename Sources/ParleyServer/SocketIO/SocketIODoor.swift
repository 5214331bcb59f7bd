import ParleyCore
import ParleyHTTP
import ParleyIO
import Synchronization

// The Socket.IO door in three layers, each talking only to the one below:
//  - EngineIO/: Engine.IO 3 and 4 (sessions, polling and WebSocket, upgrade, heartbeats,
//    payloads); it hands message packets up to an `EngineIOSessionHandler`.
//  - Protocol/: Socket.IO (packets, namespaces, CONNECT / DISCONNECT, acks, binary
//    attachments); `SocketIOConnection` is the Engine.IO handler and hands events up to a
//    `SocketIOApplication`.
//  - SocketChat/: the SocketChat event set, the application on `/socket.io/`.
// Adding an event set is one new `SocketIOApplication`, chosen in `SocketIODoor.engineIO`.

/// What every loop's Socket.IO door shares: its Engine.IO sessions and their loop-local
/// state, the SocketChat roster, its counters and log.
final class SocketIOShared: Sendable {
    /// Which loop owns each session of `/socket.io/`.
    let sessions = EngineIOSessionRegistry()
    /// Which loop owns each session of the Engine.IO echo endpoint (`--eio-echo-path`).
    let echoSessions = EngineIOSessionRegistry()
    /// Each loop's Engine.IO sessions, WebSockets and held polls (both Engine.IO doors).
    let loops: LoopLocal<EngineIOLoop>
    let roster: SocketChatRoster
    /// Cluster mode: the roster kept equal to every node's (Redis); nil on a single node.
    let rosterSync: SocketChatRosterSync?
    private let nextSession = Atomic<UInt64>(0)
    /// Long-polling sessions open now, on both Engine.IO doors (capped by
    /// `socketIOMaxPollingSessions`).
    let pollingSessions = Atomic<Int>(0)
    let counters = SocketIOCounters()
    let log = SocketIOLog()
    /// Polling requests per IP, checked before a request is routed to its session.
    let pollingRate: IPRateLimiter

    init(configuration: ServerConfiguration, group: EventLoopGroup, clock: any WallClock = SystemWallClock(),
         rosterStore: (any SocketChatRosterStore)? = nil, onError: @escaping @Sendable (ParleyError) -> Void = { _ in }) {
        let roster = SocketChatRoster(clock: clock)
        self.roster = roster
        rosterSync = rosterStore.map { SocketChatRosterSync(roster: roster, store: $0, clock: clock, onError: onError) }
        pollingRate = IPRateLimiter(ratePerSecond: configuration.socketIOPollingRatePerSecond,
                                      burst: configuration.socketIOPollingRatePerSecond * 2)
        loops = LoopLocal(group) { _ in EngineIOLoop() }
    }

    /// A Socket.IO user's socket went away without `exitUser`: listed as disconnected (on
    /// every node in cluster mode).
    func departed(id: String, nickname: String, stored: @escaping @Sendable () -> Void = {}) {
        if let rosterSync {
            rosterSync.departed(id: id, nickname: nickname, stored: stored)
        } else {
            roster.disconnected(id: id, nickname: nickname)
            stored()
        }
    }

    /// A user identified again, or exited: no longer listed as departed.
    func returned(nickname: String) {
        if let rosterSync { rosterSync.returned(nickname: nickname) } else { roster.connected(nickname: nickname) }
    }

    /// A hub session id for a Socket.IO connection (not a TCP connection): the loop in the
    /// top bits like connection ids, bit 47 set so the two never collide.
    func makeSessionID(loop: EventLoop) -> SessionID {
        let n = nextSession.add(1, ordering: .relaxed).newValue
        return (UInt64(loop.index) << 48) | (1 << 47) | n
    }
}

/// The Socket.IO door at `/socket.io/`: Engine.IO 3 and 4 over HTTP long-polling and
/// WebSocket, Socket.IO on each session, SocketChat on Socket.IO (or, with `--sio-test-app`,
/// the protocol's test application). With `--eio-echo-path`, also a bare Engine.IO 4 echo
/// server there. `HTTPSession` hands it every request and upgrade on those paths. One per
/// server: it owns its shared state and, per loop, the SocketChat lobby mirror.
final class SocketIODoor: HTTPMountedDoor {
    var kind: DoorKind { .socketIO }
    let shared: SocketIOShared
    /// SocketChat's encoder of room events, one per loop (``LoopEncoders``).
    let fanOuts: LoopLocal<SocketChatFanOut>

    init(configuration: ServerConfiguration, hub: Hub, group: EventLoopGroup, rosterStore: (any SocketChatRosterStore)? = nil,
         onError: @escaping @Sendable (ParleyError) -> Void = { _ in }) {
        let shared = SocketIOShared(configuration: configuration, group: group, clock: hub.clock, rosterStore: rosterStore,
                                    onError: onError)
        self.shared = shared
        let lobby = configuration.lobby
        let fanOuts = LoopLocal(group) { loop in
            SocketChatFanOut(hub: hub, lobby: lobby, roster: shared.roster, sync: shared.rosterSync, loop: loop)
        }
        self.fanOuts = fanOuts
        // Another node changed the roster: every SocketChat socket here sends the new list.
        let loops = group.loops
        shared.rosterSync?.whenChanged {
            for loop in loops { loop.execute { fanOuts[loop].rosterChanged() } }
        }
        shared.rosterSync?.startPolling()
    }

    /// Stops following the cluster's roster (the server is stopping).
    func stop() { shared.rosterSync?.stop() }

    /// On the HTTP door's port (``HTTPSession`` routes `/socket.io/` here).
    func listen(_ core: ServerCore, group: EventLoopGroup) throws(IOError) -> TCPListener? { nil }

    /// Long-polling sessions hold a place at the gate without a connection of their own.
    func serverIsStopping(_ core: ServerCore, on loop: EventLoop) {
        shared.loops[loop].closeAllSessions(reason: "server shutting down")
    }

    func writeMetrics(_ core: ServerCore, into out: inout PrometheusText) {
        out.family("parley_socketio_sessions", "gauge", help: "Engine.IO sessions open (polling or WebSocket).")
        out.sample("parley_socketio_sessions", shared.sessions.count)
        shared.writeMetrics(into: &out)
    }

    func writeStatus(into w: inout JSONWriter) {
        w.key("socketio_sessions"); w.writeInt(shared.sessions.count)
    }

    static func handles(_ path: String) -> Bool { path == "/socket.io/" || path == "/socket.io" }

    /// Whether `path` belongs to this door: `/socket.io/`, or the Engine.IO echo path.
    func handles(_ path: String, core: ServerCore) -> Bool {
        Self.handles(path) || Self.isEchoPath(path, core)
    }

    private static func isEchoPath(_ path: String, _ core: ServerCore) -> Bool {
        guard let echo = core.configuration.engineIOEchoPath else { return false }
        return path == echo || (echo.hasSuffix("/") && path == String(echo.dropLast()))
    }

    func handle(_ head: HTTPRequestHead, body: [UInt8], connection: TCPConnection, keepAlive: Bool, core: ServerCore) {
        engineIO(for: head.path, core).handle(head, body: body, connection: connection, keepAlive: keepAlive)
    }

    func upgrade(_ head: HTTPRequestHead, leftover: [UInt8], connection: TCPConnection, core: ServerCore,
                 from httpGuard: SessionGuard) -> Bool {
        engineIO(for: head.path, core).upgrade(head, leftover: leftover, connection: connection, from: httpGuard)
    }

    /// An oversized request ends the session it names (Engine.IO 3: no answer).
    func requestTooLarge(_ head: HTTPRequestHead, core: ServerCore) -> Bool {
        guard handles(head.path, core: core) else { return false }
        return engineIO(for: head.path, core).requestTooLarge(head)
    }

    /// A held poll on the connection is gone.
    func connectionClosed(_ connection: TCPConnection, core: ServerCore) {
        EngineIODoor.connectionClosed(connection, loops: shared.loops)
    }

    private func engineIO(for path: String, _ core: ServerCore) -> EngineIODoor {
        Self.isEchoPath(path, core) && !Self.handles(path) ? echo(core) : engineIO(core)
    }

    /// The layers on each new session: Socket.IO, and the SocketChat application on it (or the
    /// protocol's test application, which speaks Socket.IO v5 only).
    private func engineIO(_ core: ServerCore) -> EngineIODoor {
        let testApp = core.configuration.socketIOTestApp
        let timeout = core.configuration.socketIOConnectTimeoutMillis
        let (shared, fanOuts) = (self.shared, self.fanOuts)
        return EngineIODoor(core: core, shared: shared, sessions: shared.sessions, versions: testApp ? [.v4] : [.v3, .v4]) { session in
            let application: any SocketIOApplication = testApp
                ? SocketIOTestApplication()
                : SocketChatApplication(context: core.doorContext, shared: shared, fanOut: fanOuts[session.loop], engineIO: session,
                                        rate: session.sessionGuard)
            return SocketIOConnection(channel: session, application: application,
                                      maxPayload: core.configuration.socketIOMaxPayload, connectTimeoutMillis: timeout) {
                core.limits.breached(.handshakeTimeout)
            }
        }
    }

    /// The bare Engine.IO 4 echo server of `--eio-echo-path`.
    private func echo(_ core: ServerCore) -> EngineIODoor {
        EngineIODoor(core: core, shared: shared, sessions: shared.echoSessions, versions: [.v4]) { session in
            EngineIOEchoHandler(channel: session)
        }
    }
}
