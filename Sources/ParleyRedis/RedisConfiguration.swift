/// Which protocol a connection speaks.
public enum RedisProtocolPreference: Sendable, Equatable {
    /// `HELLO 3`, falling back to RESP2 when the server does not know it (Redis < 6).
    case resp3IfAvailable
    /// RESP2 only (no `HELLO`).
    case resp2
}

import ParleyIO

/// TLS for `rediss://` endpoints: whom to trust, and the name the server's certificate must
/// carry (nil: the endpoint's host, a DNS name or an IP address).
public struct RedisTLS: Sendable, Equatable {
    public let context: TLSContext
    public var serverName: String?

    public init(context: TLSContext, serverName: String? = nil) {
        self.context = context
        self.serverName = serverName
    }

    public static func == (lhs: RedisTLS, rhs: RedisTLS) -> Bool {
        lhs.context === rhs.context && lhs.serverName == rhs.serverName
    }
}

/// How a Redis connection behaves: timeouts, bounds, reconnect backoff, protocol. Every
/// value has a limit; the defaults suit a chat server next to its Redis.
public struct RedisConfiguration: Sendable, Equatable {
    /// How long a TCP connect may take before the attempt counts as failed.
    public var connectTimeoutMillis: Int = 5_000
    /// How long a command waits for its reply (unless the command sets its own). A command
    /// that times out on a connection that received nothing since the command was written
    /// also marks the connection unresponsive: it is closed and reconnected.
    public var commandTimeoutMillis: Int = 5_000
    /// Most commands one connection holds unanswered (waiting to be written plus written);
    /// more fail at once with ``RedisError/Code/queueFull``.
    public var maxPendingCommands: Int = 100_000
    /// Most bytes queued for writing on one connection before it is cut.
    public var maxWriteQueueBytes: Int = 64 << 20
    /// First reconnect delay; it doubles per failed attempt up to ``reconnectMaxDelayMillis``,
    /// and each delay is drawn from its upper half (jitter), so nodes do not reconnect in step.
    public var reconnectInitialDelayMillis: Int = 100
    /// Longest reconnect delay.
    public var reconnectMaxDelayMillis: Int = 5_000
    /// An idle connection sends `PING` this often, so a Redis that stopped answering is
    /// noticed (and reported down) even when nothing else is sent; 0 disables.
    public var pingIntervalMillis: Int = 2_000
    /// RESP3 or RESP2.
    public var protocolPreference: RedisProtocolPreference = .resp3IfAvailable
    /// `CLIENT SETNAME` value, shown by `CLIENT LIST` on the server; nil sends none.
    public var clientName: String?
    /// Limits of the reply decoder.
    public var decoderLimits = RESPDecoderLimits()
    /// Redis Cluster: most `MOVED`/`ASK`/`TRYAGAIN` redirections one command follows.
    public var maxRedirections: Int = 5
    /// Redis Cluster: the slot map is reloaded this often even without a redirection; 0 only
    /// reloads on redirections and connection failures.
    public var slotMapRefreshIntervalMillis: Int = 30_000
    /// Scripts loaded (`SCRIPT LOAD`) on every command connection as it (re)connects, before
    /// it takes commands: `EVALSHA` then never meets `NOSCRIPT` after a Redis restart, so two
    /// scripts sent back to back are never run out of order by the `EVAL` fallback.
    public var scriptsToLoad: [RedisScript] = []
    /// TLS for `rediss://` endpoints (a `rediss://` endpoint without it fails to connect).
    public var tls: RedisTLS?

    public init() {}
}

/// The state of one Redis connection.
public enum RedisConnectionState: Sendable, Equatable {
    /// Not started yet.
    case idle
    /// Connecting, or logging in (`HELLO`/`AUTH`/`SELECT`, re-subscribing).
    case connecting
    /// Commands flow.
    case ready
    /// The last attempt failed or the connection was lost; another attempt follows after a
    /// backoff. Commands fail at once with ``RedisError/Code/connection``.
    case down(RedisError)
    /// Closed by its owner; never reconnects.
    case closed
}

/// What a connection tells its owner, on the connection's loop.
public enum RedisConnectionEvent: Sendable, Equatable {
    /// An attempt to connect starts.
    case connecting
    /// The connection is usable. `reconnected` is true when an earlier session was lost:
    /// a subscriber may have missed messages published in between.
    case ready(reconnected: Bool)
    /// The attempt failed or the connection was lost; the error says why.
    case down(RedisError)
}

/// A snapshot of a client's connections, for `/metrics` and `/readyz`.
public struct RedisStatus: Sendable, Equatable {
    public enum State: String, Sendable {
        /// Not every connection has come up yet, none is down.
        case connecting
        /// Every connection is ready.
        case ready
        /// At least one connection is down (``RedisStatus/message`` says why).
        case down
        /// Closed by its owner.
        case closed
    }

    public var state: State
    /// Why the client is down, when it is.
    public var message: String?
    /// Connections the client holds (one per loop and node).
    public var connections: Int
    /// Of those, the ones ready.
    public var readyConnections: Int
    /// Times a connection came back after being lost.
    public var reconnects: Int

    public init(state: State, message: String? = nil, connections: Int, readyConnections: Int, reconnects: Int) {
        self.state = state
        self.message = message
        self.connections = connections
        self.readyConnections = readyConnections
        self.reconnects = reconnects
    }

    /// The combined status of several parts (cluster nodes, subscriber connections).
    static func combined(_ parts: [RedisStatus]) -> RedisStatus {
        var result = RedisStatus(state: .ready, connections: 0, readyConnections: 0, reconnects: 0)
        var anyConnecting = false
        for part in parts {
            result.connections += part.connections
            result.readyConnections += part.readyConnections
            result.reconnects += part.reconnects
            switch part.state {
            case .down where result.state != .down:
                result.state = .down
                result.message = part.message
            case .connecting: anyConnecting = true
            default: break
            }
        }
        if result.state != .down && anyConnecting { result.state = .connecting }
        return result
    }
}
