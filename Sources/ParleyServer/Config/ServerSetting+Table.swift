import ParleyCore
import ParleyLog
import ParleyRedis

extension ServerSetting {
    /// Every setting of `parley serve`, in `--help` order. The only place a flag, its
    /// variable, its config-file path and its rule are written: parsing (flags, `PARLEY_*`,
    /// the config file), `--help`, the reload diff and the README's option table come from
    /// here (`SettingsTableTests` checks the README against it).
    ///
    /// Config-file paths are nested by component (`doors.native.*`, `doors.line.*`,
    /// `doors.http.*`, `socketio.*`, `history.*`, `store.*`, `files.*`, `limits.*`,
    /// `cluster.*`, ...); `aliases` are the keys earlier versions read, still accepted.
    /// A file applies its settings in this order, so a burst row after its rate wins.
    static let table: [ServerSetting] = [
        .configFile(configFlag),

        // MARK: Server and doors
        ServerSetting("--host", "ADDR", path: "server.host", \.host, .string("an address or host name"), reloadable: false,
                      help: "address to bind (0.0.0.0 for all)"),
        ServerSetting("--http-port", "PORT", path: "doors.http.port", \.httpPort, .port, reloadable: false,
                      help: "HTTP/WebSocket port (0 picks a free port)"),
        ServerSetting("--line-port", "PORT", path: "doors.line.port", \.linePort, .port, reloadable: false,
                      help: "line-protocol TCP port (0 picks a free port)"),
        ServerSetting("--data", "DIR", path: "store.directory", \.dataDirectory, .string("a directory"), reloadable: false,
                      help: "data directory"),
        ServerSetting("--loops", "N", path: "server.loops", \.loops,
                      SettingRule<Int>.integer(1...256).map({ .fixed($0) }, show: { if case .fixed(let n) = $0 { String(n) } else { "cores" } }),
                      reloadable: false, defaultText: "one per core", help: "event loops (threads)"),
        ServerSetting("--lobby", "CHANNEL/ROOM", path: "doors.lobby", \.lobby,
                      .choice("CHANNEL/ROOM (each 1-128 bytes, no /)", { RoomKey(parsing: $0) }, show: \.description),
                      reloadable: false, help: "room shared by the line and Socket.IO doors"),

        // MARK: Line door
        ServerSetting("--max-line-length", "BYTES", path: "doors.line.max_line_bytes", aliases: ["limits.lineMaxLength"],
                      \.lineMaxLength, .integer(16...(16 << 20)), help: "longest line-door line"),
        ServerSetting("--line-rate", "N", path: "doors.line.rate_per_second", aliases: ["limits.lineRatePerSecond"],
                      \.lineRatePerSecond, .number(1...1_000_000), burst: \.lineBurst,
                      help: "line-door messages per second per connection"),
        ServerSetting(nil, path: "doors.line.burst", aliases: ["limits.lineBurst"], \.lineBurst, .number(1...2_000_000),
                      defaultText: "twice the rate", help: "line-door messages one connection may send at once"),
        ServerSetting("--join-history", "N", path: "doors.line.join_history", aliases: ["limits.joinHistory"],
                      \.joinHistory, .integer(0...1_000), help: "lobby messages a line user gets on joining"),

        // MARK: Every connection
        ServerSetting("--write-queue-limit", "BYTES", path: "limits.write_queue_bytes", aliases: ["limits.writeQueueLimit"],
                      \.writeQueueLimit, .integer(4096...(1 << 30)), help: "unsent bytes per connection before it is cut off"),

        // MARK: Native door (Scaledrone API over WebSocket)
        ServerSetting("--max-message-size", "BYTES", path: "doors.native.max_message_bytes", aliases: ["limits.webSocketMaxMessageSize"],
                      \.webSocketMaxMessageSize, .integer(1024...(64 << 20)), help: "largest native WebSocket message (close 1009 above)"),
        ServerSetting("--deflate-max-message-size", "BYTES", path: "doors.native.deflate_max_message_bytes",
                      \.deflateMaxMessageSize, .integer(0...(64 << 20)),
                      help: "largest native message sent compressed to a client that negotiated permessage-deflate; larger ones go uncompressed (each connection compresses for itself: a large message to many clients cost the server far more than its sender) (0: none)"),
        ServerSetting("--inbound-buffer-bytes", "BYTES", path: "limits.inbound_buffer_bytes", \.inboundBufferBytes,
                      .integer((1 << 20)...(1 << 40)), reloadable: false,
                      help: "bytes all connections together may hold in WebSocket messages and HTTP request bodies not complete yet, beyond 64 KiB each; a connection that needs more past it is closed (WebSocket 1013, HTTP 503)"),
        ServerSetting("--max-rooms", "N", path: "doors.native.max_rooms", aliases: ["limits.nativeMaxRooms"],
                      \.nativeMaxRooms, .integer(1...100_000),
                      help: "rooms one native connection may be subscribed to at once: a limit per connection, not per node (a node holds at most \(HubConfiguration().maxRooms) rooms in memory, fixed)"),
        ServerSetting("--publish-rate", "N", path: "doors.native.publish_rate_per_second", aliases: ["limits.nativeRatePerSecond"],
                      \.nativeRatePerSecond, .number(1...10_000_000), burst: \.nativeBurst,
                      help: "native and Socket.IO publishes per second per connection"),
        ServerSetting(nil, path: "doors.native.publish_burst", aliases: ["limits.nativeBurst"], \.nativeBurst, .number(1...20_000_000),
                      defaultText: "twice the rate", help: "native and Socket.IO publishes one connection may send at once"),
        ServerSetting("--max-history-count", "N", path: "doors.native.max_history_count", aliases: ["limits.nativeMaxHistoryCount"],
                      \.nativeMaxHistoryCount, .integer(0...1_000_000), help: "most history_count one subscribe may ask for"),
        ServerSetting("--history-rate", "N", path: "doors.native.history_rate_per_second", aliases: ["limits.historyRatePerSecond"],
                      \.historyRatePerSecond, .number(1...1_000_000), burst: \.historyBurst,
                      help: "native history requests per second per connection"),
        ServerSetting(nil, path: "doors.native.history_burst", aliases: ["limits.historyBurst"], \.historyBurst, .number(1...2_000_000),
                      defaultText: "twice the rate", help: "native history requests one connection may make at once"),
        ServerSetting("--join-rate", "N", path: "limits.join_rate_per_second", \.joinRatePerSecond, .number(0.1...1_000_000),
                      burst: \.joinBurst,
                      help: "joins per second per connection, on every door: native subscribes, the lobby (line, Socket.IO connectUser); each is announced to the room's members, and leaves need a join first"),
        ServerSetting(nil, path: "limits.join_burst", \.joinBurst, .number(1...2_000_000),
                      defaultText: "twice the rate, and at least --max-rooms on the native door",
                      help: "joins one connection may make at once"),
        ServerSetting("--max-client-data", "BYTES", path: "doors.native.max_client_data_bytes", aliases: ["limits.maxClientDataBytes"],
                      \.maxClientDataBytes, .integer(2...(1 << 20)), help: "largest native client_data, as JSON"),
        ServerSetting(nil, path: "doors.native.ping_interval_ms", aliases: ["limits.webSocketPingIntervalMillis"],
                      \.webSocketPingIntervalMillis, .milliseconds(100...86_400_000),
                      help: "a silent native connection is pinged after this long, and closed this long after the ping"),

        // MARK: History
        ServerSetting("--history", "N", path: "history.cache_messages", \.historyCapacity, .integer(0...1_000_000), reloadable: false,
                      help: "recent messages cached in memory per room"),
        ServerSetting("--history-room-memory", "BYTES", path: "history.cache_room_bytes", aliases: ["history.cacheRoomBytes"],
                      \.historyBytesPerRoom, .integer(0...(1 << 40)), reloadable: false, help: "bytes of recent messages cached per room"),
        ServerSetting("--history-memory", "BYTES", path: "history.cache_bytes", aliases: ["history.cacheBytes"],
                      \.historyBytesTotal, .integer(0...(1 << 50)), reloadable: false, help: "bytes of recent messages cached across all rooms"),
        ServerSetting("--room-backlog", "N", path: "limits.room_backlog", \.roomBacklog, .integer(2...100_000_000), reloadable: false,
                      help: "a room's deliveries in progress before its publishers are slowed"),
        ServerSetting("--retention-count", "N", path: "history.retention_count", aliases: ["history.retentionCount"],
                      \.retentionCount, SettingRule<Int>.integer(1...Int(Int32.max)).optional, reloadable: false, defaultText: "all",
                      help: "stored messages kept per room"),
        ServerSetting("--retention-days", "D", path: "history.retention_days", aliases: ["history.retentionDays"],
                      \.retentionDays, SettingRule<Int>.integer(1...100_000).optional, reloadable: false, defaultText: "forever",
                      help: "days a stored message is kept"),
        ServerSetting("--history-inflight-bytes", "BYTES", path: "history.inflight_bytes", \.historyBytesInFlight,
                      .integer((1 << 20)...(1 << 40)), reloadable: false,
                      help: "most bytes of history pages read from the store at once, over every door (a history request past it is refused: retry; a subscribe's history or resume page waits its turn)"),
        ServerSetting("--publish-bytes-per-ip", "BYTES", path: "limits.publish_bytes_per_ip_per_second", \.publishBytesPerIPPerSecond,
                      .integer((64 << 10)...(1 << 40)), reloadable: false,
                      help: "bytes of messages one client address may publish per second over all its connections and doors, REST included (burst: four seconds' worth)"),
        ServerSetting("--history-bytes-per-ip", "BYTES", path: "history.bytes_per_ip_per_second", \.historyBytesPerIPPerSecond,
                      .integer((64 << 10)...(1 << 40)), reloadable: false,
                      help: "bytes of history one client address may read per second over all its connections (burst: four seconds' worth)"),
        ServerSetting("--history-page-bytes", "BYTES", path: "history.page_bytes", aliases: ["limits.historyPageBytes"],
                      \.historyPageBytes, .integer(1024...(1 << 30)), reloadable: false,
                      help: "most bytes of messages in one history page (history, history_count, admin)"),
        ServerSetting(nil, path: "history.page_messages", aliases: ["limits.historyPageLimit"], \.historyPageLimit, .integer(1...1_000_000),
                      help: "most messages one history request returns"),

        // MARK: Message actions (reply, edit, delete, react)
        ServerSetting("--edit-window", "SECONDS", path: "actions.edit_window_seconds", \.editWindowSeconds, .integer(0...315_360_000),
                      help: "how long after sending a message it may be edited (0: no edits)"),
        ServerSetting(nil, path: "actions.max_edits", \.maxEditsPerMessage, .integer(0...10_000),
                      help: "most edits one message may have"),
        ServerSetting(nil, path: "actions.max_reactions_per_message", \.maxReactionsPerMessage, .integer(1...1_000),
                      help: "most distinct reactions (emoji) on one message"),
        ServerSetting(nil, path: "actions.max_reactions_per_member", \.maxReactionsPerMember, .integer(1...100),
                      help: "most distinct reactions one member may put on one message"),

        // MARK: Users: read state, direct rooms, the inbox
        ServerSetting("--max-conversations", "N", path: "users.max_conversations", \.maxConversationsPerUser, .integer(1...100_000),
                      reloadable: false, help: "conversations (rooms read or opened, direct rooms) kept per user; the least recent goes"),
        ServerSetting(nil, path: "users.receipts_listed", \.maxReceiptsListed, .integer(0...10_000),
                      help: "most readers one `receipts` list holds (furthest read first)"),
        ServerSetting(nil, path: "users.inbox_watch_rooms", \.maxInboxWatchRooms, .integer(0...1_000),
                      help: "most conversations one connection's live inbox follows"),

        // MARK: Push notifications
        ServerSetting("--vapid-public-key", "KEY", path: "push.vapid_public_key", \.vapidPublicKey, SettingRule<String>.string("a base64url P-256 public key").optional,
                      reloadable: false, defaultText: "none (Web Push off)", help: "the VAPID public key (`parley vapid-keys` makes a pair)"),
        ServerSetting("--vapid-private-key", "KEY", path: "push.vapid_private_key", \.vapidPrivateKey, SettingRule<String>.string("a base64url P-256 private key").optional,
                      reloadable: false, defaultText: "none", help: "the VAPID private key (keep it secret)"),
        ServerSetting("--vapid-subject", "URI", path: "push.vapid_subject", \.vapidSubject,
                      SettingRule<String>.string("a mailto: or https: URI") { $0.hasPrefix("mailto:") || $0.hasPrefix("https://") },
                      reloadable: false, help: "the contact push services may reach the operator at"),
        ServerSetting("--webpush-endpoints", "PREFIXES", path: "push.webpush_endpoints", \.webPushEndpoints,
                      .list("URL prefixes such as https://fcm.googleapis.com/", ServerConfiguration.webPushEndpoints), reloadable: false,
                      help: "the push services a Web Push subscription may name (any other endpoint is refused)"),
        ServerSetting("--apns-key-file", "FILE", path: "push.apns_key_file", \.apnsKeyFile, SettingRule<String>.string("a .p8 file").optional,
                      reloadable: false, defaultText: "none (APNs off)", help: "the APNs auth key (.p8) of your Apple developer team"),
        ServerSetting("--apns-key-id", "ID", path: "push.apns_key_id", \.apnsKeyID, SettingRule<String>.string("the key's 10-character id").optional,
                      reloadable: false, defaultText: "none", help: "the APNs key's id (kid)"),
        ServerSetting("--apns-team-id", "ID", path: "push.apns_team_id", \.apnsTeamID, SettingRule<String>.string("the team's 10-character id").optional,
                      reloadable: false, defaultText: "none", help: "the Apple developer team id (iss)"),
        ServerSetting("--apns-endpoint", "URL", path: "push.apns_endpoint", \.apnsEndpoint,
                      SettingRule<String>.string("an https:// URL without a path") { $0.hasPrefix("https://") && !$0.dropFirst(8).contains("/") },
                      reloadable: false, help: "where production devices' pushes go"),
        ServerSetting("--apns-sandbox-endpoint", "URL", path: "push.apns_sandbox_endpoint", \.apnsSandboxEndpoint,
                      SettingRule<String>.string("an https:// URL without a path") { $0.hasPrefix("https://") && !$0.dropFirst(8).contains("/") },
                      reloadable: false, help: "where sandbox (development) devices' pushes go"),
        ServerSetting("--fcm-service-account", "FILE", path: "push.fcm_service_account", \.fcmServiceAccountFile,
                      SettingRule<String>.string("a service account JSON key file").optional, reloadable: false, defaultText: "none (FCM off)",
                      help: "the Firebase project's service account key (JSON), for FCM HTTP v1"),
        ServerSetting("--fcm-endpoint", "URL", path: "push.fcm_endpoint", \.fcmEndpoint,
                      SettingRule<String>.string("an https:// URL without a path") { $0.hasPrefix("https://") && !$0.dropFirst(8).contains("/") },
                      reloadable: false, help: "where FCM messages go (/v1/projects/ID/messages:send)"),
        ServerSetting("--fcm-token-endpoint", "URL", path: "push.fcm_token_endpoint", \.fcmTokenEndpoint,
                      SettingRule<String>.string("an https:// URL") { $0.hasPrefix("https://") && $0.count > 8 },
                      reloadable: false, help: "where the service account's JWT is exchanged for an OAuth2 access token"),
        ServerSetting("--push-ca", "FILE", path: "push.ca_file", \.pushCAFile, SettingRule<String>.string("a file").optional,
                      reloadable: false, defaultText: "system trust store", help: "PEM certificates push services' certificates must chain to"),
        ServerSetting(nil, path: "push.coalesce_ms", \.pushCoalesceMillis, .integer(0...600_000), reloadable: false,
                      help: "how long a push waits for more messages of the same room, sent as one"),
        ServerSetting(nil, path: "push.max_queued", \.pushMaxQueued, .integer(1...10_000_000), reloadable: false,
                      help: "most pushes waiting to be sent (more are dropped and counted)"),
        ServerSetting(nil, path: "push.max_per_user_per_minute", \.pushPerUserPerMinute, .integer(1...10_000), reloadable: false,
                      help: "most pushes one user gets per minute, over all rooms (and all nodes of a cluster)"),
        ServerSetting(nil, path: "push.max_room_users", \.pushMaxRoomUsers, .integer(1...1_000_000), reloadable: false,
                      help: "most users of one room a message is pushed to"),
        ServerSetting(nil, path: "push.preview", \.pushPreview, .toggle, reloadable: false,
                      help: "show the message text in pushes (off: \"New message\")"),
        ServerSetting(nil, path: "push.mentions_override_mutes", \.pushMentionsOverrideMutes, .toggle, reloadable: false,
                      help: "a mention or a direct message is pushed to a user who muted the room"),

        // MARK: HTTP and REST
        ServerSetting("--max-body-size", "BYTES", path: "doors.http.max_body_bytes", aliases: ["limits.httpMaxBodyBytes"],
                      \.httpMaxBodyBytes, .integer(1024...(1 << 30)), help: "largest HTTP request body (413 above)"),
        ServerSetting("--max-multi-publish-bytes", "BYTES", path: "doors.http.max_multi_publish_bytes", aliases: ["limits.multiPublishMaxBytes"],
                      \.multiPublishMaxBytes, .integer(1024...(1 << 34)),
                      help: "body bytes x rooms one REST publish to several rooms may store (413 above)"),
        ServerSetting("--rest-rate", "N", path: "doors.http.rest_rate_per_second", \.restRatePerSecond, .number(1...10_000_000),
                      burst: \.restBurst, reloadable: false, help: "REST requests per second per IP (429 above)"),
        ServerSetting("--download-rate", "N", path: "files.download_rate_per_second", \.downloadRatePerSecond, .number(1...10_000_000),
                      burst: \.downloadBurst, reloadable: false,
                      help: "file downloads (and thumbnails) per second per IP (429 above): each is looked up and opened on the file workers uploads use"),
        ServerSetting(nil, path: "doors.http.request_timeout_ms", aliases: ["limits.httpRequestTimeoutMillis"],
                      \.httpRequestTimeoutMillis, .milliseconds(100...86_400_000), help: "a started HTTP request must be complete within this long"),
        ServerSetting(nil, path: "doors.http.idle_timeout_ms", aliases: ["limits.httpIdleTimeoutMillis"],
                      \.httpIdleTimeoutMillis, .milliseconds(100...86_400_000), help: "an idle keep-alive connection is closed after this long"),
        ServerSetting("--allowed-origins", "LIST", path: "web.allowed_origins", aliases: ["allowedOrigins"], \.allowedOrigins,
                      .list("web origins such as https://app.example.com, or *", ServerConfiguration.allowedOrigins),
                      help: "web origins besides this server's own whose pages may use it, e.g. https://app.example.com (* for any)",
                      more: "see \"Web pages and origins\" below"),

        // MARK: Store
        ServerSetting("--max-store-bytes", "BYTES", path: "store.max_bytes", \.storeMaxBytes,
                      SettingRule<Int>(accepts: "0 (no budget) or a whole number in 1048576...\(1 << 50)",
                                       text: { Int($0) }, json: { $0.intValue },
                                       check: { bytes, _ in bytes == 0 || (1 << 20...1 << 50).contains(bytes) }, show: { String($0) })
                          .map({ $0 == 0 ? nil : $0 }, show: { $0.map(String.init) ?? "0" }),
                      reloadable: false, help: "size budget of the embedded store (all history; 0: as the disk allows)"),
        ServerSetting("--sync", "full|normal", path: "store.sync", \.syncFull,
                      .choice("full or normal", { $0 == "full" ? true : $0 == "normal" ? false : nil }, show: { $0 ? "full" : "normal" }),
                      reloadable: false, help: "fsync each group commit (full) or not (normal)"),

        // MARK: Socket.IO door
        ServerSetting("--socketio-max-payload", "BYTES", path: "socketio.max_payload_bytes", aliases: ["limits.socketIOMaxPayload"],
                      \.socketIOMaxPayload, .integer(1024...(64 << 20)), help: "largest Socket.IO polling body or message"),
        ServerSetting("--socketio-ping-interval", "MS", path: "socketio.ping_interval_ms", aliases: ["limits.socketIOPingIntervalMillis"],
                      \.socketIOPingIntervalMillis, .milliseconds(100...86_400_000), help: "Engine.IO ping interval in milliseconds"),
        ServerSetting("--socketio-ping-timeout", "MS", path: "socketio.ping_timeout_ms", aliases: ["limits.socketIOPingTimeoutMillis"],
                      \.socketIOPingTimeoutMillis, .milliseconds(100...86_400_000), help: "Engine.IO ping timeout in milliseconds"),
        ServerSetting("--socketio-connect-timeout", "MS", path: "socketio.connect_timeout_ms", aliases: ["limits.socketIOConnectTimeoutMillis"],
                      \.socketIOConnectTimeoutMillis, .milliseconds(100...86_400_000),
                      help: "close a Socket.IO connection with no namespace connected after this long (ms)"),
        ServerSetting("--socketio-max-polling-sessions", "N", path: "socketio.max_polling_sessions", aliases: ["limits.socketIOMaxPollingSessions"],
                      \.socketIOMaxPollingSessions, .integer(1...10_000_000), help: "Socket.IO long-polling sessions open at once"),
        ServerSetting("--socketio-polling-rate", "N", path: "socketio.polling_rate_per_second", \.socketIOPollingRatePerSecond,
                      .count(1...10_000_000), reloadable: false, defaultText: "200, burst 2x",
                      help: "Socket.IO long-polling requests per second per IP (429 above)"),

        // MARK: Abuse limits
        ServerSetting("--max-connections", "N", path: "limits.max_connections", \.maxConnections, .integer(1...10_000_000), reloadable: false,
                      help: "connections open at once, all doors"),
        ServerSetting("--max-connections-per-ip", "N", path: "limits.max_connections_per_ip", \.maxConnectionsPerIP, .integer(1...10_000_000),
                      reloadable: false, help: "connections open at once from one IP"),
        ServerSetting("--handshake-timeout", "SECONDS", path: "limits.handshake_timeout_seconds", \.handshakeTimeoutMillis,
                      .seconds(allowZero: false), help: "time to finish the HTTP request/upgrade, line iam:, or the native handshake (and authenticate) after the upgrade"),
        ServerSetting("--idle-timeout", "SECONDS", path: "limits.idle_timeout_seconds", \.idleTimeoutMillis, .seconds(allowZero: false),
                      help: "close a connection silent this long"),
        ServerSetting("--rate-abuse-factor", "N", path: "limits.rate_abuse_factor", \.rateAbuseFactor, .count(1...1_000_000),
                      help: "disconnect after N x the message rate refused within 10 s"),
        ServerSetting("--max-members-listed", "N", path: "limits.max_members_listed", \.maxMembersListed, .integer(1...10_000_000),
                      help: "members listed in one observable_members (and users in one Socket.IO userList)"),
        ServerSetting("--max-open-channels", "N", path: "limits.max_open_channels", \.maxOpenChannels, .integer(1...1_000_000),
                      help: "open mode: channels not in the config file that one node holds rooms of at once (a client of one more is refused until rooms leave memory)"),
        ServerSetting("--max-members-list-bytes", "BYTES", path: "limits.max_members_listed_bytes", aliases: ["limits.maxMembersListedBytes"],
                      \.maxMembersListedBytes, .integer(1024...(1 << 30)), help: "bytes of members in one observable_members (and of users in one Socket.IO userList)"),
        ServerSetting("--trusted-proxies", "LIST", path: "network.trusted_proxies", aliases: ["trustedProxies"], \.trustedProxies,
                      proxies,
                      reloadable: false,
                      help: "reverse proxies (addresses or CIDRs, e.g. 10.0.0.0/8,::1) whose Forwarded / X-Forwarded-For / PROXY header names the client",
                      more: "see [docs/security.md](docs/security.md#proxies-addresses-and-uploads)"),
        ServerSetting("--line-proxy-protocol", path: "doors.line.proxy_protocol", aliases: ["lineProxyProtocol"], \.lineProxyProtocol, .toggle,
                      reloadable: false, help: "line connections from a trusted proxy start with a PROXY protocol v1/v2 header",
                      more: "HAProxy's `send-proxy` / `send-proxy-v2`"),

        // MARK: Files and images
        ServerSetting("--files", "DIR", path: "files.directory", \.filesDirectory, SettingRule<String>.string("a directory").optional,
                      reloadable: false, defaultText: "the data directory",
                      help: "where uploads are stored (in DIR/files); share it between cluster nodes"),
        ServerSetting("--public-url", "URL", path: "files.public_url", aliases: ["files.publicURL"], \.publicURL,
                      SettingRule<String>.validated("a URL such as https://chat.example.com", ServerConfiguration.publicURL).optional,
                      defaultText: "the bound address", help: "http(s)://host[:port] that attachment links start with",
                      more: "bound to every interface without it, links are path-only"),
        ServerSetting("--max-upload-size", "BYTES", path: "files.max_upload_bytes", aliases: ["limits.maxUploadBytes"],
                      \.uploadMaxBytes, .integer(1...(16 << 30)), help: "largest uploaded file (413 above)"),
        ServerSetting("--upload-types", "LIST", path: "files.upload_types", aliases: ["limits.uploadTypes"], \.uploadTypes,
                      SettingRule<[String]>.list("MIME types such as image/png or image/*", ServerConfiguration.uploadTypes).optional,
                      defaultText: "images, PDF, text, office", help: "allowed upload types, e.g. image/*,application/pdf (415 otherwise)"),
        ServerSetting("--upload-rate", "N", path: "files.uploads_per_minute", aliases: ["limits.uploadsPerMinute"],
                      \.uploadsPerMinute, .integer(1...1_000_000), help: "uploads per minute per client address, all channels together (429 above)"),
        ServerSetting("--upload-rate-total", "N", path: "files.uploads_per_minute_total", aliases: ["limits.uploadsPerMinuteTotal"],
                      \.uploadsPerMinuteTotal, .integer(1...100_000_000), help: "uploads per minute the whole server takes (429 above)"),
        ServerSetting("--upload-bytes-per-ip", "BYTES", path: "files.upload_bytes_per_ip_per_day", aliases: ["limits.uploadBytesPerIPPerDay"],
                      \.uploadBytesPerIPPerDay, .integer(1...(1 << 50)),
                      help: "bytes of files one client address may upload per day, all channels together (429 above)"),
        ServerSetting("--upload-bytes-total", "BYTES", path: "files.upload_bytes_total_per_day", aliases: ["limits.uploadBytesTotalPerDay"],
                      \.uploadBytesTotalPerDay, .integer(1...(1 << 50)), help: "bytes of files the whole server takes per day (429 above)"),
        ServerSetting("--image-pixels-per-ip", "N", path: "files.image_pixels_per_ip_per_minute", \.imagePixelsPerIPPerMinute,
                      .integer(1...(1 << 50)), help: "image pixels one client address may have decoded per minute, all channels together (429 above)",
                      more: "counted from the header before decoding; an image larger than this is refused from everyone"),
        ServerSetting("--image-pixels-total", "N", path: "files.image_pixels_total_per_minute", \.imagePixelsTotalPerMinute,
                      .integer(1...(1 << 50)), help: "image pixels the whole server decodes per minute (429 above)"),
        ServerSetting("--files-quota", "BYTES", path: "files.quota_bytes", aliases: ["limits.filesQuotaBytes"],
                      \.filesQuotaBytes, .integer(0...(1 << 50)), help: "bytes of uploads one channel may hold (429 above)"),
        ServerSetting("--upload-grace", "SECONDS", path: "files.upload_grace_seconds", aliases: ["files.uploadGraceSeconds"],
                      \.uploadGraceSeconds, .integer(1...(365 * 86_400)), reloadable: false, help: "keep uploads no message refers to this long"),
        ServerSetting(nil, path: "files.collect_interval_seconds", aliases: ["files.collectIntervalSeconds"],
                      \.filesCollectIntervalSeconds, .integer(1...86_400), reloadable: false, help: "seconds between two collections of unused files"),
        ServerSetting(nil, path: "files.upload_timeout_ms", aliases: ["files.uploadTimeoutMillis"],
                      \.uploadTimeoutMillis, .milliseconds(1000...86_400_000), help: "an upload must be complete within this long"),
        ServerSetting("--file-workers", "N", path: "files.workers", \.fileWorkers, .integer(1...64), reloadable: false,
                      help: "threads for file I/O and image work"),

        // MARK: TLS
        ServerSetting("--tls-cert", "FILE", path: "tls.cert", \.tlsCertificateFile, SettingRule<String>.string("a file").optional,
                      reloadable: false, defaultText: "off", help: "PEM certificate chain: serve https:// and wss:// (needs a key)"),
        ServerSetting("--tls-key", "FILE", path: "tls.key", \.tlsKeyFile, SettingRule<String>.string("a file").optional,
                      reloadable: false, defaultText: "off", help: "PEM private key of the certificate"),
        ServerSetting("--line-tls", path: "tls.line", \.lineTLS, .toggle, reloadable: false,
                      help: "the line door speaks TLS too (same certificate)"),

        // MARK: Operations
        ServerSetting("--log-level", "LEVEL", path: "log.level", \.logLevel,
                      .choice("trace, debug, info, warn or error", { LogLevel(name: $0) }, show: \.description),
                      help: "lowest level logged (to standard error)"),
        ServerSetting("--log-format", "text|json", path: "log.format", \.logFormat,
                      .choice("text or json", { LogFormat(rawValue: $0) }, show: \.rawValue), reloadable: false,
                      help: "one readable line, or one JSON object, per event"),
        ServerSetting("--drain-time", "SECONDS", path: "shutdown.drain_seconds", \.drainMillis, .seconds(allowZero: true),
                      help: "on SIGTERM/SIGINT, /readyz answers 503 this long before clients are told to go"),
        ServerSetting("--shutdown-timeout", "SECONDS", path: "shutdown.grace_seconds", \.shutdownGraceMillis, .seconds(allowZero: true),
                      help: "then how long clients get to leave before the server stops"),
        ServerSetting(nil, path: "metrics.token", \.metricsToken, token, defaultText: "none",
                      help: "bearer token /metrics asks for (without it /metrics is open, under the REST rate limit)"),
        ServerSetting(nil, path: "admin.token", \.adminToken, token, defaultText: "none",
                      help: "bearer token of the admin API and dashboard (without it they are off)"),

        // MARK: Cluster mode
        ServerSetting("--redis", "URL", path: "cluster.redis_url", aliases: ["redis.url"], \.redisURL,
                      SettingRule<String>.validated("a URL such as redis://HOST:PORT[/DB]", { url, name throws(UsageError) in
                          do throws(RedisError) { _ = try RedisEndpoint(url: url) } catch { throw UsageError(description: "\(name): \(error.message)") }
                          return url
                      }).optional, reloadable: false, defaultText: "off",
                      help: "cluster mode on Redis: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], rediss:// for TLS (off: one node on SQLite)"),
        ServerSetting("--redis-cluster", "HOST:PORT,...", path: "cluster.redis_cluster", aliases: ["redis.cluster"], \.redisClusterSeeds,
                      seeds, reloadable: false, defaultText: "off",
                      help: "cluster mode on a Redis Cluster, given seed nodes (in the file: a string or an array)"),
        ServerSetting("--redis-sentinel", "HOST:PORT,...", path: "cluster.redis_sentinel", \.redisSentinels,
                      seeds, reloadable: false, defaultText: "off",
                      help: "cluster mode on the Redis master these Sentinels name, following failovers (--redis, if given, only supplies the master's credentials, database and TLS)"),
        ServerSetting("--redis-sentinel-master", "NAME", path: "cluster.redis_sentinel_master", \.redisSentinelMaster,
                      .string("1-200 characters, no spaces", { !$0.isEmpty && $0.count <= 200 && !$0.contains(" ") }), reloadable: false,
                      help: "the name the Sentinels monitor the master under"),
        ServerSetting("--redis-tls-ca", "FILE", path: "cluster.redis_tls_ca", \.redisTLSCAFile, SettingRule<String>.string("a file").optional,
                      reloadable: false, defaultText: "system trust store",
                      help: "PEM certificates a rediss:// server's certificate must chain to"),
        ServerSetting("--redis-tls-cert", "FILE", path: "cluster.redis_tls_cert", \.redisTLSCertFile, SettingRule<String>.string("a file").optional,
                      reloadable: false, defaultText: "none",
                      help: "a client certificate (PEM chain) for a rediss:// server that asks for one; with --redis-tls-key"),
        ServerSetting("--redis-tls-key", "FILE", path: "cluster.redis_tls_key", \.redisTLSKeyFile, SettingRule<String>.string("a file").optional,
                      reloadable: false, defaultText: "none", help: "the private key (PEM) of --redis-tls-cert"),
        ServerSetting("--redis-replicas-ack", "N", path: "cluster.redis_replicas_ack", \.redisReplicasAck, .integer(0...16),
                      reloadable: false, help: "acknowledge a message only once N Redis replicas have it (WAIT); 0: once the master has it"),
        ServerSetting("--redis-replicas-ack-timeout", "SECONDS", path: "cluster.redis_replicas_ack_timeout_seconds", \.redisReplicasAckTimeoutMillis,
                      SettingRule<Double>.number(0.01...60).map({ Int(($0 * 1000).rounded()) }, show: { SettingRule<Double>.format(Double($0) / 1000) }),
                      reloadable: false, help: "how long WAIT waits for those replicas; fewer in time fail the publish (the client may retry it)"),
        ServerSetting("--relay-address", "HOST:PORT", path: "cluster.relay_address", \.relayAddress,
                      SettingRule<String>.string("host:port") { EngineIORelay.split($0) != nil }.optional, reloadable: false,
                      defaultText: "the bound address (none when bound to a wildcard)",
                      help: "where the other nodes reach this node's HTTP door, to hand on Socket.IO requests for its sessions (no sticky sessions)"),
        ServerSetting("--node-id", "ID", path: "cluster.node_id", aliases: ["redis.nodeId"], \.nodeID,
                      SettingRule<String>.string("1-64 letters, digits, '.', '_' or '-'", RedisPresenceOptions.isValidNodeID).optional,
                      reloadable: false, defaultText: "random", help: "this node's name in the cluster"),
        ServerSetting("--presence-lease", "SECONDS", path: "cluster.presence_lease_seconds", aliases: ["redis.presenceLease"],
                      \.presenceLeaseMillis,
                      SettingRule<Double>.number(1.5...3_600).map({ Int(($0 * 1000).rounded()) }, show: { SettingRule<Double>.format(Double($0) / 1000) }),
                      reloadable: false, help: "a dead node's members leave everywhere after about this long"),
        ServerSetting("--redis-prefix", "PREFIX", path: "cluster.key_prefix", aliases: ["redis.prefix"], \.redisKeyPrefix,
                      .string("1-64 letters, digits, '.', '_', '-' or ':'", RedisKeyspace.isValidPrefix), reloadable: false,
                      help: "prefix of Parley's Redis keys"),

        // MARK: Diagnostics
        ServerSetting("--ws-echo-path", "PATH", path: "diagnostics.ws_echo_path", \.webSocketEchoPath,
                      SettingRule<String>.string("a path starting with /", isPath).optional, reloadable: false, defaultText: "off",
                      help: "serve a diagnostic WebSocket echo endpoint at PATH"),
        ServerSetting("--eio-echo-path", "PATH", path: "diagnostics.eio_echo_path", \.engineIOEchoPath,
                      SettingRule<String>.string("a path starting with /, not /socket.io/", { isPath($0) && $0 != "/socket.io/" && $0 != "/socket.io" }).optional,
                      defaultText: "off", help: "serve a diagnostic Engine.IO 4 echo server at PATH"),
        ServerSetting("--sio-test-app", path: "diagnostics.sio_test_app", \.socketIOTestApp, .toggle,
                      help: "serve the Socket.IO protocol's test application on /socket.io/ instead of SocketChat"),
    ]

    typealias UsageError = ServerConfiguration.UsageError

    /// `--config FILE`: the file is read first, so its flag is looked for before the others.
    static let configFlag = "--config"
    static var configEnvironment: String { configFile(configFlag).environment! }

    /// An admin or metrics token: guessed over the network, so not short.
    static let minimumTokenLength = 16
    static let token = SettingRule<String>.string("at least \(minimumTokenLength) characters with no spaces") {
        $0.count >= minimumTokenLength && !$0.contains(where: \.isWhitespace)
    }.optional

    /// Addresses or CIDR ranges: comma-separated on the command line, an array in the file.
    static let proxies = SettingRule<[IPNetwork]>(
        accepts: "addresses or CIDR ranges such as 10.0.0.0/8 or ::1",
        text: { text, name throws(UsageError) in try ServerConfiguration.trustedProxies(text, name) },
        json: { value, name throws(UsageError) in
            guard let items = value.arrayValue, items.allSatisfy({ $0.stringValue != nil }) else {
                throw UsageError(description: "\(name) must be an array of strings")
            }
            return try ServerConfiguration.trustedProxies(items.compactMap(\.stringValue).joined(separator: ","), name)
        },
        show: { $0.isEmpty ? "none" : $0.map(\.description).joined(separator: ",") })

    /// Redis Cluster seeds: `HOST:PORT,...`, or in the file an array of them.
    static let seeds = SettingRule<String?>(
        accepts: "HOST:PORT seeds, comma-separated (in the file also an array)",
        text: { text, name throws(UsageError) in try checkSeeds(text, name) },
        json: { value, name throws(UsageError) in
            if let items = value.arrayValue {
                var list: [String] = []
                for (index, item) in items.enumerated() {
                    guard let text = item.stringValue, !text.isEmpty else { throw UsageError(description: "\(name)[\(index)] must be a non-empty string") }
                    list.append(text)
                }
                return try checkSeeds(list.joined(separator: ","), name)
            }
            guard let text = value.stringValue, !text.isEmpty else { throw UsageError(description: "\(name) must be a string or an array of strings") }
            return try checkSeeds(text, name)
        },
        show: { $0 ?? "off" })

    static func checkSeeds(_ seeds: String, _ name: String) throws(UsageError) -> String {
        do throws(RedisError) { _ = try RedisEndpoint.seeds(seeds) } catch { throw UsageError(description: "\(name): \(error.message)") }
        return seeds
    }

    static func isPath(_ text: String) -> Bool { text.hasPrefix("/") && !text.contains("?") && !text.contains(" ") }
}
