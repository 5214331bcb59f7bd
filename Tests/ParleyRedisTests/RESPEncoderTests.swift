import Testing
@testable import ParleyRedis

@Suite struct RESPEncoderTests {
    @Test func commandsAreArraysOfBulkStrings() throws {
        var encoder = RESPCommandEncoder()
        encoder.encode(RedisCommand("SET", "key", .bytes([0, 13, 10]), .integer(-42), .integer(Int64.min)))
        let expected = "*5\r\n$3\r\nSET\r\n$3\r\nkey\r\n$3\r\n\u{0}\r\n\r\n$3\r\n-42\r\n$20\r\n-9223372036854775808\r\n"
        #expect(encoder.buffer == Array(expected.utf8))
    }

    @Test func utf8LengthsAreBytesNotCharacters() throws {
        var encoder = RESPCommandEncoder()
        encoder.encode(RedisCommand("ECHO", "héllo 👋"))
        #expect(encoder.buffer == Array("*2\r\n$4\r\nECHO\r\n$11\r\nhéllo 👋\r\n".utf8))
    }

    @Test func theBufferIsReusedAndCommandsAppend() throws {
        var encoder = RESPCommandEncoder(capacity: 256)
        encoder.encode(RedisCommand("PING"))
        encoder.encode(RedisCommand("PING"))
        #expect(encoder.buffer == Array("*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n".utf8))
        let capacity = encoder.buffer.capacity
        encoder.clear()
        #expect(encoder.buffer.isEmpty)
        #expect(encoder.buffer.capacity == capacity)
        encoder.encode([.integer(0)])
        #expect(encoder.buffer == Array("*1\r\n$1\r\n0\r\n".utf8))
    }

    @Test func encodedCommandsDecodeBack() throws {
        var encoder = RESPCommandEncoder()
        let command = RedisCommand("XADD", "{c/r}:stream", "MAXLEN", "~", 1000, "*", "data", .bytes(Array(0...255)))
        encoder.encode(command)
        var decoder = RESPDecoder()
        decoder.feed(encoder.buffer)
        #expect(try decoder.next() == .array(command.arguments.map { .bulkString($0.bytes) }))
    }

    @Test func routingKeys() throws {
        #expect(RedisCommand("GET", "a").routingKey == Array("a".utf8))
        #expect(RedisCommand("xadd", "s", "*", "f", "v").keyIndex == 1)
        #expect(RedisCommand("PING").keyIndex == nil)
        #expect(RedisCommand("SCRIPT", "LOAD", "return 1").keyIndex == nil)
        #expect(RedisCommand("PUBLISH", "ch", "m").keyIndex == nil)
        #expect(RedisCommand("SPUBLISH", "ch", "m").keyIndex == 1)
        #expect(RedisCommand("EVALSHA", "abc", 2, "k1", "k2", "a").keyIndex == 3)
        #expect(RedisCommand("EVAL", "return 1", 0).keyIndex == nil)
        #expect(RedisCommand("XREAD", "COUNT", 10, "STREAMS", "s1", "0").keyIndex == 4)
        #expect(RedisCommand(["CUSTOM", "x", "key"], keyIndex: 2).routingKey == Array("key".utf8))
        #expect(RedisCommand("get", "k").name == "GET")
    }
}
