import Foundation
import ParleyCore
import ParleyLog
import ParleyRedis

/// One channel the config file lists: its secret and its own settings.
public struct ChannelSettings: Sendable, Equatable {
    public var id: String
    /// Signs tokens (HS256) and authorizes REST `Basic channel:secret`.
    public var secret: String?
    /// Connections must authenticate before subscribing or publishing.
    public var requireAuth = false
    /// Stored messages kept per room / days kept in this channel's rooms (nil: the
    /// server-wide value).
    public var retentionCount: Int?
    public var retentionDays: Int?
    /// Messages per second per connection on this channel, on every door (burst 2x); nil
    /// uses the door's limit.
    public var publishRate: Double?
    /// Attachment limits of this channel; nil uses the server-wide value.
    public var uploadMaxBytes: Int?
    public var uploadTypes: [String]?
    public var uploadsPerMinute: Int?
    public var filesQuotaBytes: Int?

    /// Shortest secret the config file accepts, in bytes. A token signed with the secret is
    /// proof enough to test a guessed secret offline (HS256 is one HMAC per guess), so a short
    /// one falls to brute force; 32 random bytes do not.
    public static let minimumSecretBytes = 32

    public init(id: String, secret: String? = nil, requireAuth: Bool = false) {
        self.id = id
        self.secret = secret
        self.requireAuth = requireAuth
    }
}

extension ServerConfiguration {
    /// The settings of `channel` when the config file lists it.
    public func settings(ofChannel channel: String) -> ChannelSettings? {
        channels.first { $0.id == channel }
    }

    /// Why `channel` cannot be used at all (not listed while `openChannels` is false), or nil.
    public func refusal(ofChannel channel: String) -> String? {
        if openChannels || settings(ofChannel: channel) != nil { return nil }
        return "channel \"\(channel)\" is not open on this server"
    }

    /// `--config FILE` / `--config=FILE` among the flags, else `PARLEY_CONFIG`.
    static func configFilePath(arguments: [String], environment: [String: String]) -> String? {
        var found: String?
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--config", index + 1 < arguments.count {
                found = arguments[index + 1]
                index += 1
            } else if argument.hasPrefix("--config=") {
                found = String(argument.dropFirst("--config=".count))
            }
            index += 1
        }
        if let found { return found }
        if let path = environment["PARLEY_CONFIG"], !path.isEmpty { return path }
        return nil
    }
}

/// The JSON configuration file (`parley serve --config FILE`, or `PARLEY_CONFIG`): applied
/// first, so `PARLEY_*` variables and flags override it. Unknown keys and bad values are
/// errors naming the key path (`channels[1].requireAuth must be true or false`).
///
/// ```json
/// {
///   "openChannels": false,
///   "channels": [
///     {"id": "acme", "secret": "4W1xq9cS0vZk8Yb2HnT5rEu7LpJ3mQ6d", "requireAuth": true,
///      "history": {"retentionCount": 500, "retentionDays": 30},
///      "limits": {"publishRate": 10, "maxUploadBytes": 5242880, "uploadTypes": ["image/*"],
///                 "uploadsPerMinute": 10, "filesQuotaBytes": 104857600}}
///   ],
///   "limits": {"nativeRatePerSecond": 50, "writeQueueLimit": 4194304, "maxUploadBytes": 10485760},
///   "files": {"directory": "/srv/parley-files", "publicURL": "https://chat.example.com"},
///   "history": {"retentionCount": 10000},
///   "tls": {"cert": "/etc/parley/cert.pem", "key": "/etc/parley/key.pem", "line": false},
///   "log": {"level": "info", "format": "json"},
///   "metrics": {"token": "a-long-random-scrape-token"},
///   "admin": {"token": "a-long-random-admin-token"},
///   "redis": {"url": "redis://127.0.0.1:6379", "nodeId": "node-1", "presenceLease": 10, "prefix": "parley"}
/// }
/// ```
public enum ConfigFile {
    /// Largest config file read, in bytes.
    public static let maxSize = 4 << 20

    /// Reads `path` and applies it to `configuration`.
    public static func load(path: String, into configuration: inout ServerConfiguration) throws(ServerConfiguration.UsageError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            let why = !exists ? "no such file" : isDirectory.boolValue ? "is a directory" : "cannot be read"
            throw ServerConfiguration.UsageError(description: "config file \(path): \(why)")
        }
        try apply(Array(data), name: path, to: &configuration)
    }

    /// Parses the file's bytes (`name` is used in messages) and applies them.
    public static func apply(_ bytes: [UInt8], name: String, to configuration: inout ServerConfiguration) throws(ServerConfiguration.UsageError) {
        func fail(_ message: String) -> ServerConfiguration.UsageError {
            ServerConfiguration.UsageError(description: "config file \(name): \(message)")
        }
        guard bytes.count <= maxSize else { throw fail("larger than \(maxSize) bytes") }
        let root: JSONValue
        do { root = try JSONParser.parse(bytes) } catch { throw fail("invalid JSON: \(error.description)") }
        var reader = Reader()
        do {
            try reader.apply(root, to: &configuration)
        } catch {
            throw fail(error.message)
        }
    }

    struct Failure: Error { let message: String }

    /// Walks the document; every error names the key path.
    struct Reader {
        func object(_ value: JSONValue, _ path: String, allowed: [String]) throws(Failure) -> JSONObject {
            guard case .object(let object) = value else { throw Failure(message: "\(path.isEmpty ? "the top level" : path) must be an object") }
            var seen = Set<String>()
            for key in object.keys {
                let keyPath = path.isEmpty ? key : "\(path).\(key)"
                guard allowed.contains(key) else {
                    throw Failure(message: "unknown key \(keyPath) (allowed here: \(allowed.joined(separator: ", ")))")
                }
                guard seen.insert(key).inserted else { throw Failure(message: "duplicate key \(keyPath)") }
            }
            return object
        }

        /// Shortest admin or metrics token accepted (they are guessed over the network).
        static let minimumTokenLength = 16

        func bool(_ value: JSONValue, _ path: String) throws(Failure) -> Bool {
            guard let flag = value.boolValue else { throw Failure(message: "\(path) must be true or false") }
            return flag
        }

        func string(_ value: JSONValue, _ path: String) throws(Failure) -> String {
            guard let text = value.stringValue, !text.isEmpty else { throw Failure(message: "\(path) must be a non-empty string") }
            return text
        }

        func integer(_ value: JSONValue, _ path: String, _ range: ClosedRange<Int>) throws(Failure) -> Int {
            guard let number = value.intValue, range.contains(number) else {
                throw Failure(message: "\(path) must be a whole number in \(range.lowerBound)...\(range.upperBound)")
            }
            return number
        }

        func number(_ value: JSONValue, _ path: String, _ range: ClosedRange<Double>) throws(Failure) -> Double {
            guard let number = value.doubleValue, number.isFinite, range.contains(number) else {
                throw Failure(message: "\(path) must be a number in \(Int(range.lowerBound))...\(Int(range.upperBound))")
            }
            return number
        }

        /// An array of MIME types (or `type/*` families).
        func types(_ value: JSONValue, _ path: String) throws(Failure) -> [String] {
            guard case .array(let items) = value else { throw Failure(message: "\(path) must be an array of MIME types") }
            var list: [String] = []
            for (index, item) in items.enumerated() { list.append(try string(item, "\(path)[\(index)]")) }
            do throws(ServerConfiguration.UsageError) {
                return try ServerConfiguration.uploadTypes(list, path)
            } catch {
                throw Failure(message: error.description)
            }
        }

        /// Server-wide limits, keyed by their ServerConfiguration names (attachment limits
        /// take their config names: maxUploadBytes, uploadsPerMinute, filesQuotaBytes).
        static var integerLimits: [(key: String, field: WritableKeyPath<ServerConfiguration, Int>, range: ClosedRange<Int>)] { [
            ("writeQueueLimit", \.writeQueueLimit, 4096...(1 << 30)),
            ("webSocketMaxMessageSize", \.webSocketMaxMessageSize, 1024...(64 << 20)),
            ("nativeMaxRooms", \.nativeMaxRooms, 1...100_000),
            ("nativeMaxHistoryCount", \.nativeMaxHistoryCount, 0...1_000_000),
            ("lineMaxLength", \.lineMaxLength, 16...(16 << 20)),
            ("httpMaxBodyBytes", \.httpMaxBodyBytes, 1...(1 << 30)),
            ("multiPublishMaxBytes", \.multiPublishMaxBytes, 1024...(1 << 34)),
            ("historyPageLimit", \.historyPageLimit, 1...1_000_000),
            ("historyPageBytes", \.historyPageBytes, 1024...(1 << 30)),
            ("socketIOMaxPayload", \.socketIOMaxPayload, 1024...(64 << 20)),
            ("joinHistory", \.joinHistory, 0...1_000),
            ("maxUploadBytes", \.uploadMaxBytes, 1...(16 << 30)),
            ("uploadsPerMinute", \.uploadsPerMinute, 1...1_000_000),
            ("filesQuotaBytes", \.filesQuotaBytes, 0...(1 << 50)),
            ("uploadsPerMinuteTotal", \.uploadsPerMinuteTotal, 1...100_000_000),
            ("uploadBytesPerIPPerDay", \.uploadBytesPerIPPerDay, 1...(1 << 50)),
            ("uploadBytesTotalPerDay", \.uploadBytesTotalPerDay, 1...(1 << 50)),
            ("socketIOMaxPollingSessions", \.socketIOMaxPollingSessions, 1...10_000_000),
            ("maxClientDataBytes", \.maxClientDataBytes, 2...(1 << 20)),
            ("maxMembersListedBytes", \.maxMembersListedBytes, 1024...(1 << 30)),
        ] }
        static var rateLimits: [(key: String, field: WritableKeyPath<ServerConfiguration, Double>, burst: WritableKeyPath<ServerConfiguration, Double>)] { [
            ("nativeRatePerSecond", \.nativeRatePerSecond, \.nativeBurst),
            ("lineRatePerSecond", \.lineRatePerSecond, \.lineBurst),
            ("historyRatePerSecond", \.historyRatePerSecond, \.historyBurst),
        ] }
        static var burstLimits: [(key: String, field: WritableKeyPath<ServerConfiguration, Double>)] { [
            ("nativeBurst", \.nativeBurst),
            ("lineBurst", \.lineBurst),
            ("historyBurst", \.historyBurst),
        ] }
        static var millisLimits: [(key: String, field: WritableKeyPath<ServerConfiguration, UInt64>)] { [
            ("httpRequestTimeoutMillis", \.httpRequestTimeoutMillis),
            ("httpIdleTimeoutMillis", \.httpIdleTimeoutMillis),
            ("webSocketPingIntervalMillis", \.webSocketPingIntervalMillis),
            ("socketIOPingIntervalMillis", \.socketIOPingIntervalMillis),
            ("socketIOPingTimeoutMillis", \.socketIOPingTimeoutMillis),
            ("socketIOConnectTimeoutMillis", \.socketIOConnectTimeoutMillis),
        ] }

        static var limitKeys: [String] {
            integerLimits.map(\.key) + rateLimits.map(\.key) + burstLimits.map(\.key) + millisLimits.map(\.key) + ["uploadTypes"]
        }

        mutating func apply(_ root: JSONValue, to configuration: inout ServerConfiguration) throws(Failure) {
            let top = try object(root, "", allowed: ["channels", "openChannels", "limits", "history", "tls", "log", "metrics", "admin", "files", "redis", "allowedOrigins",
                                                      "trustedProxies", "lineProxyProtocol"])
            if let value = top["trustedProxies"] {
                guard let list = value.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                    throw Failure(message: "trustedProxies must be an array of strings")
                }
                do throws(ServerConfiguration.UsageError) {
                    configuration.trustedProxies = try ServerConfiguration.trustedProxies(
                        list.compactMap(\.stringValue).joined(separator: ","), "trustedProxies")
                } catch {
                    throw Failure(message: error.description)
                }
            }
            if let value = top["lineProxyProtocol"] { configuration.lineProxyProtocol = try bool(value, "lineProxyProtocol") }
            if let value = top["allowedOrigins"] {
                guard let list = value.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                    throw Failure(message: "allowedOrigins must be an array of strings")
                }
                do throws(ServerConfiguration.UsageError) {
                    configuration.allowedOrigins = try ServerConfiguration.allowedOrigins(list.compactMap(\.stringValue), "allowedOrigins")
                } catch {
                    throw Failure(message: error.description)
                }
            }
            if let value = top["log"] {
                let log = try object(value, "log", allowed: ["level", "format"])
                if let v = log["level"] {
                    guard let level = LogLevel(name: try string(v, "log.level")) else {
                        throw Failure(message: "log.level must be trace, debug, info, warn or error")
                    }
                    configuration.logLevel = level
                }
                if let v = log["format"] {
                    guard let format = LogFormat(rawValue: try string(v, "log.format")) else {
                        throw Failure(message: "log.format must be text or json")
                    }
                    configuration.logFormat = format
                }
            }
            for (key, field) in [("metrics", \ServerConfiguration.metricsToken), ("admin", \ServerConfiguration.adminToken)] {
                guard let value = top[key] else { continue }
                let section = try object(value, key, allowed: ["token"])
                if let v = section["token"] {
                    let token = try string(v, "\(key).token")
                    guard token.count >= Self.minimumTokenLength, !token.contains(where: { $0.isWhitespace }) else {
                        throw Failure(message: "\(key).token must be at least \(Self.minimumTokenLength) characters with no spaces")
                    }
                    configuration[keyPath: field] = token
                }
            }
            if let value = top["limits"] {
                let limits = try object(value, "limits", allowed: Self.limitKeys)
                for item in Self.integerLimits {
                    if let v = limits[item.key] { configuration[keyPath: item.field] = try integer(v, "limits.\(item.key)", item.range) }
                }
                for item in Self.rateLimits {
                    if let v = limits[item.key] {
                        let rate = try number(v, "limits.\(item.key)", 0.001...10_000_000)
                        configuration[keyPath: item.field] = rate
                        configuration[keyPath: item.burst] = max(1, rate * 2)
                    }
                }
                // An explicit burst wins over the 2x default, whatever the key order.
                for item in Self.burstLimits {
                    if let v = limits[item.key] { configuration[keyPath: item.field] = try number(v, "limits.\(item.key)", 1...20_000_000) }
                }
                for item in Self.millisLimits {
                    if let v = limits[item.key] {
                        configuration[keyPath: item.field] = UInt64(try integer(v, "limits.\(item.key)", 100...86_400_000))
                    }
                }
                if let v = limits["uploadTypes"] { configuration.uploadTypes = try types(v, "limits.uploadTypes") }
            }
            if let value = top["files"] {
                let files = try object(value, "files", allowed: ["directory", "publicURL", "uploadGraceSeconds",
                                                                 "collectIntervalSeconds", "uploadTimeoutMillis", "workers"])
                if let v = files["directory"] { configuration.filesDirectory = try string(v, "files.directory") }
                if let v = files["publicURL"] {
                    let text = try string(v, "files.publicURL")
                    do throws(ServerConfiguration.UsageError) {
                        configuration.publicURL = try ServerConfiguration.publicURL(text, "files.publicURL")
                    } catch {
                        throw Failure(message: error.description)
                    }
                }
                if let v = files["uploadGraceSeconds"] { configuration.uploadGraceSeconds = try integer(v, "files.uploadGraceSeconds", 1...(365 * 86_400)) }
                if let v = files["collectIntervalSeconds"] { configuration.filesCollectIntervalSeconds = try integer(v, "files.collectIntervalSeconds", 1...86_400) }
                if let v = files["uploadTimeoutMillis"] { configuration.uploadTimeoutMillis = UInt64(try integer(v, "files.uploadTimeoutMillis", 1000...86_400_000)) }
                if let v = files["workers"] { configuration.fileWorkers = try integer(v, "files.workers", 1...64) }
            }
            if let value = top["history"] {
                let history = try object(value, "history", allowed: ["retentionCount", "retentionDays", "cacheRoomBytes", "cacheBytes"])
                if let v = history["retentionCount"] { configuration.retentionCount = try integer(v, "history.retentionCount", 1...Int(Int32.max)) }
                if let v = history["retentionDays"] { configuration.retentionDays = try integer(v, "history.retentionDays", 1...100_000) }
                if let v = history["cacheRoomBytes"] { configuration.historyBytesPerRoom = try integer(v, "history.cacheRoomBytes", 0...(1 << 40)) }
                if let v = history["cacheBytes"] { configuration.historyBytesTotal = try integer(v, "history.cacheBytes", 0...(1 << 50)) }
            }
            if let value = top["tls"] {
                let tls = try object(value, "tls", allowed: ["cert", "key", "line"])
                if let v = tls["cert"] { configuration.tlsCertificateFile = try string(v, "tls.cert") }
                if let v = tls["key"] { configuration.tlsKeyFile = try string(v, "tls.key") }
                if let v = tls["line"] { configuration.lineTLS = try bool(v, "tls.line") }
                guard (configuration.tlsCertificateFile == nil) == (configuration.tlsKeyFile == nil) else {
                    throw Failure(message: "tls needs both cert and key")
                }
            }
            if let value = top["redis"] {
                try redis(value, into: &configuration)
            }
            if let value = top["channels"] {
                guard case .array(let list) = value else { throw Failure(message: "channels must be an array of objects") }
                var channels: [ChannelSettings] = []
                for (index, item) in list.enumerated() {
                    let channel = try self.channel(item, "channels[\(index)]")
                    guard !channels.contains(where: { $0.id == channel.id }) else {
                        throw Failure(message: "channels[\(index)].id \"\(channel.id)\" is listed twice")
                    }
                    channels.append(channel)
                }
                configuration.channels = channels
                if !channels.isEmpty { configuration.openChannels = false }
            }
            if let value = top["openChannels"] { configuration.openChannels = try bool(value, "openChannels") }
        }

        /// `redis`: cluster mode. `url` (one Redis) or `cluster` (seed nodes, a comma-separated
        /// string or an array), `nodeId`, `presenceLease` (seconds), `prefix`.
        func redis(_ value: JSONValue, into configuration: inout ServerConfiguration) throws(Failure) {
            let redis = try object(value, "redis", allowed: ["url", "cluster", "nodeId", "presenceLease", "prefix"])
            if let v = redis["url"] {
                let url = try string(v, "redis.url")
                do throws(RedisError) { _ = try RedisEndpoint(url: url) } catch { throw Failure(message: "redis.url: \(error.message)") }
                configuration.redisURL = url
            }
            if let v = redis["cluster"] {
                let seeds: String
                if case .array(let items) = v {
                    var list: [String] = []
                    for (index, item) in items.enumerated() { list.append(try string(item, "redis.cluster[\(index)]")) }
                    seeds = list.joined(separator: ",")
                } else {
                    seeds = try string(v, "redis.cluster")
                }
                do throws(RedisError) { _ = try RedisEndpoint.seeds(seeds) } catch { throw Failure(message: "redis.cluster: \(error.message)") }
                configuration.redisClusterSeeds = seeds
            }
            if configuration.redisURL != nil && configuration.redisClusterSeeds != nil {
                throw Failure(message: "redis.url and redis.cluster cannot be used together")
            }
            if let v = redis["nodeId"] {
                let id = try string(v, "redis.nodeId")
                guard RedisPresenceOptions.isValidNodeID(id) else {
                    throw Failure(message: "redis.nodeId must be 1-64 letters, digits, '.', '_' or '-'")
                }
                configuration.nodeID = id
            }
            if let v = redis["presenceLease"] {
                configuration.presenceLeaseMillis = Int(try number(v, "redis.presenceLease", 1.5...3_600) * 1000)
            }
            if let v = redis["prefix"] {
                let prefix = try string(v, "redis.prefix")
                guard RedisKeyspace.isValidPrefix(prefix) else {
                    throw Failure(message: "redis.prefix must be 1-64 letters, digits, '.', '_', '-' or ':'")
                }
                configuration.redisKeyPrefix = prefix
            }
        }

        func channel(_ value: JSONValue, _ path: String) throws(Failure) -> ChannelSettings {
            let fields = try object(value, path, allowed: ["id", "secret", "requireAuth", "history", "limits"])
            guard let rawID = fields["id"] else { throw Failure(message: "\(path).id is missing") }
            let id = try string(rawID, "\(path).id")
            guard RoomKey.isValidName(id) else {
                throw Failure(message: "\(path).id must be 1-\(RoomKey.maxNameLength) bytes with no '/' or control characters")
            }
            var channel = ChannelSettings(id: id)
            if let v = fields["secret"] {
                let secret = try string(v, "\(path).secret")
                guard secret.utf8.count >= ChannelSettings.minimumSecretBytes else {
                    throw Failure(message: "\(path).secret must be at least \(ChannelSettings.minimumSecretBytes) bytes (it is \(secret.utf8.count)): tokens signed with a short secret can be brute-forced offline; use e.g. openssl rand -base64 32")
                }
                channel.secret = secret
            }
            if let v = fields["requireAuth"] { channel.requireAuth = try bool(v, "\(path).requireAuth") }
            if channel.requireAuth && channel.secret == nil {
                throw Failure(message: "\(path).secret is required when requireAuth is true (tokens are signed with it)")
            }
            if let v = fields["history"] {
                let history = try object(v, "\(path).history", allowed: ["retentionCount", "retentionDays"])
                if let v = history["retentionCount"] { channel.retentionCount = try integer(v, "\(path).history.retentionCount", 1...Int(Int32.max)) }
                if let v = history["retentionDays"] { channel.retentionDays = try integer(v, "\(path).history.retentionDays", 1...100_000) }
            }
            if let v = fields["limits"] {
                let limits = try object(v, "\(path).limits", allowed: ["publishRate", "maxUploadBytes", "uploadTypes",
                                                                         "uploadsPerMinute", "filesQuotaBytes"])
                if let v = limits["publishRate"] { channel.publishRate = try number(v, "\(path).limits.publishRate", 0.001...10_000_000) }
                if let v = limits["maxUploadBytes"] { channel.uploadMaxBytes = try integer(v, "\(path).limits.maxUploadBytes", 1...(16 << 30)) }
                if let v = limits["uploadTypes"] { channel.uploadTypes = try types(v, "\(path).limits.uploadTypes") }
                if let v = limits["uploadsPerMinute"] { channel.uploadsPerMinute = try integer(v, "\(path).limits.uploadsPerMinute", 1...1_000_000) }
                if let v = limits["filesQuotaBytes"] { channel.filesQuotaBytes = try integer(v, "\(path).limits.filesQuotaBytes", 0...(1 << 50)) }
            }
            return channel
        }
    }
}
