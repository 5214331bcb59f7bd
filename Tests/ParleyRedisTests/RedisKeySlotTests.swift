import Testing
@testable import ParleyRedis

@Suite struct RedisKeySlotTests {
    @Test func crc16MatchesTheReferenceVector() throws {
        #expect(RedisKeySlot.crc16(Array("123456789".utf8)[...]) == 0x31C3)
    }

    @Test func slotsMatchRedis() throws {
        // Values from CLUSTER KEYSLOT on Redis 7.0.
        #expect(RedisKeySlot.slot(for: "foo") == 12182)
        #expect(RedisKeySlot.slot(for: "bar") == 5061)
        #expect(RedisKeySlot.slot(for: "hello") == 866)
        #expect(RedisKeySlot.slot(for: "") == 0)
    }

    @Test func hashTags() throws {
        #expect(RedisKeySlot.slot(for: "{user1000}.following") == RedisKeySlot.slot(for: "{user1000}.followers"))
        #expect(RedisKeySlot.slot(for: "{user1000}.following") == RedisKeySlot.slot(for: "user1000"))
        // Only the first {…} counts, and an empty {} means no tag.
        #expect(RedisKeySlot.slot(for: "foo{bar}{zap}") == RedisKeySlot.slot(for: "bar"))
        #expect(RedisKeySlot.slot(for: "foo{}{bar}") != RedisKeySlot.slot(for: "bar"))
        #expect(RedisKeySlot.slot(for: "foo{}{bar}") == Int(RedisKeySlot.crc16(Array("foo{}{bar}".utf8)[...]) & 0x3FFF))
        #expect(RedisKeySlot.slot(for: "foo{{bar}}zap") == RedisKeySlot.slot(for: "{bar"))
        #expect(RedisKeySlot.slot(for: "{unclosed") == Int(RedisKeySlot.crc16(Array("{unclosed".utf8)[...]) & 0x3FFF))
    }
}

@Suite struct RedisScriptDigestTests {
    @Test func digestIsWhatScriptLoadReturns() throws {
        // SCRIPT LOAD "return 1" on Redis 7.0 (SHA-1 itself: ParleyIOTests.SHA1DigestTests).
        #expect(RedisScript("return 1").sha1 == "e0e1f9fabfc9d4800c877a703b823ac0578ff8db")
    }
}

@Suite struct ClusterSlotMapTests {
    @Test func parsesClusterSlots() throws {
        func node(_ host: String, _ port: Int64) -> RedisValue {
            .array([.bulkString(Array(host.utf8)), .integer(port), .bulkString(Array("id".utf8)), .array([])])
        }
        let reply = RedisValue.array([
            .array([.integer(0), .integer(5460), node("127.0.0.1", 7000)]),
            .array([.integer(5461), .integer(10922), node("", 7001), node("127.0.0.1", 7004)]),
            .array([.integer(10923), .integer(16383), node("127.0.0.1", 7002)]),
        ])
        let template = RedisEndpoint(host: "127.0.0.1", port: 1, password: "pw")
        let queried = RedisEndpoint(host: "10.0.0.9", port: 7001)
        let map = try ClusterSlotMap(slotsReply: reply, template: template, queried: queried)
        #expect(map.nodes.map(\.address) == ["127.0.0.1:7000", "10.0.0.9:7001", "127.0.0.1:7002"])
        #expect(map.endpoint(forSlot: 0)?.port == 7000)
        #expect(map.endpoint(forSlot: 5461)?.host == "10.0.0.9")
        #expect(map.endpoint(forSlot: 16383)?.port == 7002)
        #expect(map.endpoint(forSlot: 16383)?.password == "pw")
        #expect(map.unservedSlotCount == 0)
        #expect(throws: RedisError.self) {
            try ClusterSlotMap(slotsReply: .array([.array([.integer(5), .integer(2), node("h", 1)])]), template: template, queried: queried)
        }
    }

    @Test func redirections() throws {
        let from = RedisEndpoint(host: "127.0.0.1", port: 7000, password: "pw")
        #expect(ClusterRedirection(RedisError(.server, "MOVED 3999 127.0.0.1:6381"), from: from)
                == .moved(slot: 3999, node: RedisEndpoint(host: "127.0.0.1", port: 6381, password: "pw")))
        #expect(ClusterRedirection(RedisError(.server, "ASK 12 10.0.0.2:7002"), from: from)
                == .ask(slot: 12, node: RedisEndpoint(host: "10.0.0.2", port: 7002, password: "pw")))
        #expect(ClusterRedirection(RedisError(.server, "MOVED 1 :7005"), from: from)
                == .moved(slot: 1, node: RedisEndpoint(host: "127.0.0.1", port: 7005, password: "pw")))
        #expect(ClusterRedirection(RedisError(.server, "TRYAGAIN Multiple keys request during rehashing of slot"), from: from) == .tryAgain)
        #expect(ClusterRedirection(RedisError(.server, "ERR MOVED"), from: from) == nil)
        #expect(ClusterRedirection(RedisError(.connection, "MOVED 1 h:1"), from: from) == nil)
        #expect(ClusterRedirection(RedisError(.server, "MOVED 99999 h:1"), from: from) == nil)
    }
}
