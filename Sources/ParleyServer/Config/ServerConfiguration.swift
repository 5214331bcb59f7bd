import ParleyCore
import ParleyLog
import ParleyRedis

/// Everything `parley serve` can be told: an immutable snapshot once built (a reload swaps in
/// a new one). ``ServerSetting/table`` says how each property is set: its flag, `PARLEY_*`
/// variable and config-file path; a flag wins over the variable, which wins over the file.
public struct ServerConfiguration: Sendable, Equatable {
    public var host = "127.0.0.1"
    public var httpPort = 8080
    public var linePort = 8081
    public var dataDirectory = "./parley-data"
    public var loops = EventLoopCount.cores
    public var lobby = RoomKey(channel: "demo", room: "observable-room")
    /// Longest line the line door accepts, in bytes.
    public var lineMaxLength = 16 * 1024
    /// Messages per second one line connection may send (token bucket rate)...
    public var lineRatePerSecond = 20.0
    /// ...and the burst it may send at once.
    public var lineBurst = 40.0
    /// Bytes that may wait to be written to one connection before it is cut off.
    public var writeQueueLimit = 4 << 20
    /// Recent messages cached in memory per room (all of history is in the store).
    public var historyCapacity = 1_000
    /// Bytes of recent messages cached in memory per room.
    public var historyBytesPerRoom = 1 << 20
    /// Bytes of recent messages cached in memory across all rooms.
    public var historyBytesTotal = 256 << 20
    /// Deliveries and publishes of one room in progress on this node above which its
    /// publishers are slowed (not read) until half of them are done.
    public var roomBacklog = 4_096
    /// Stored messages kept per room; nil keeps everything.
    public var retentionCount: Int?
    /// Days a stored message is kept; nil keeps everything.
    public var retentionDays: Int?
    /// Lobby messages a newly joined line user gets first.
    public var joinHistory = 20
    /// Most messages one `history` request returns (`limit` is capped to it).
    public var historyPageLimit = 1_000
    /// How long after sending a message may still be edited, in seconds (0: no edits).
    public var editWindowSeconds = 86_400
    /// Most edits one message may have.
    public var maxEditsPerMessage = 20
    /// Most distinct reactions (emoji) one message may carry.
    public var maxReactionsPerMessage = 20
    /// Most distinct reactions one member may put on one message.
    public var maxReactionsPerMember = 3
    /// Conversations kept per user and channel (``ReadStateStore/maxRoomsPerUser``).
    public var maxConversationsPerUser = 200
    /// Most readers one `receipts` list holds.
    public var maxReceiptsListed = 50
    /// Most conversations one connection's live inbox (`inbox` with `watch`) follows.
    public var maxInboxWatchRooms = 50

    // Push notifications (docs/push.md)
    /// VAPID keys (base64url: the uncompressed public point, the private scalar): Web Push is on with both.
    public var vapidPublicKey: String?
    public var vapidPrivateKey: String?
    public var vapidSubject = "mailto:admin@localhost"
    /// URL prefixes a Web Push subscription's endpoint must start with: the browsers' push services.
    public var webPushEndpoints = ["https://fcm.googleapis.com/", "https://updates.push.services.mozilla.com/",
                                   "https://web.push.apple.com/", "https://*.notify.windows.com/"]
    public var pushCAFile: String?
    /// APNs token authentication: the team's `.p8` key, its id and the team id (all three, or none).
    public var apnsKeyFile: String?
    public var apnsKeyID: String?
    public var apnsTeamID: String?
    public var apnsEndpoint = "https://api.push.apple.com"
    public var apnsSandboxEndpoint = "https://api.sandbox.push.apple.com"
    /// FCM HTTP v1: the service account's JSON key file (FCM is on with it), where messages go
    /// and where its JWT is exchanged for an access token.
    public var fcmServiceAccountFile: String?
    public var fcmEndpoint = "https://fcm.googleapis.com"
    public var fcmTokenEndpoint = "https://oauth2.googleapis.com/token"
    public var pushCoalesceMillis = 2_000
    public var pushMaxQueued = 100_000
    public var pushPerUserPerMinute = 10
    public var pushMaxRoomUsers = 1_000
    public var pushPreview = true
    public var pushMentionsOverrideMutes = true

    /// The allowed Web Push endpoint prefixes: http(s) URLs ending in `/`; `*.` may start the host.
    static func webPushEndpoints(_ list: [String], _ flag: String) throws(UsageError) -> [String] {
        for prefix in list {
            guard prefix.hasPrefix("https://") || prefix.hasPrefix("http://"), prefix.hasSuffix("/"),
                  !prefix.dropFirst(8).dropLast().contains("/") || prefix.split(separator: "/").count >= 3 else {
                throw UsageError(description: "\(flag): \"\(prefix)\" is not an http(s) URL prefix ending in /")
            }
        }
        return list
    }
    /// Most bytes of messages in one page of history (a `history` reply, a subscribe's
    /// `history_count`, an admin listing); a page always holds one message and says
    /// `has_more` when it ends early.
    public var historyPageBytes = 1 << 20
    /// Most bytes of history pages read from the store at once, server-wide.
    public var historyBytesInFlight = 64 << 20
    /// Bytes of history one client address may read per second, over all its connections
    /// (token bucket; the burst is four seconds' worth): past it, `history` is refused until
    /// the address has waited its reads off.
    public var historyBytesPerIPPerSecond = 4 << 20
    /// Bytes of messages one client address may publish per second, over all its connections
    /// and doors (REST included; burst four seconds' worth): the per-connection message rates
    /// count messages, and an address may open many connections.
    public var publishBytesPerIPPerSecond = 8 << 20
    /// `history` requests per second one native connection may make (token bucket rate)...
    public var historyRatePerSecond = 5.0
    /// ...and the burst it may make at once.
    public var historyBurst = 10.0
    /// Joins (a native subscribe, the lobby on the line and Socket.IO doors) per second one
    /// connection may make (token bucket rate): each is announced to the room's members (and
    /// in a cluster written to Redis), so a client cycling subscribe / unsubscribe or
    /// `connectUser` / `exitUser` costs every member. A leave needs a join before it, so
    /// leaves are bounded by this too and are never refused...
    public var joinRatePerSecond = 10.0
    /// ...and the burst it may make at once (never less than the door's rooms per
    /// connection, `nativeMaxRooms` on the native door: a client may join all its rooms at once).
    public var joinBurst = 20.0
    /// Fsync the store at every group commit (true) or let the OS write it back (false:
    /// acknowledged messages survive a killed process, not a power loss).
    public var syncFull = true
    /// Quiet period that ends an unframed line-door message, in milliseconds.
    public var lineQuietMillis: UInt64 = 50
    /// Largest HTTP request body (REST publish), in bytes.
    public var httpMaxBodyBytes = 1 << 20
    /// Most bytes one multi-room REST publish may store: its body's bytes times its rooms
    /// (each room stores the body once).
    public var multiPublishMaxBytes = 4 << 20
    /// The size budget of the embedded store's database file (history of every channel);
    /// nil: as the disk allows. Past it a publish is refused with a clear error.
    public var storeMaxBytes: Int? = 10 << 30
    /// A request that has started must be complete within this long, in milliseconds.
    public var httpRequestTimeoutMillis: UInt64 = 10_000
    /// A keep-alive connection with no request in progress is closed after this long.
    public var httpIdleTimeoutMillis: UInt64 = 60_000
    /// Largest WebSocket message on the native door, in bytes (close 1009 above).
    public var webSocketMaxMessageSize = 1 << 20
    /// Largest native message compressed for a permessage-deflate client (larger ones are
    /// sent uncompressed).
    public var deflateMaxMessageSize = 64 << 10
    /// Bytes all connections together may hold in WebSocket messages and HTTP request bodies
    /// not yet complete, beyond 64 KiB each.
    public var inboundBufferBytes = 256 << 20
    /// Rooms one native connection may be subscribed to at once.
    public var nativeMaxRooms = 100
    /// Publishes per second one native connection may send (token bucket rate)...
    public var nativeRatePerSecond = 50.0
    /// ...and the burst it may send at once.
    public var nativeBurst = 100.0
    /// Most history messages one subscribe may ask for (`history_count` is capped to it).
    public var nativeMaxHistoryCount = 1_000
    /// A native connection silent this long is pinged; one still silent this long after the
    /// ping is closed. Milliseconds.
    public var webSocketPingIntervalMillis: UInt64 = 30_000
    /// Socket.IO door: Engine.IO heartbeat interval and timeout (milliseconds), as announced
    /// in the open packet (EIO4: the server pings; EIO3: the client pings).
    public var socketIOPingIntervalMillis: UInt64 = 25_000
    public var socketIOPingTimeoutMillis: UInt64 = 20_000
    /// Socket.IO door: largest polling body or WebSocket message, in bytes (`maxPayload`).
    public var socketIOMaxPayload = 1_000_000
    /// Socket.IO door: an Engine.IO 4 connection that has connected no namespace this long
    /// (milliseconds) is closed, as the protocol requires.
    public var socketIOConnectTimeoutMillis: UInt64 = 45_000
    /// Socket.IO door: long-polling sessions open at once (each also counts as a connection
    /// against `maxConnections` and `maxConnectionsPerIP`).
    public var socketIOMaxPollingSessions = 10_000
    /// Socket.IO door: long-polling requests per second one IP address may make (burst 2x;
    /// 429 above), checked before a request reaches its session.
    public var socketIOPollingRatePerSecond = 200.0
    /// Path of the diagnostic bare Engine.IO 4 echo server (e.g. `/engine.io/`); nil (the
    /// default) = off.
    public var engineIOEchoPath: String?
    /// Serve the Socket.IO protocol's reference test application on `/socket.io/` instead of
    /// SocketChat (a diagnostic mode for the protocol's conformance suite; off by default).
    public var socketIOTestApp = false
    /// Path of the diagnostic WebSocket echo endpoint (e.g. `/echo`); nil (the default) = off.
    public var webSocketEchoPath: String?

    // Channels, authentication and TLS: set by the config file (`--config`, ConfigFile.swift).
    /// Channels with a secret and their own settings.
    public var channels: [ChannelSettings] = []
    /// Whether channels not in `channels` may be used (no secret, no auth). True with no
    /// config file; false once a config file lists channels, unless it says otherwise.
    public var openChannels = true

    // Abuse limits (README.md, "Limits").
    /// Connections open at once across all doors; more are accepted and closed at once.
    public var maxConnections = 10_000
    /// Connections open at once from one IP address.
    public var maxConnectionsPerIP = 1_000
    /// A connection must finish its first HTTP request / WebSocket upgrade, or on the line
    /// door say `iam:`, within this long (milliseconds), or it is closed (slow-loris).
    public var handshakeTimeoutMillis: UInt64 = 10_000
    /// A native, Socket.IO-over-WebSocket or line connection that sends no message for this
    /// long (milliseconds) is closed with a goodbye.
    public var idleTimeoutMillis: UInt64 = 300_000
    /// A connection refused more than this many times its rate within
    /// ``rateAbuseWindowMillis`` is disconnected (sustained abuse).
    public var rateAbuseFactor = 10.0
    public var rateAbuseWindowMillis: Int64 = 10_000
    /// Most members listed in one `observable_members` push; the push carries `count`
    /// with the real total when the list is cut.
    public var maxMembersListed = 1_000
    /// Open mode: most channels (not in the config file) this node holds rooms of at once; a
    /// client of one more channel is refused until rooms leave memory.
    public var maxOpenChannels = 10_000
    /// Most bytes of members (their JSON) in one `observable_members` push; the list is cut
    /// there and says `truncated: true` and `count`.
    public var maxMembersListedBytes = 256 << 10
    /// Largest native `client_data`, in bytes of JSON: it is copied into every member list
    /// and join event of every room the client joins.
    public var maxClientDataBytes = 4096
    /// REST requests per second one IP address may make (token bucket rate) and burst.
    public var restRatePerSecond = 20.0
    public var restBurst = 40.0
    /// File downloads (`GET`/`HEAD /{channel}/files/{id}`) per second one IP address may
    /// start (token bucket rate) and burst: each looks the file up and opens it on the file
    /// workers that uploads and image work share, so they are paced apart from REST, whose
    /// rate a page full of pictures would spend at once.
    public var downloadRatePerSecond = 100.0
    /// ...and the burst (twice the rate).
    public var downloadBurst = 200.0
    /// Reverse proxies (addresses or CIDR ranges) whose `X-Forwarded-For` (HTTP) and PROXY
    /// protocol header (line door) name the client; empty: nobody's (``TrustedProxies``).
    public var trustedProxies: [IPNetwork] = []
    /// The line door expects a PROXY protocol header (v1 or v2) first on every connection
    /// from a trusted proxy; from others none is read.
    public var lineProxyProtocol = false

    // Attachments (README.md, "Files and images").
    /// Where uploads are stored (in `DIR/files`); nil: the data directory. Cluster nodes
    /// share one.
    public var filesDirectory: String?
    /// `scheme://host[:port]` that attachment URLs start with; nil: the address bound, or
    /// path-only links when bound to every interface (never the uploader's `Host`).
    public var publicURL: String?
    /// Web origins (`scheme://host[:port]`, or `*` for any) whose pages may use this server
    /// besides its own (see ``WebOriginPolicy``); empty: only its own pages.
    public var allowedOrigins: [String] = []
    /// Largest uploaded file, in bytes.
    public var uploadMaxBytes = 10 << 20
    /// MIME types (or `type/*` families) an upload may be; nil: the built-in list.
    public var uploadTypes: [String]?
    /// Uploads one client address (its ``IPAddress/limitKey``) may make per minute, across
    /// all channels; a channel's own `uploadsPerMinute` limits it further there.
    public var uploadsPerMinute = 30
    /// Uploads per minute the whole server takes, from everyone.
    public var uploadsPerMinuteTotal = 600
    /// Bytes of files one client address may upload per day, across all channels (a
    /// budget refilling continuously: a day's worth at most at once).
    public var uploadBytesPerIPPerDay = 1 << 30
    /// Bytes of files the whole server takes per day, from everyone.
    public var uploadBytesTotalPerDay = 10 << 30
    /// Declared image pixels one client address may have decoded per minute, all channels
    /// together (a continuously refilling budget of image work; 429 past it).
    public var imagePixelsPerIPPerMinute = 200_000_000
    /// Declared image pixels the whole server decodes per minute, from everyone.
    public var imagePixelsTotalPerMinute = 1_000_000_000
    /// Bytes of uploads one channel may hold.
    public var filesQuotaBytes = 1 << 30
    /// An upload no message refers to is deleted this long after it was made, in seconds.
    public var uploadGraceSeconds = 86_400
    /// Seconds between two garbage collections of files.
    public var filesCollectIntervalSeconds = 600
    /// An upload must be complete within this long, in milliseconds.
    public var uploadTimeoutMillis: UInt64 = 300_000
    /// Threads for file I/O and image work.
    public var fileWorkers = 2

    // TLS.
    /// PEM certificate chain; with ``tlsKeyFile`` the HTTP door serves https:// and wss://.
    public var tlsCertificateFile: String?
    /// PEM private key matching ``tlsCertificateFile``.
    public var tlsKeyFile: String?
    /// The line door speaks TLS too, with the same certificate.
    public var lineTLS = false

    // Operations (docs/operations.md).
    /// Lowest level logged to standard error.
    public var logLevel = LogLevel.info
    /// `text` (one readable line per event) or `json` (one object per line).
    public var logFormat = LogFormat.text
    /// After SIGTERM/SIGINT, `/readyz` answers 503 for this long while everything keeps
    /// serving, so a load balancer stops sending new clients (milliseconds; 0: no wait).
    public var drainMillis: UInt64 = 0
    /// Then clients are told goodbye and get this long to go before the server stops.
    public var shutdownGraceMillis: UInt64 = 3_000
    /// Bearer token `/metrics` asks for (config file `metrics.token`); nil: open to all,
    /// under the REST rate limit.
    public var metricsToken: String?
    /// Bearer token of the admin API and dashboard (config file `admin.token`); nil: the
    /// admin API refuses everything.
    public var adminToken: String?

    // Cluster mode (README.md, "Cluster mode"): several nodes share one Redis.
    /// `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`: run as a node of a cluster on this Redis.
    public var redisURL: String?
    /// `HOST:PORT[,HOST:PORT...]`: run as a node of a cluster on this Redis Cluster (seeds).
    public var redisClusterSeeds: String?
    /// `HOST:PORT[,HOST:PORT...]`: Redis Sentinels; run as a node of a cluster on the master
    /// they name (``redisSentinelMaster``), following failovers. ``redisURL``, if also set,
    /// only gives the master's credentials, database and TLS.
    public var redisSentinels: String?
    /// The name the Sentinels monitor the master under.
    public var redisSentinelMaster = "mymaster"
    /// PEM file of the certificates a `rediss://` server must chain to; nil: the system's.
    public var redisTLSCAFile: String?
    /// A client certificate (PEM chain) and its key, for a Redis that asks for one (`tls-auth-clients yes`).
    public var redisTLSCertFile: String?
    public var redisTLSKeyFile: String?
    /// A stored message is acknowledged once this many replicas have it (`WAIT`); 0: once
    /// the master has it.
    public var redisReplicasAck = 0
    /// How long `WAIT` waits for ``redisReplicasAck`` replicas (milliseconds).
    public var redisReplicasAckTimeoutMillis = 1_000
    /// This node's name in Redis (unique per running node); random when nil.
    public var nodeID: String?
    /// `host:port` the other nodes reach this node's HTTP door at, for Engine.IO requests they
    /// hand on (no sticky sessions); nil: the bound host and port when that is one address.
    public var relayAddress: String?
    /// A node that stops renewing its presence lease for this long (milliseconds) loses its
    /// members on every node.
    public var presenceLeaseMillis = 10_000
    /// Put before every Redis key and channel (several deployments can share a Redis).
    public var redisKeyPrefix = "parley"

    /// True when the node runs in cluster mode (a Redis or a Redis Cluster is configured).
    public var isClusterMode: Bool { redisURL != nil || redisClusterSeeds != nil || redisSentinels != nil }

    public enum EventLoopCount: Sendable, Equatable {
        case cores
        case fixed(Int)
    }

    public init() {}

    /// A usage or value error, with the text to print.
    public struct UsageError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Comma-separated addresses or CIDR ranges, IPv4 or IPv6 (at most 1,000).
    static func trustedProxies(_ text: String, _ flag: String) throws(UsageError) -> [IPNetwork] {
        let items = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard items.count <= 1_000 else { throw UsageError(description: "\(flag): at most 1000 addresses or ranges") }
        var networks: [IPNetwork] = []
        for item in items {
            guard let network = IPNetwork(parsing: item) else {
                throw UsageError(description: "\(flag): \"\(item)\" is not an address or range like 10.0.0.0/8, 192.0.2.7 or 2001:db8::/32")
            }
            networks.append(network)
        }
        return networks
    }

    /// `http://host[:port]` or `https://...`, without a path (a trailing `/` is dropped).
    static func allowedOrigins(_ list: [String], _ flag: String) throws(UsageError) -> [String] {
        guard list.count <= 1_000 else { throw UsageError(description: "\(flag): at most 1000 origins") }
        for origin in list where origin != "*" && WebOriginPolicy.normalize(origin) == nil {
            throw UsageError(description: "\(flag): \"\(origin)\" is not an origin like https://app.example.com or http://localhost:3000, or *")
        }
        return list.filter { !$0.isEmpty }
    }

    static func publicURL(_ text: String, _ flag: String) throws(UsageError) -> String {
        var url = text
        while url.hasSuffix("/") { url.removeLast() }
        let lower = url.lowercased()
        let rest = lower.hasPrefix("https://") ? url.dropFirst(8) : lower.hasPrefix("http://") ? url.dropFirst(7) : nil
        guard let rest, !rest.isEmpty, !rest.contains("/"), !rest.contains("?"), !rest.contains("#"),
              rest.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw UsageError(description: "\(flag) must look like https://chat.example.com or http://host:8080, got \"\(text)\"")
        }
        return url
    }

    /// MIME types or `type/*` families, lowercased.
    static func uploadTypes(_ list: [String], _ flag: String) throws(UsageError) -> [String] {
        var types: [String] = []
        for raw in list {
            let type = raw.trimmingCharacters(in: .whitespaces).lowercased()
            let halves = type.split(separator: "/", omittingEmptySubsequences: false)
            guard halves.count == 2, !halves[0].isEmpty, !halves[1].isEmpty, halves[0] != "*",
                  type.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                throw UsageError(description: "\(flag) takes MIME types such as image/png or image/*, got \"\(raw)\"")
            }
            types.append(type)
        }
        guard !types.isEmpty else { throw UsageError(description: "\(flag) needs at least one type") }
        return types
    }

    /// The `--help` text: a line per setting of ``ServerSetting/table`` that has a flag.
    public static var usage: String {
        var lines = ["usage: parley serve [options]", "", "Starts the Parley chat server.", "", "options (each also read from its environment variable):"]
        for setting in ServerSetting.table {
            guard let flag = setting.flag, let env = setting.environment else { continue }
            let left = "  \(flag) \(setting.placeholder)"
            // A long flag keeps two spaces before its text (padding to 32 would cut it).
            lines.append(left.padding(toLength: max(32, left.count + 2), withPad: " ", startingAt: 0)
                         + setting.help + " (default \(setting.defaultText))  [\(env)]")
        }
        lines.append("  --help                        show this help")
        lines.append("")
        lines.append("Each option also has a config-file path (README.md, \"parley serve options\"); these only that:")
        for setting in ServerSetting.table where setting.flag == nil {
            guard let path = setting.path else { continue }
            let left = "  \(path)"
            lines.append(left.padding(toLength: max(32, left.count + 2), withPad: " ", startingAt: 0)
                         + setting.help + " (default \(setting.defaultText))")
        }
        return lines.joined(separator: "\n")
    }

    /// Reads the config file (if any), then the environment, then the flags. Throws a usage error for unknown flags and bad
    /// values; `--help` is reported as `nil`.
    public static func parse(arguments: [String], environment: [String: String]) throws(UsageError) -> ServerConfiguration? {
        var configuration = ServerConfiguration()
        if let path = configFilePath(arguments: arguments, environment: environment) {
            try ConfigFile.load(path: path, into: &configuration)
        }
        for setting in ServerSetting.table {
            if let env = setting.environment, let value = environment[env] {
                try setting.apply(&configuration, .text(value), env)
            }
        }
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--help" || argument == "-h" { return nil }
            var flag = argument, inlineValue: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                flag = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            guard let setting = ServerSetting.table.first(where: { $0.flag == flag }) else {
                throw UsageError(description: "unknown option \(argument) (see parley serve --help)")
            }
            let value: String
            if let inlineValue {
                value = inlineValue
            } else if setting.isSwitch {
                value = ""
            } else {
                index += 1
                guard index < arguments.count else { throw UsageError(description: "\(flag) needs a value") }
                value = arguments[index]
            }
            try setting.apply(&configuration, .text(value), flag)
            index += 1
        }
        if let problem = configuration.clusterProblem { throw UsageError(description: problem) }
        return configuration
    }

    /// What open mode exposes when the server is bound to an address other than loopback, or
    /// nil (closed mode, or loopback): any channel can then be used by anyone, without
    /// authentication, and `/metrics` too unless it has a token. Legitimate (a trusted network,
    /// a demo), but never silent: the server logs it as a warning at start.
    public var openModeExposure: String? {
        guard openChannels, !Self.isLoopback(host) else { return nil }
        var exposed = "any channel can be used by anyone, without authentication"
        if metricsToken == nil { exposed += "; /metrics is open (no metrics.token)" }
        return "\(exposed); list the channels in a config file (--config) or bind to 127.0.0.1"
    }

    /// A loopback name or address: `localhost` (and `*.localhost`, which resolvers keep on
    /// loopback), 127.0.0.0/8, `::1` (bracketed or not). The one rule for the bind address
    /// (the open-mode warning) and for request hosts (``WebOriginPolicy``).
    static func isLoopback(_ host: String) -> Bool {
        let lower = host.lowercased()
        if lower == "localhost" || lower.hasSuffix(".localhost") || lower == "::1" || lower == "[::1]" { return true }
        let parts = lower.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// Why the cluster settings cannot be used together, or nil.
    public var clusterProblem: String? {
        if redisURL != nil && redisClusterSeeds != nil {
            return "\(ServerSetting.flag(of: \Self.redisURL)) and \(ServerSetting.flag(of: \Self.redisClusterSeeds)) cannot be used together (one Redis, or one Redis Cluster)"
        }
        if redisSentinels != nil && redisClusterSeeds != nil {
            return "\(ServerSetting.flag(of: \Self.redisSentinels)) and \(ServerSetting.flag(of: \Self.redisClusterSeeds)) cannot be used together (a Redis Cluster fails over by itself)"
        }
        return nil
    }
}
