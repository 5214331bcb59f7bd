/// One argument of a command: sent as a RESP bulk string.
public enum RedisArgument: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    case bytes([UInt8])
    case string(String)
    case integer(Int64)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }

    /// The bytes as they go on the wire.
    public var bytes: [UInt8] {
        switch self {
        case .bytes(let bytes): return bytes
        case .string(let text): return Array(text.utf8)
        case .integer(let value): return Array(String(value).utf8)
        }
    }
}

/// A command: its name and arguments, how long to wait for the reply, and which argument is
/// the key a Redis Cluster routes it by.
public struct RedisCommand: Sendable, Hashable {
    /// Name first (`["SET", "k", "v"]`).
    public var arguments: [RedisArgument]
    /// Index in ``arguments`` of the key that picks the cluster slot; nil sends the command to
    /// any node. Derived from the name for common commands (see ``init(_:keyIndex:timeoutMillis:)``).
    public var keyIndex: Int?
    /// How long to wait for the reply; nil uses the connection's configured timeout.
    public var timeoutMillis: Int?

    /// A command; `keyIndex` nil derives it: argument 1 for single-key commands (`GET`, `SET`,
    /// `HSET`, `XADD`, `XRANGE`, `ZADD`, `SPUBLISH`, …), the first key of `EVAL`/`EVALSHA`/
    /// `FCALL` (none when `numkeys` is 0), the first stream of `XREAD`; keyless commands
    /// (`PING`, `SCRIPT LOAD`, `PUBLISH`, …) get none.
    public init(_ arguments: [RedisArgument], keyIndex: Int? = nil, timeoutMillis: Int? = nil) {
        self.arguments = arguments
        self.keyIndex = keyIndex ?? RedisCommand.defaultKeyIndex(arguments)
        self.timeoutMillis = timeoutMillis
    }

    /// `RedisCommand("SET", "k", "v")`
    public init(_ name: String, _ arguments: RedisArgument...) {
        self.init([.string(name)] + arguments)
    }

    /// The command name, upper-cased.
    public var name: String {
        guard let first = arguments.first else { return "" }
        if case .string(let text) = first { return text.uppercased() }
        return String(decoding: first.bytes, as: UTF8.self).uppercased()
    }

    /// The bytes of the routing key, if the command has one.
    public var routingKey: [UInt8]? {
        guard let keyIndex, keyIndex < arguments.count else { return nil }
        return arguments[keyIndex].bytes
    }

    private static let firstArgumentKeyCommands: Set<String> = [
        "GET", "SET", "SETNX", "SETEX", "PSETEX", "GETSET", "GETDEL", "GETEX", "APPEND", "STRLEN",
        "INCR", "INCRBY", "INCRBYFLOAT", "DECR", "DECRBY", "DEL", "UNLINK", "EXISTS", "EXPIRE",
        "PEXPIRE", "EXPIREAT", "PEXPIREAT", "PERSIST", "TTL", "PTTL", "TYPE", "MGET", "MSET",
        "SETRANGE", "GETRANGE", "DUMP", "RESTORE", "WATCH",
        "HSET", "HSETNX", "HGET", "HMGET", "HMSET", "HDEL", "HGETALL", "HKEYS", "HVALS", "HLEN",
        "HEXISTS", "HINCRBY", "HINCRBYFLOAT", "HSCAN", "HSTRLEN", "HRANDFIELD",
        "LPUSH", "RPUSH", "LPOP", "RPOP", "LRANGE", "LLEN", "LTRIM", "LINDEX", "LREM", "LSET",
        "SADD", "SREM", "SMEMBERS", "SISMEMBER", "SMISMEMBER", "SCARD", "SPOP", "SRANDMEMBER", "SSCAN",
        "ZADD", "ZREM", "ZRANGE", "ZREVRANGE", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZREMRANGEBYSCORE",
        "ZREMRANGEBYRANK", "ZSCORE", "ZMSCORE", "ZCARD", "ZCOUNT", "ZINCRBY", "ZRANK", "ZREVRANK",
        "ZSCAN", "ZPOPMIN", "ZPOPMAX", "ZRANGEBYLEX",
        "XADD", "XRANGE", "XREVRANGE", "XLEN", "XTRIM", "XDEL", "XACK", "XCLAIM", "XAUTOCLAIM",
        "XPENDING", "XSETID", "SPUBLISH", "PFADD", "PFCOUNT", "BITCOUNT", "SETBIT", "GETBIT",
    ]
    private static let scriptCommands: Set<String> = ["EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"]

    static func defaultKeyIndex(_ arguments: [RedisArgument]) -> Int? {
        guard arguments.count >= 2, case .string(let raw) = arguments[0] else { return nil }
        let name = raw.uppercased()
        if firstArgumentKeyCommands.contains(name) { return 1 }
        if scriptCommands.contains(name) {
            guard arguments.count >= 4, let keys = RESPNumber.parseInt64(arguments[2].bytes[...]), keys > 0 else { return nil }
            return 3
        }
        if name == "XREAD" || name == "XREADGROUP" {
            for index in 1..<arguments.count - 1 {
                if case .string(let word) = arguments[index], word.uppercased() == "STREAMS" { return index + 1 }
            }
        }
        return nil
    }
}

/// Writes commands as RESP arrays of bulk strings into one buffer that is reused, so steady
/// pipelining allocates nothing here.
public struct RESPCommandEncoder {
    /// The encoded bytes since the last ``clear()``.
    public private(set) var buffer: [UInt8] = []

    public init(capacity: Int = 4096) {
        buffer.reserveCapacity(capacity)
    }

    /// Forgets the bytes, keeping the capacity (unless one huge command grew it).
    public mutating func clear() {
        buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 20)
    }

    /// Appends `command`.
    public mutating func encode(_ command: RedisCommand) {
        encode(command.arguments)
    }

    /// Appends `*N\r\n` and one `$len\r\n…\r\n` per argument.
    public mutating func encode(_ arguments: [RedisArgument]) {
        buffer.append(UInt8(ascii: "*"))
        appendDecimal(Int64(arguments.count))
        appendCRLF()
        for argument in arguments {
            switch argument {
            case .bytes(let bytes):
                header(bytes.count)
                buffer.append(contentsOf: bytes)
            case .string(let text):
                var text = text
                text.withUTF8 { utf8 in
                    header(utf8.count)
                    buffer.append(contentsOf: utf8)
                }
            case .integer(let value):
                var digits = (0 as UInt64, 0 as UInt64, 0 as UInt64)  // 24 bytes fit Int64.min
                let count = withUnsafeMutableBytes(of: &digits) { Self.decimal(value, into: $0) }
                header(count)
                withUnsafeBytes(of: &digits) { buffer.append(contentsOf: $0[(24 - count)...]) }
            }
            appendCRLF()
        }
    }

    private mutating func header(_ length: Int) {
        buffer.append(UInt8(ascii: "$"))
        appendDecimal(Int64(length))
        appendCRLF()
    }

    private mutating func appendCRLF() {
        buffer.append(UInt8(ascii: "\r"))
        buffer.append(UInt8(ascii: "\n"))
    }

    private mutating func appendDecimal(_ value: Int64) {
        var digits = (0 as UInt64, 0 as UInt64, 0 as UInt64)
        let count = withUnsafeMutableBytes(of: &digits) { Self.decimal(value, into: $0) }
        withUnsafeBytes(of: &digits) { buffer.append(contentsOf: $0[(24 - count)...]) }
    }

    /// Writes `value` right-aligned into the 24-byte scratch; returns the digit count.
    private static func decimal(_ value: Int64, into scratch: UnsafeMutableRawBufferPointer) -> Int {
        var magnitude = value.magnitude
        var position = scratch.count
        repeat {
            position -= 1
            scratch[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
        if value < 0 {
            position -= 1
            scratch[position] = UInt8(ascii: "-")
        }
        return scratch.count - position
    }
}
