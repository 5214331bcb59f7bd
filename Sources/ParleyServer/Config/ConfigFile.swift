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
            let flag = ServerSetting.configFlag
            if argument == flag, index + 1 < arguments.count {
                found = arguments[index + 1]
                index += 1
            } else if argument.hasPrefix(flag + "=") {
                found = String(argument.dropFirst(flag.count + 1))
            }
            index += 1
        }
        if let found { return found }
        if let path = environment[ServerSetting.configEnvironment], !path.isEmpty { return path }
        return nil
    }
}

/// The JSON configuration file (`parley serve --config FILE`, or `PARLEY_CONFIG`): applied
/// first, so `PARLEY_*` variables and flags override it. Every setting of
/// ``ServerSetting/table`` has a dotted path in it, with the same rule as its flag; older keys
/// (`limits.nativeMaxRooms`, `redis.url`, ...) are the table's aliases and still read. Unknown
/// keys and bad values are errors naming the key path (`channels[1].requireAuth must be true
/// or false`).
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
///   "doors": {"native": {"max_rooms": 100, "publish_rate_per_second": 50}, "line": {"port": 8081}},
///   "limits": {"write_queue_bytes": 4194304},
///   "files": {"directory": "/srv/parley-files", "public_url": "https://chat.example.com"},
///   "history": {"retention_count": 10000},
///   "tls": {"cert": "/etc/parley/cert.pem", "key": "/etc/parley/key.pem", "line": false},
///   "log": {"level": "info", "format": "json"},
///   "metrics": {"token": "a-long-random-scrape-token"},
///   "admin": {"token": "a-long-random-admin-token"},
///   "cluster": {"redis_url": "redis://127.0.0.1:6379", "node_id": "node-1", "presence_lease_seconds": 10}
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

        /// The paths the file may hold: every setting's (``ServerSetting/table``) and its
        /// aliases, and the channel list.
        static let leaves: [String: Int] = {
            var leaves: [String: Int] = [:]
            for (index, setting) in ServerSetting.table.enumerated() {
                for path in setting.paths {
                    precondition(leaves.updateValue(index, forKey: path) == nil, "config-file path \(path) is in the table twice")
                }
            }
            return leaves
        }()
        static let listKeys = ["openChannels", "channels"]
        /// Every object a leaf lies in (`doors`, `doors.native`, ...).
        static let branches: Set<String> = {
            var branches = Set<String>()
            for path in leaves.keys {
                var parts = path.split(separator: ".").dropLast()
                while !parts.isEmpty {
                    branches.insert(parts.joined(separator: "."))
                    parts.removeLast()
                }
            }
            precondition(branches.isDisjoint(with: leaves.keys), "a config-file path is both a value and an object")
            return branches
        }()

        /// The keys an object at `prefix` may hold, documented paths first.
        static func allowed(under prefix: String) -> [String] {
            let paths = ServerSetting.table.flatMap { $0.path.map { [$0] } ?? [] } + listKeys + ServerSetting.table.flatMap(\.aliases)
            var keys: [String] = []
            for path in paths {
                guard prefix.isEmpty || path.hasPrefix(prefix + ".") else { continue }
                let rest = prefix.isEmpty ? path : String(path.dropFirst(prefix.count + 1))
                let key = String(rest.prefix { $0 != "." })
                if !keys.contains(key) { keys.append(key) }
            }
            return keys
        }

        /// Collects the values at known paths; an unknown or duplicate key is an error naming its path.
        func collect(_ object: JSONObject, at prefix: String, into found: inout [(path: String, value: JSONValue)]) throws(Failure) {
            var seen = Set<String>()
            for (key, value) in object {
                let path = prefix.isEmpty ? key : "\(prefix).\(key)"
                guard seen.insert(key).inserted else { throw Failure(message: "duplicate key \(path)") }
                if Self.leaves[path] != nil || (prefix.isEmpty && Self.listKeys.contains(key)) {
                    found.append((path, value))
                } else if Self.branches.contains(path) {
                    guard case .object(let inner) = value else { throw Failure(message: "\(path) must be an object") }
                    try collect(inner, at: path, into: &found)
                } else {
                    throw Failure(message: "unknown key \(path) (allowed here: \(Self.allowed(under: prefix).joined(separator: ", ")))")
                }
            }
        }

        mutating func apply(_ root: JSONValue, to configuration: inout ServerConfiguration) throws(Failure) {
            guard case .object(let top) = root else { throw Failure(message: "the top level must be an object") }
            var found: [(path: String, value: JSONValue)] = []
            try collect(top, at: "", into: &found)
            // One value per setting, under its path or one alias.
            var bySetting: [Int: (path: String, value: JSONValue)] = [:]
            for item in found {
                guard let index = Self.leaves[item.path] else { continue }
                if let other = bySetting[index] {
                    throw Failure(message: "\(other.path) and \(item.path) set the same setting; keep \(ServerSetting.table[index].path ?? item.path)")
                }
                bySetting[index] = item
            }
            // In table order: a burst row comes after its rate, whatever the key order.
            for (index, setting) in ServerSetting.table.enumerated() {
                guard let (path, value) = bySetting[index] else { continue }
                do throws(ServerConfiguration.UsageError) {
                    try setting.apply(&configuration, .json(value), path)
                } catch {
                    throw Failure(message: error.description)
                }
            }
            func given(_ field: AnyKeyPath) -> String? {
                bySetting.first { ServerSetting.table[$0.key].landsIn(field) }?.value.path
            }
            if given(\ServerConfiguration.tlsCertificateFile) != nil || given(\ServerConfiguration.tlsKeyFile) != nil,
               (configuration.tlsCertificateFile == nil) != (configuration.tlsKeyFile == nil) {
                throw Failure(message: "tls needs both cert and key")
            }
            if let url = given(\ServerConfiguration.redisURL), let seeds = given(\ServerConfiguration.redisClusterSeeds) {
                throw Failure(message: "\(url) and \(seeds) cannot be used together")
            }
            if let sentinels = given(\ServerConfiguration.redisSentinels), let seeds = given(\ServerConfiguration.redisClusterSeeds) {
                throw Failure(message: "\(sentinels) and \(seeds) cannot be used together")
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
