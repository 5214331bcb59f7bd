import ParleyCore

/// The names of Parley's keys and channels in Redis, under one prefix (so several Parley
/// deployments, or test runs, can share a Redis).
///
/// Every key of a room carries the room's hash tag, `{channel/room}` with `{`, `}` and `%`
/// percent-encoded, so in a Redis Cluster a room lives on one shard and each of its scripts
/// touches one slot. Keys that span rooms (the node leases, each node's room list, each
/// channel's occupied rooms, the list of rooms with history) live on slots of their own.
///
/// | key | type | holds |
/// | --- | --- | --- |
/// | `P:{c/r}:o` | string | the room's last offset |
/// | `P:{c/r}:s` | stream | messages, entry id `<offset>-0`, fields `d` (record) and `t` (ms) |
/// | `P:{c/r}:i` | hash | client message id → `offset timestamp id` |
/// | `P:{c/r}:it` | sorted set | client message ids by timestamp (for expiry) |
/// | `P:{c/r}:c` | sharded channel | the room's events |
/// | `P:{c/r}:x` | set | offsets of deleted messages (tombstones over the stream) |
/// | `P:{c/r}:pq` | string | the last join sequence number |
/// | `P:{c/r}:pz` | sorted set | member ids by join sequence |
/// | `P:{c/r}:pd` | hash | member id → `node\nmember JSON` |
/// | `P:{c/r}:pn:NODE` | set | member ids a node holds in the room |
/// | `P:nodes` | sorted set | node incarnation → lease expiry (Redis time, ms) |
/// | `P:node:NODE:rooms` | set | `channel/room` of the rooms where a node holds members |
/// | `P:rooms:CHANNEL` | sorted set | names of a channel's occupied rooms (score 0, by name) |
/// | `P:streams` | set | `channel/room` of every room that has history |
public struct RedisKeyspace: Sendable, Hashable {
    /// Put before every key and channel name, followed by `:`.
    public let prefix: String

    /// A keyspace under `prefix` (letters, digits, `.`, `_`, `-`, `:`; 1-64 bytes).
    public init(prefix: String = "parley") throws(RedisError) {
        guard Self.isValidPrefix(prefix) else {
            throw RedisError(.invalidEndpoint, "a Redis key prefix must be 1-64 letters, digits, '.', '_', '-' or ':', got \"\(prefix)\"")
        }
        self.prefix = prefix
    }

    public static func isValidPrefix(_ prefix: String) -> Bool {
        !prefix.isEmpty && prefix.utf8.count <= 64 && prefix.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: ":"): true
            default: false
            }
        }
    }

    /// The keys of one room.
    public func room(_ room: RoomKey) -> RoomKeys {
        RoomKeys(base: "\(prefix):{\(Self.tag(room))}:")
    }

    /// The hash tag of a room: its `channel/room` with `%`, `{` and `}` percent-encoded (a
    /// `}` would end the tag early; `{` and `%` are encoded so the encoding is reversible),
    /// and `/` too in the channel, so the first `/` always separates the two.
    public static func tag(_ room: RoomKey) -> String {
        encode(room.channel, slash: true) + "/" + encode(room.room, slash: false)
    }

    static func encode(_ name: String, slash: Bool, braces: Bool = true) -> String {
        func special(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: "%") || (braces && (byte == UInt8(ascii: "{") || byte == UInt8(ascii: "}")))
                || (slash && byte == UInt8(ascii: "/"))
        }
        guard name.utf8.contains(where: special) else { return name }
        var out = ""
        for scalar in name.unicodeScalars {
            switch scalar {
            case "%": out += "%25"
            case "{" where braces: out += "%7B"
            case "}" where braces: out += "%7D"
            case "/" where slash: out += "%2F"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func decode(_ text: Substring) -> String {
        guard text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        var rest = Array(text.utf8)[...]
        while let byte = rest.popFirst() {
            if byte == UInt8(ascii: "%"), rest.count >= 2, let value = UInt8(String(decoding: rest.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                rest = rest.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Node incarnation → lease expiry.
    public var nodes: String { "\(prefix):nodes" }
    /// The rooms where a node incarnation holds members.
    public func nodeRooms(_ node: String) -> String { "\(prefix):node:\(node):rooms" }
    /// A channel's occupied rooms.
    public func occupiedRooms(_ channel: String) -> String { "\(prefix):rooms:\(Self.encode(channel, slash: false))" }
    /// Every room with history (for retention and recovery).
    public var streams: String { "\(prefix):streams" }
    /// Taken by the node that runs the background retention pass.
    public var retentionLock: String { "\(prefix):retention-lock" }

    /// `channel/room` (`%` and `/` percent-encoded in the channel), the way the cross-room
    /// sets name a room.
    static func roomName(_ room: RoomKey) -> String {
        encode(room.channel, slash: true, braces: false) + "/" + room.room
    }

    /// The room of a ``roomName(_:)`` (nil when it is not one).
    static func room(named name: String) -> RoomKey? {
        guard let slash = name.firstIndex(of: "/") else { return nil }
        return RoomKey(channel: decode(name[..<slash]), room: String(name[name.index(after: slash)...]))
    }
}

/// The keys (and the pub/sub channel) of one room, all with the room's hash tag.
public struct RoomKeys: Sendable, Hashable {
    /// `prefix:{tag}:`; every key of the room starts with it.
    public let base: String

    public var offset: String { base + "o" }
    public var stream: String { base + "s" }
    public var clientIDs: String { base + "i" }
    public var clientIDTimes: String { base + "it" }
    /// The room's sharded pub/sub channel.
    public var channel: String { base + "c" }
    /// Offsets of deleted messages: a stream entry cannot be rewritten, so reads show the
    /// ones listed here as tombstones.
    public var deleted: String { base + "x" }
    /// Messages' current state and the id index (a hash): `i:ID` → offset of a message;
    /// for a message at offset O that actions changed, `b:O` its latest body (JSON text),
    /// `t:O` the edit's time, `n:O` the edit count, `e:O` the offsets of its edits, `r:O` its
    /// reactions (`[[emoji, [[id, name], …]], …]`).
    public var state: String { base + "m" }
    public var joinSequence: String { base + "pq" }
    public var memberOrder: String { base + "pz" }
    public var memberData: String { base + "pd" }
    /// Prefix of the per-node member sets (`…:pn:NODE`).
    public var nodeMembersPrefix: String { base + "pn:" }
}
