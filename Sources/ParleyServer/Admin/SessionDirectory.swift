import ParleyCore
import ParleyIO
import Synchronization

/// A session the operator can act on: every door's connection registers one once it has an
/// identity (native handshake, line `iam:`, Socket.IO CONNECT). Loop-confined: called on
/// its loop only (through ``SessionControl``).
protocol AdministeredSession: AnyObject {
    /// Tell the client why (a close reason, an error line) and close the connection.
    func disconnect(byAdministrator reason: String)
    /// The configuration was reloaded: re-check this session's channel and token against it,
    /// and tell and close the session when they no longer allow it in.
    func configurationReloaded()
}

/// Reaches an ``AdministeredSession`` from any thread: the call runs on the session's loop,
/// and not at all once the session is gone.
struct SessionControl: Sendable {
    let loop: EventLoop
    private let box: SessionBox

    init(_ session: AdministeredSession, on loop: EventLoop) {
        self.loop = loop
        box = SessionBox(session)
    }

    func run(_ body: @escaping @Sendable (AdministeredSession) -> Void) {
        let box = self.box
        loop.execute { body(box.session) }
    }
}

/// `@unchecked Sendable` proof: `session` is read only inside tasks that `SessionControl.run`
/// hands to the session's own loop (`loop.execute`); the reference itself is written once, at
/// init.
///
/// A strong reference: every door unregisters its client when the connection closes, which
/// drops the directory's entry and with it this box. (A weak one gave every session a side
/// table, which makes each retain and release in the fan-out a slow-path call.)
private final class SessionBox: @unchecked Sendable {
    let session: AdministeredSession
    init(_ session: AdministeredSession) { self.session = session }
}

/// One identified client of this node.
struct ConnectedClient: Sendable {
    /// Its client id (native), member id (`line-N`) or socket id (Socket.IO): its member id
    /// in every room.
    let id: String
    let door: DoorKind
    let remoteIP: String?
    let channel: String
    /// The name it shows (`clientData.name`, `iam:NAME`, `connectUser`), once known.
    var name: String?
    let connectedAtMillis: Int64
    let control: SessionControl
}

extension ConnectedClient {
    /// As the admin API lists it (and the cluster's connection roster holds it).
    var summary: ConnectionSummary {
        ConnectionSummary(id: id, door: door.rawValue, channel: channel, name: name, ip: remoteIP, connectedAtMillis: connectedAtMillis)
    }
}

/// The identified clients of this node by id: for the admin API (members across doors,
/// disconnect, bans) and for re-checking permissions after a reload. Thread-safe.
final class SessionDirectory: Sendable {
    private let clients = Mutex<[String: ConnectedClient]>([:])

    func register(_ client: ConnectedClient) {
        clients.withLock { $0[client.id] = client }
    }

    func rename(_ id: String, to name: String?) {
        clients.withLock { $0[id]?.name = name }
    }

    func unregister(_ id: String) {
        clients.withLock { _ = $0.removeValue(forKey: id) }
    }

    func client(_ id: String) -> ConnectedClient? { clients.withLock { $0[id] } }

    var all: [ConnectedClient] { clients.withLock { Array($0.values) } }

    var count: Int { clients.withLock { $0.count } }

    /// Clients a ban on `value` covers (an IP address, or a name compared case-insensitively).
    func matching(_ ban: Ban.Target) -> [ConnectedClient] {
        clients.withLock { clients in clients.values.filter { ban.covers(ip: $0.remoteIP, name: $0.name) } }
    }
}
