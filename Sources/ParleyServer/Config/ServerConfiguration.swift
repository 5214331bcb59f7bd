import ParleyCore
import ParleyLog
import ParleyRedis

/// Everything `parley serve` can be told. Each flag has a `PARLEY_*` environment variable;
/// a flag wins over the variable.
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
    /// Most bytes of messages in one page of history (a `history` reply, a subscribe's
    /// `history_count`, an admin listing); a page always holds one message and says
    /// `has_more` when it ends early.
    public var historyPageBytes = 1 << 20
    /// `history` requests per second one native connection may make (token bucket rate)...
    public var historyRatePerSecond = 5.0
    /// ...and the burst it may make at once.
    public var historyBurst = 10.0
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
    /// Most bytes of members (their JSON) in one `observable_members` push; the list is cut
    /// there and says `truncated: true` and `count`.
    public var maxMembersListedBytes = 256 << 10
    /// Largest native `client_data`, in bytes of JSON: it is copied into every member list
    /// and join event of every room the client joins.
    public var maxClientDataBytes = 4096
    /// REST requests per second one IP address may make (token bucket rate) and burst.
    public var restRatePerSecond = 20.0
    public var restBurst = 40.0
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
    /// This node's name in Redis (unique per running node); random when nil.
    public var nodeID: String?
    /// A node that stops renewing its presence lease for this long (milliseconds) loses its
    /// members on every node.
    public var presenceLeaseMillis = 10_000
    /// Put before every Redis key and channel (several deployments can share a Redis).
    public var redisKeyPrefix = "parley"

    /// True when the node runs in cluster mode (a Redis or a Redis Cluster is configured).
    public var isClusterMode: Bool { redisURL != nil || redisClusterSeeds != nil }

    public enum EventLoopCount: Sendable, Equatable {
        case cores
        case fixed(Int)
    }

    public init() {}

    /// A usage or value error, with the text to print.
    public struct UsageError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    struct Option: Sendable {
        let flag: String
        let env: String
        let value: String
        let help: String
        let apply: @Sendable (inout ServerConfiguration, String) throws(UsageError) -> Void
    }

    static let options: [Option] = [
        // Read before everything else by `parse` (the file is the lowest layer).
        Option(flag: "--config", env: "PARLEY_CONFIG", value: "FILE", help: "JSON config file: channels, secrets, limits, TLS") { _, _ throws(UsageError) in },
        Option(flag: "--host", env: "PARLEY_HOST", value: "ADDR", help: "address to bind (default 127.0.0.1; 0.0.0.0 for all)") { c, v throws(UsageError) in
            c.host = v
        },
        Option(flag: "--http-port", env: "PARLEY_HTTP_PORT", value: "PORT", help: "HTTP/WebSocket port (default 8080; 0 picks a free port)") { c, v throws(UsageError) in
            c.httpPort = try port(v, "--http-port")
        },
        Option(flag: "--line-port", env: "PARLEY_LINE_PORT", value: "PORT", help: "line-protocol TCP port (default 8081; 0 picks a free port)") { c, v throws(UsageError) in
            c.linePort = try port(v, "--line-port")
        },
        Option(flag: "--data", env: "PARLEY_DATA", value: "DIR", help: "data directory (default ./parley-data)") { c, v throws(UsageError) in
            guard !v.isEmpty else { throw UsageError(description: "--data needs a directory") }
            c.dataDirectory = v
        },
        Option(flag: "--loops", env: "PARLEY_LOOPS", value: "N", help: "event loops (threads); default one per core") { c, v throws(UsageError) in
            c.loops = .fixed(try integer(v, "--loops", 1...256))
        },
        Option(flag: "--lobby", env: "PARLEY_LOBBY", value: "CHANNEL/ROOM", help: "room shared by the line and Socket.IO doors (default demo/observable-room)") { c, v throws(UsageError) in
            guard let key = RoomKey(parsing: v) else { throw UsageError(description: "--lobby must look like CHANNEL/ROOM, got \"\(v)\"") }
            c.lobby = key
        },
        Option(flag: "--max-line-length", env: "PARLEY_MAX_LINE_LENGTH", value: "BYTES", help: "longest line-door line (default 16384)") { c, v throws(UsageError) in
            c.lineMaxLength = try integer(v, "--max-line-length", 16...(16 << 20))
        },
        Option(flag: "--line-rate", env: "PARLEY_LINE_RATE", value: "N", help: "line-door messages per second per connection (default 20, burst 2x)") { c, v throws(UsageError) in
            let rate = try integer(v, "--line-rate", 1...1_000_000)
            c.lineRatePerSecond = Double(rate)
            c.lineBurst = Double(rate * 2)
        },
        Option(flag: "--write-queue-limit", env: "PARLEY_WRITE_QUEUE_LIMIT", value: "BYTES", help: "unsent bytes per connection before it is cut off (default 4194304)") { c, v throws(UsageError) in
            c.writeQueueLimit = try integer(v, "--write-queue-limit", 4096...(1 << 30))
        },
        Option(flag: "--max-message-size", env: "PARLEY_MAX_MESSAGE_SIZE", value: "BYTES", help: "largest WebSocket message (default 1048576; close 1009 above)") { c, v throws(UsageError) in
            c.webSocketMaxMessageSize = try integer(v, "--max-message-size", 1024...(64 << 20))
        },
        Option(flag: "--max-rooms", env: "PARLEY_MAX_ROOMS", value: "N", help: "rooms one native connection may join (default 100)") { c, v throws(UsageError) in
            c.nativeMaxRooms = try integer(v, "--max-rooms", 1...100_000)
        },
        Option(flag: "--publish-rate", env: "PARLEY_PUBLISH_RATE", value: "N", help: "native publishes per second per connection (default 50, burst 2x)") { c, v throws(UsageError) in
            let rate = try integer(v, "--publish-rate", 1...10_000_000)
            c.nativeRatePerSecond = Double(rate)
            c.nativeBurst = Double(rate * 2)
        },
        Option(flag: "--history", env: "PARLEY_HISTORY", value: "N", help: "recent messages cached in memory per room (default 1000)") { c, v throws(UsageError) in
            c.historyCapacity = try integer(v, "--history", 0...1_000_000)
        },
        Option(flag: "--history-room-memory", env: "PARLEY_HISTORY_ROOM_MEMORY", value: "BYTES", help: "bytes of recent messages cached per room (default 1048576)") { c, v throws(UsageError) in
            c.historyBytesPerRoom = try integer(v, "--history-room-memory", 0...(1 << 40))
        },
        Option(flag: "--history-memory", env: "PARLEY_HISTORY_MEMORY", value: "BYTES", help: "bytes of recent messages cached across all rooms (default 268435456)") { c, v throws(UsageError) in
            c.historyBytesTotal = try integer(v, "--history-memory", 0...(1 << 50))
        },
        Option(flag: "--room-backlog", env: "PARLEY_ROOM_BACKLOG", value: "N", help: "a room's deliveries in progress before its publishers are slowed (default 4096)") { c, v throws(UsageError) in
            c.roomBacklog = try integer(v, "--room-backlog", 2...100_000_000)
        },
        Option(flag: "--retention-count", env: "PARLEY_RETENTION_COUNT", value: "N", help: "stored messages kept per room (default: all)") { c, v throws(UsageError) in
            c.retentionCount = try integer(v, "--retention-count", 1...Int(Int32.max))
        },
        Option(flag: "--retention-days", env: "PARLEY_RETENTION_DAYS", value: "D", help: "days a stored message is kept (default: forever)") { c, v throws(UsageError) in
            c.retentionDays = try integer(v, "--retention-days", 1...100_000)
        },
        Option(flag: "--join-history", env: "PARLEY_JOIN_HISTORY", value: "N", help: "lobby messages a line user gets on joining (default 20)") { c, v throws(UsageError) in
            c.joinHistory = try integer(v, "--join-history", 0...1_000)
        },
        Option(flag: "--max-history-count", env: "PARLEY_MAX_HISTORY_COUNT", value: "N", help: "most history_count one subscribe may ask for (default 1000)") { c, v throws(UsageError) in
            c.nativeMaxHistoryCount = try integer(v, "--max-history-count", 0...1_000_000)
        },
        Option(flag: "--history-page-bytes", env: "PARLEY_HISTORY_PAGE_BYTES", value: "BYTES", help: "most bytes of messages in one history page (default 1048576)") { c, v throws(UsageError) in
            c.historyPageBytes = try integer(v, "--history-page-bytes", 1024...(1 << 30))
        },
        Option(flag: "--history-rate", env: "PARLEY_HISTORY_RATE", value: "N", help: "native history requests per second per connection (default 5, burst 2x)") { c, v throws(UsageError) in
            let rate = try integer(v, "--history-rate", 1...1_000_000)
            c.historyRatePerSecond = Double(rate)
            c.historyBurst = Double(rate * 2)
        },
        Option(flag: "--max-body-size", env: "PARLEY_MAX_BODY_SIZE", value: "BYTES", help: "largest HTTP request body (default 1048576; 413 above)") { c, v throws(UsageError) in
            c.httpMaxBodyBytes = try integer(v, "--max-body-size", 1024...(1 << 30))
        },
        Option(flag: "--max-store-bytes", env: "PARLEY_MAX_STORE_BYTES", value: "BYTES", help: "size budget of the embedded store (all history; default 10737418240, 0: as the disk allows)") { c, v throws(UsageError) in
            let bytes = try integer(v, "--max-store-bytes", 0...(1 << 50))
            guard bytes == 0 || bytes >= 1 << 20 else { throw UsageError(description: "--max-store-bytes must be 0 (no budget) or at least 1048576") }
            c.storeMaxBytes = bytes == 0 ? nil : bytes
        },
        Option(flag: "--max-multi-publish-bytes", env: "PARLEY_MAX_MULTI_PUBLISH_BYTES", value: "BYTES", help: "body bytes x rooms one REST publish to several rooms may store (default 4194304; 413 above)") { c, v throws(UsageError) in
            c.multiPublishMaxBytes = try integer(v, "--max-multi-publish-bytes", 1024...(1 << 34))
        },
        Option(flag: "--socketio-max-payload", env: "PARLEY_SOCKETIO_MAX_PAYLOAD", value: "BYTES", help: "largest Socket.IO polling body or message (default 1000000)") { c, v throws(UsageError) in
            c.socketIOMaxPayload = try integer(v, "--socketio-max-payload", 1024...(64 << 20))
        },
        Option(flag: "--max-connections", env: "PARLEY_MAX_CONNECTIONS", value: "N", help: "connections open at once, all doors (default 10000)") { c, v throws(UsageError) in
            c.maxConnections = try integer(v, "--max-connections", 1...10_000_000)
        },
        Option(flag: "--max-connections-per-ip", env: "PARLEY_MAX_CONNECTIONS_PER_IP", value: "N", help: "connections open at once from one IP (default 1000)") { c, v throws(UsageError) in
            c.maxConnectionsPerIP = try integer(v, "--max-connections-per-ip", 1...10_000_000)
        },
        Option(flag: "--handshake-timeout", env: "PARLEY_HANDSHAKE_TIMEOUT", value: "SECONDS", help: "time to finish the HTTP request/upgrade or line iam: (default 10)") { c, v throws(UsageError) in
            c.handshakeTimeoutMillis = try millis(v, "--handshake-timeout")
        },
        Option(flag: "--idle-timeout", env: "PARLEY_IDLE_TIMEOUT", value: "SECONDS", help: "close a connection silent this long (default 300)") { c, v throws(UsageError) in
            c.idleTimeoutMillis = try millis(v, "--idle-timeout")
        },
        Option(flag: "--rate-abuse-factor", env: "PARLEY_RATE_ABUSE_FACTOR", value: "N", help: "disconnect after N x the message rate refused within 10 s (default 10)") { c, v throws(UsageError) in
            c.rateAbuseFactor = Double(try integer(v, "--rate-abuse-factor", 1...1_000_000))
        },
        Option(flag: "--max-members-listed", env: "PARLEY_MAX_MEMBERS_LISTED", value: "N", help: "members listed in one observable_members (default 1000)") { c, v throws(UsageError) in
            c.maxMembersListed = try integer(v, "--max-members-listed", 1...10_000_000)
        },
        Option(flag: "--max-members-list-bytes", env: "PARLEY_MAX_MEMBERS_LIST_BYTES", value: "BYTES", help: "bytes of members in one observable_members (default 262144)") { c, v throws(UsageError) in
            c.maxMembersListedBytes = try integer(v, "--max-members-list-bytes", 1024...(1 << 30))
        },
        Option(flag: "--max-client-data", env: "PARLEY_MAX_CLIENT_DATA", value: "BYTES", help: "largest native client_data, as JSON (default 4096)") { c, v throws(UsageError) in
            c.maxClientDataBytes = try integer(v, "--max-client-data", 2...(1 << 20))
        },
        Option(flag: "--rest-rate", env: "PARLEY_REST_RATE", value: "N", help: "REST requests per second per IP (default 20, burst 2x; 429 above)") { c, v throws(UsageError) in
            let rate = try integer(v, "--rest-rate", 1...10_000_000)
            c.restRatePerSecond = Double(rate)
            c.restBurst = Double(rate * 2)
        },
        Option(flag: "--trusted-proxies", env: "PARLEY_TRUSTED_PROXIES", value: "LIST", help: "reverse proxies (addresses or CIDRs, e.g. 10.0.0.0/8,::1) whose X-Forwarded-For / PROXY header names the client (default none)") { c, v throws(UsageError) in
            c.trustedProxies = try trustedProxies(v, "--trusted-proxies")
        },
        Option(flag: "--line-proxy-protocol", env: "PARLEY_LINE_PROXY_PROTOCOL", value: "", help: "line connections from a trusted proxy start with a PROXY protocol v1/v2 header") { c, v throws(UsageError) in
            c.lineProxyProtocol = try switchValue(v, "--line-proxy-protocol", env: "PARLEY_LINE_PROXY_PROTOCOL")
        },
        Option(flag: "--files", env: "PARLEY_FILES", value: "DIR", help: "where uploads are stored (default: the data directory; share it between cluster nodes)") { c, v throws(UsageError) in
            guard !v.isEmpty else { throw UsageError(description: "--files needs a directory") }
            c.filesDirectory = v
        },
        Option(flag: "--public-url", env: "PARLEY_PUBLIC_URL", value: "URL", help: "http(s)://host[:port] that attachment links start with") { c, v throws(UsageError) in
            c.publicURL = try publicURL(v, "--public-url")
        },
        Option(flag: "--allowed-origins", env: "PARLEY_ALLOWED_ORIGINS", value: "LIST", help: "web origins besides this server's own whose pages may use it, e.g. https://app.example.com (* for any; default none)") { c, v throws(UsageError) in
            c.allowedOrigins = try allowedOrigins(v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }, "--allowed-origins")
        },
        Option(flag: "--max-upload-size", env: "PARLEY_MAX_UPLOAD_SIZE", value: "BYTES", help: "largest uploaded file (default 10485760; 413 above)") { c, v throws(UsageError) in
            c.uploadMaxBytes = try integer(v, "--max-upload-size", 1...(16 << 30))
        },
        Option(flag: "--upload-types", env: "PARLEY_UPLOAD_TYPES", value: "LIST", help: "allowed upload types, e.g. image/*,application/pdf (default: images, PDF, text, office)") { c, v throws(UsageError) in
            c.uploadTypes = try uploadTypes(v.split(separator: ",").map { String($0) }, "--upload-types")
        },
        Option(flag: "--upload-rate", env: "PARLEY_UPLOAD_RATE", value: "N", help: "uploads per minute per client address, all channels together (default 30; 429 above)") { c, v throws(UsageError) in
            c.uploadsPerMinute = try integer(v, "--upload-rate", 1...1_000_000)
        },
        Option(flag: "--upload-rate-total", env: "PARLEY_UPLOAD_RATE_TOTAL", value: "N", help: "uploads per minute the whole server takes (default 600; 429 above)") { c, v throws(UsageError) in
            c.uploadsPerMinuteTotal = try integer(v, "--upload-rate-total", 1...100_000_000)
        },
        Option(flag: "--upload-bytes-per-ip", env: "PARLEY_UPLOAD_BYTES_PER_IP", value: "BYTES", help: "bytes of files one client address may upload per day, all channels together (default 1073741824; 429 above)") { c, v throws(UsageError) in
            c.uploadBytesPerIPPerDay = try integer(v, "--upload-bytes-per-ip", 1...(1 << 50))
        },
        Option(flag: "--upload-bytes-total", env: "PARLEY_UPLOAD_BYTES_TOTAL", value: "BYTES", help: "bytes of files the whole server takes per day (default 10737418240; 429 above)") { c, v throws(UsageError) in
            c.uploadBytesTotalPerDay = try integer(v, "--upload-bytes-total", 1...(1 << 50))
        },
        Option(flag: "--files-quota", env: "PARLEY_FILES_QUOTA", value: "BYTES", help: "bytes of uploads one channel may hold (default 1073741824; 429 above)") { c, v throws(UsageError) in
            c.filesQuotaBytes = try integer(v, "--files-quota", 0...(1 << 50))
        },
        Option(flag: "--upload-grace", env: "PARLEY_UPLOAD_GRACE", value: "SECONDS", help: "keep uploads no message refers to this long (default 86400)") { c, v throws(UsageError) in
            c.uploadGraceSeconds = try integer(v, "--upload-grace", 1...(365 * 86_400))
        },
        Option(flag: "--file-workers", env: "PARLEY_FILE_WORKERS", value: "N", help: "threads for file I/O and image work (default 2)") { c, v throws(UsageError) in
            c.fileWorkers = try integer(v, "--file-workers", 1...64)
        },
        Option(flag: "--tls-cert", env: "PARLEY_TLS_CERT", value: "FILE", help: "PEM certificate chain: serve https:// and wss:// (needs --tls-key)") { c, v throws(UsageError) in
            guard !v.isEmpty else { throw UsageError(description: "--tls-cert needs a file") }
            c.tlsCertificateFile = v
        },
        Option(flag: "--tls-key", env: "PARLEY_TLS_KEY", value: "FILE", help: "PEM private key for --tls-cert") { c, v throws(UsageError) in
            guard !v.isEmpty else { throw UsageError(description: "--tls-key needs a file") }
            c.tlsKeyFile = v
        },
        Option(flag: "--line-tls", env: "PARLEY_LINE_TLS", value: "", help: "the line door speaks TLS too (same certificate)") { c, v throws(UsageError) in
            switch v {
            case "", "1", "true", "yes": c.lineTLS = true
            case "0", "false", "no": c.lineTLS = false
            default: throw UsageError(description: "--line-tls takes no value (PARLEY_LINE_TLS=1 or 0), got \"\(v)\"")
            }
        },
        Option(flag: "--sync", env: "PARLEY_SYNC", value: "full|normal", help: "fsync each group commit (full, default) or not (normal)") { c, v throws(UsageError) in
            guard v == "full" || v == "normal" else { throw UsageError(description: "--sync must be full or normal, got \"\(v)\"") }
            c.syncFull = v == "full"
        },
        Option(flag: "--log-level", env: "PARLEY_LOG_LEVEL", value: "LEVEL", help: "trace, debug, info (default), warn or error; to standard error") { c, v throws(UsageError) in
            guard let level = LogLevel(name: v) else {
                throw UsageError(description: "--log-level must be trace, debug, info, warn or error, got \"\(v)\"")
            }
            c.logLevel = level
        },
        Option(flag: "--log-format", env: "PARLEY_LOG_FORMAT", value: "text|json", help: "log lines as text (default) or one JSON object each") { c, v throws(UsageError) in
            guard let format = LogFormat(rawValue: v) else { throw UsageError(description: "--log-format must be text or json, got \"\(v)\"") }
            c.logFormat = format
        },
        Option(flag: "--drain-time", env: "PARLEY_DRAIN_TIME", value: "SECONDS", help: "on SIGTERM, /readyz says 503 this long before clients are told to go (default 0)") { c, v throws(UsageError) in
            c.drainMillis = try millis(v, "--drain-time", allowZero: true)
        },
        Option(flag: "--shutdown-timeout", env: "PARLEY_SHUTDOWN_TIMEOUT", value: "SECONDS", help: "then how long clients get to leave before the server stops (default 3)") { c, v throws(UsageError) in
            c.shutdownGraceMillis = try millis(v, "--shutdown-timeout", allowZero: true)
        },
        Option(flag: "--redis", env: "PARLEY_REDIS", value: "URL", help: "cluster mode on Redis: redis://HOST:PORT[/DB] (default off: one node, SQLite)") { c, v throws(UsageError) in
            do throws(RedisError) { _ = try RedisEndpoint(url: v) } catch { throw UsageError(description: "--redis: \(error.message)") }
            c.redisURL = v
        },
        Option(flag: "--redis-cluster", env: "PARLEY_REDIS_CLUSTER", value: "HOST:PORT,...", help: "cluster mode on a Redis Cluster, given seed nodes") { c, v throws(UsageError) in
            do throws(RedisError) { _ = try RedisEndpoint.seeds(v) } catch { throw UsageError(description: "--redis-cluster: \(error.message)") }
            c.redisClusterSeeds = v
        },
        Option(flag: "--node-id", env: "PARLEY_NODE_ID", value: "ID", help: "this node's name in the cluster (default random; letters, digits, . _ -)") { c, v throws(UsageError) in
            guard RedisPresenceOptions.isValidNodeID(v) else {
                throw UsageError(description: "--node-id must be 1-64 letters, digits, '.', '_' or '-', got \"\(v)\"")
            }
            c.nodeID = v
        },
        Option(flag: "--presence-lease", env: "PARLEY_PRESENCE_LEASE", value: "SECONDS", help: "a dead node's members leave everywhere after about this long (default 10)") { c, v throws(UsageError) in
            let millis = try millis(v, "--presence-lease")
            guard millis >= 1_500, millis <= 3_600_000 else {
                throw UsageError(description: "--presence-lease must be between 1.5 and 3600 seconds, got \"\(v)\"")
            }
            c.presenceLeaseMillis = Int(millis)
        },
        Option(flag: "--redis-prefix", env: "PARLEY_REDIS_PREFIX", value: "PREFIX", help: "prefix of Parley's Redis keys (default parley)") { c, v throws(UsageError) in
            guard RedisKeyspace.isValidPrefix(v) else {
                throw UsageError(description: "--redis-prefix must be 1-64 letters, digits, '.', '_', '-' or ':', got \"\(v)\"")
            }
            c.redisKeyPrefix = v
        },
        Option(flag: "--ws-echo-path", env: "PARLEY_WS_ECHO_PATH", value: "PATH", help: "serve a diagnostic WebSocket echo endpoint at PATH (default off)") { c, v throws(UsageError) in
            guard v.hasPrefix("/"), !v.contains("?"), !v.contains(" ") else {
                throw UsageError(description: "--ws-echo-path must be a path starting with /, got \"\(v)\"")
            }
            c.webSocketEchoPath = v
        },
    ] + socketIOOptions

    private static func integer(_ text: String, _ flag: String, _ range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw UsageError(description: "\(flag) must be a whole number in \(range.lowerBound)...\(range.upperBound), got \"\(text)\"")
        }
        return value
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

    static func switchValue(_ v: String, _ flag: String, env: String) throws(UsageError) -> Bool {
        switch v {
        case "", "1", "true", "yes": return true
        case "0", "false", "no": return false
        default: throw UsageError(description: "\(flag) takes no value (\(env)=1 or 0), got \"\(v)\"")
        }
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

    /// Seconds, fractions allowed (e.g. 0.5), as milliseconds.
    private static func millis(_ text: String, _ flag: String, allowZero: Bool = false) throws(UsageError) -> UInt64 {
        guard let seconds = Double(text), seconds > 0 || (allowZero && seconds == 0), seconds <= 86_400 * 365 else {
            throw UsageError(description: "\(flag) must be a number of seconds \(allowZero ? "(0 or more)" : "above 0"), got \"\(text)\"")
        }
        return UInt64((seconds * 1000).rounded())
    }

    private static func port(_ text: String, _ flag: String) throws(UsageError) -> Int {
        try integer(text, flag, 0...65535)
    }

    /// The `--help` text.
    public static var usage: String {
        var lines = ["usage: parley serve [options]", "", "Starts the Parley chat server.", "", "options (each also read from its environment variable):"]
        for option in options {
            let left = "  \(option.flag) \(option.value)"
            // A long flag keeps two spaces before its text (padding to 32 would cut it).
            lines.append(left.padding(toLength: max(32, left.count + 2), withPad: " ", startingAt: 0) + option.help + "  [\(option.env)]")
        }
        lines.append("  --help                        show this help")
        return lines.joined(separator: "\n")
    }

    /// Reads the config file (if any), then the environment, then the flags. Throws a usage error for unknown flags and bad
    /// values; `--help` is reported as `nil`.
    public static func parse(arguments: [String], environment: [String: String]) throws(UsageError) -> ServerConfiguration? {
        var configuration = ServerConfiguration()
        if let path = configFilePath(arguments: arguments, environment: environment) {
            try ConfigFile.load(path: path, into: &configuration)
        }
        for option in options {
            if let value = environment[option.env] {
                do { try option.apply(&configuration, value) } catch {
                    throw UsageError(description: "\(option.env): \(error.description)")
                }
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
            guard let option = options.first(where: { $0.flag == flag }) else {
                throw UsageError(description: "unknown option \(argument) (see parley serve --help)")
            }
            let value: String
            if let inlineValue {
                value = inlineValue
            } else if option.value.isEmpty {
                value = ""  // a switch
            } else {
                index += 1
                guard index < arguments.count else { throw UsageError(description: "\(flag) needs a value") }
                value = arguments[index]
            }
            try option.apply(&configuration, value)
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
            return "--redis and --redis-cluster cannot be used together (one Redis, or one Redis Cluster)"
        }
        return nil
    }
}
