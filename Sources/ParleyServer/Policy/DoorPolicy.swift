import ParleyCore
import ParleyIO
import ParleyLog

/// The door a connection came in by; metrics and logs name it.
enum DoorKind: String, Sendable, CaseIterable {
    /// Plain HTTP: REST, the web client, `/metrics` (before any upgrade).
    case http
    /// The Scaledrone v3 WebSocket door.
    case native
    /// Socket.IO, over long-polling or WebSocket.
    case socketIO = "socketio"
    /// The line protocol over TCP.
    case line
    /// The diagnostic WebSocket echo endpoint.
    case echo
}

/// The connection policy of one door: everything the server does to a connection apart from
/// speaking the door's protocol. A door picks its values here and leaves the mechanics to
/// ``ServerCore/listen(_:port:group:accept:)`` (admission, write-queue limit, TLS) and to a
/// ``SessionGuard`` per connection (handshake timeout, idle watch, message rate and abuse).
struct DoorPolicy: Sendable {
    let door: DoorKind
    /// Whether the listener speaks TLS (when the server has a certificate).
    var tls: Bool
    /// How a refused connection is told: a 503 (HTTP doors) or an `error:` line.
    var refusesWithHTTP: Bool
    /// Unsent bytes one connection may queue before it is cut off.
    var writeQueueLimit: Int
    /// Time to complete the door's handshake (first request, upgrade, `iam:`).
    var handshakeTimeoutMillis: UInt64
    /// A connection that sends no message this long is closed.
    var idleTimeoutMillis: UInt64
    /// Messages per second a connection may send, and the burst; nil: unlimited.
    var rate: (perSecond: Double, burst: Double)?
    /// Refusals within ``abuseWindowMillis`` beyond `factor × rate` disconnect.
    var abuseFactor: Double
    var abuseWindowMillis: Int64

    /// The policy of `door` as the configuration sets it.
    init(_ door: DoorKind, _ configuration: ServerConfiguration) {
        self.door = door
        tls = door != .line || configuration.lineTLS
        refusesWithHTTP = door != .line
        writeQueueLimit = configuration.writeQueueLimit
        handshakeTimeoutMillis = configuration.handshakeTimeoutMillis
        idleTimeoutMillis = configuration.idleTimeoutMillis
        abuseFactor = configuration.rateAbuseFactor
        abuseWindowMillis = configuration.rateAbuseWindowMillis
        switch door {
        case .line: rate = (configuration.lineRatePerSecond, configuration.lineBurst)
        case .native, .socketIO: rate = (configuration.nativeRatePerSecond, configuration.nativeBurst)
        case .http, .echo: rate = nil
        }
    }
}

/// What a door does with a connection its listener accepted (or a test handed it in memory,
/// ``ParleyServer/acceptInMemory(door:remoteIP:loop:)``): runs on the connection's loop with its
/// ticket and policy and must set the connection's handler.
typealias DoorAcceptor = @Sendable (TCPConnection, AdmissionTicket, DoorPolicy) -> Void

extension ServerCore {
    /// Binds a door's listener (or, for a server started without listeners, binds nothing
    /// and returns nil). Every accepted connection goes through ``admit(_:door:accept:)``;
    /// `accept` is kept for connections handed in memory too.
    func listen(_ door: DoorKind, port: Int, group: EventLoopGroup,
                accept: @escaping DoorAcceptor) throws(IOError) -> TCPListener? {
        acceptors.withLock { $0[door] = accept }
        guard bindsListeners else { return nil }
        return try TCPListener.bind(host: configuration.host, port: port, group: group) { [self] connection in
            admit(connection, door: door, accept: accept)
        }
    }

    /// What every connection a door accepts goes through. It gets the door's policy as the
    /// configuration sets it at that moment (a reload changes it for new connections): its
    /// write-queue limit, TLS when the door speaks it, and admission (banned addresses, the
    /// total and per-IP limits; a refused one is told why and closed). `accept` then runs
    /// with its ticket and policy and must set the connection's handler (one left without is
    /// closed at once). On the connection's loop.
    func admit(_ connection: TCPConnection, door: DoorKind, accept: DoorAcceptor) {
        let policy = DoorPolicy(door, configuration)
        connection.maxQueuedBytes = policy.writeQueueLimit
        if policy.tls, let tls {
            do {
                try connection.startTLS(tls)
            } catch {
                logThrottle.log("tls error", to: logger, .error, "TLS setup failed",
                                metadata: ["door": .string(door.rawValue), "remote": .string(connection.remoteAddress),
                                           "error": .string("\(error)")])
                return  // no handler: closed at once
            }
        }
        if let ban = bans.ban(ip: connection.remoteIP, name: nil, nowMillis: hub.clock.nowMillis()) {
            logThrottle.log("banned", to: logger, .info, "banned address refused",
                            metadata: ["door": .string(door.rawValue), "remote": .string(connection.remoteAddress),
                                       "ban": .int(ban.id)])
            connection.handler = RefusedConnection(connection: connection, message: "your address is banned from this server",
                                                   http: policy.refusesWithHTTP)
            return
        }
        // A trusted proxy's connection carries many clients: it counts in the total only,
        // and its client counts per IP once known (an upgrade's X-Forwarded-For, a line
        // connection's PROXY header; ``AdmissionTicket/claim(ip:)``).
        let proxied = (door == .http || (door == .line && configuration.lineProxyProtocol))
            && TrustedProxies(configuration.trustedProxies).trusts(connection.remoteIP)
        switch gate.admit(ip: proxied ? nil : connection.remoteIP) {
        case .failure(let refusal):
            limits.breached(refusal.limit, remote: connection.remoteAddress)
            connection.handler = RefusedConnection(connection: connection, message: refusal.message,
                                                   http: policy.refusesWithHTTP)
        case .success(let ticket):
            metrics.acceptedConnections.counter(door).increment()
            logger.debug("connection opened", metadata: ["door": .string(door.rawValue), "remote": .string(connection.remoteAddress),
                                                         "connection": .string(ServerCore.describe(connection: connection.id))])
            accept(connection, ticket, policy)
        }
    }
}
