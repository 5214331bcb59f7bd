import Testing
@testable import ParleyRedis

@Suite struct RedisEndpointTests {
    @Test func urls() throws {
        #expect(try RedisEndpoint(url: "redis://127.0.0.1:6380/2") == RedisEndpoint(host: "127.0.0.1", port: 6380, database: 2))
        #expect(try RedisEndpoint(url: "redis://cache.internal") == RedisEndpoint(host: "cache.internal", port: 6379))
        #expect(try RedisEndpoint(url: "redis://:s3cret@localhost:7000") == RedisEndpoint(host: "localhost", port: 7000, password: "s3cret"))
        #expect(try RedisEndpoint(url: "redis://alice:p%40ss%2Fword@10.0.0.1/0")
                == RedisEndpoint(host: "10.0.0.1", port: 6379, username: "alice", password: "p@ss/word"))
        #expect(try RedisEndpoint(url: "redis://secret@h:1") == RedisEndpoint(host: "h", port: 1, password: "secret"))
        #expect(try RedisEndpoint(url: "redis://[::1]:6390/1") == RedisEndpoint(host: "::1", port: 6390, database: 1))
        #expect(try RedisEndpoint(url: "127.0.0.1:7001") == RedisEndpoint(host: "127.0.0.1", port: 7001))
        #expect(try RedisEndpoint(url: " redis://h/ ") == RedisEndpoint(host: "h"))
        #expect(try RedisEndpoint(url: "rediss://u:p@h:6380/1") == RedisEndpoint(host: "h", port: 6380, database: 1, username: "u", password: "p", usesTLS: true))
        #expect(try RedisEndpoint(url: "rediss://h").moved(to: "g", port: 2).usesTLS)
        #expect(try RedisEndpoint(url: "redis://h").usesTLS == false)
    }

    @Test func badURLs() throws {
        for url in ["rediss://", "rediss://h:0", "http://h", "redis://", "redis://h:0", "redis://h:70000", "redis://h:x",
                    "redis://h/db", "redis://h/-1", "redis://h?timeout=1", "redis://[::1", "redis://h h", "redis://:%zz@h"] {
            #expect(throws: RedisError.self, "\(url)") { try RedisEndpoint(url: url) }
            #expect((try? RedisEndpoint(url: url)) == nil)
        }
        do {
            _ = try RedisEndpoint(url: "https://h")
        } catch {
            #expect(error.code == .invalidEndpoint)
        }
    }

    @Test func descriptionHidesThePassword() throws {
        let endpoint = try RedisEndpoint(url: "redis://:hunter2@10.1.2.3:6380/3")
        #expect(endpoint.description == "redis://***@10.1.2.3:6380/3")
        #expect(!endpoint.description.contains("hunter2"))
        #expect(RedisEndpoint(host: "::1", port: 7000).address == "[::1]:7000")
    }

    @Test func seedLists() throws {
        #expect(try RedisEndpoint.seeds("127.0.0.1:7000, 127.0.0.1:7001,") == [
            RedisEndpoint(host: "127.0.0.1", port: 7000), RedisEndpoint(host: "127.0.0.1", port: 7001),
        ])
        #expect(throws: RedisError.self) { try RedisEndpoint.seeds(" , ") }
    }
}
