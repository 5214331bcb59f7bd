import Testing
import ParleyHTTP
import ParleyIO
@testable import ParleyRedis
@testable import ParleyServer

/// The relay's own rules: which sessions are another node's, and what goes on to it.
@Suite struct EngineIORelayTests {
    /// A relay over a Redis client that never connects (nothing here sends a command).
    static func relay(address: String? = "127.0.0.1:8001", secret: String? = nil) throws -> (EngineIORelay, EventLoopGroup, RedisClient) {
        let group = EventLoopGroup(loopCount: 1)
        let client = RedisClient(endpoint: try RedisEndpoint(url: "redis://127.0.0.1:1"), group: group)
        let directory = RedisNodeDirectory(redis: client, keyspace: try RedisKeyspace(prefix: "t"))
        if let secret { directory.adopt(secret: secret) }
        return (EngineIORelay(nodeID: "node-a", directory: directory, address: address), group, client)
    }

    @Test func sessionIDsNameTheirNode() throws {
        let (relay, group, client) = try Self.relay()
        defer { client.close(); group.shutdown() }
        let sid = relay.sessionID(random: "abcdefghijklmnopqrst")
        #expect(sid == "node-a~abcdefghijklmnopqrst")
        #expect(relay.foreignNode(of: sid) == nil, "this node's own")
        #expect(relay.foreignNode(of: "node.b~abcdefghijklmnopqrst") == "node.b")
        #expect(relay.foreignNode(of: "abcdefghijklmnopqrst") == nil, "a session of a single node")
        #expect(relay.foreignNode(of: "bad node!~x") == nil && relay.foreignNode(of: "~x") == nil)
        #expect(relay.foreignNode(of: String(repeating: "n", count: 65) + "~x") == nil, "node ids are at most 64 bytes")
        // A node nobody can reach gives plain ids (its sessions cannot be handed to it).
        let unreachable = try Self.relay(address: nil)
        defer { unreachable.2.close(); unreachable.1.shutdown() }
        #expect(unreachable.0.sessionID(random: "r") == "r")
    }

    @Test func nothingGoesOnBeforeTheSecretIsKnownAndAForgedOneIsNotTrusted() throws {
        let (relay, group, client) = try Self.relay()
        defer { client.close(); group.shutdown() }
        let head = HTTPRequestHead(method: "GET", target: "/socket.io/?EIO=4&transport=polling&sid=b~x",
                                   headers: ["Host": "chat.example", EngineIORelay.secretHeader: "guess"])
        #expect(relay.forwarded(head, body: [], clientIP: "10.0.0.9") == nil)
        #expect(!relay.isFromNode(head))
    }

    @Test func aPollGoesOnOnceWithTheSecretTheClientAndConnectionClose() throws {
        let (relay, group, client) = try Self.relay(secret: "s3cret")
        defer { client.close(); group.shutdown() }
        let post = HTTPRequestHead(method: "POST", target: "/socket.io/?EIO=4&transport=polling&sid=b~x",
                                   headers: ["Host": "chat.example", "Connection": "keep-alive", "Content-Length": "2",
                                             EngineIORelay.secretHeader: "forged", EngineIORelay.clientHeader: "6.6.6.6"])
        let text = String(decoding: relay.forwarded(post, body: Array("40".utf8), clientIP: "10.0.0.9") ?? [], as: UTF8.self)
        #expect(text.hasPrefix("POST /socket.io/?EIO=4&transport=polling&sid=b~x HTTP/1.1\r\n"))
        #expect(text.contains("Host: chat.example\r\n") && text.contains("Connection: close\r\n") && !text.contains("keep-alive"))
        #expect(text.contains("Content-Length: 2\r\n") && text.hasSuffix("\r\n\r\n40"))
        // The client's own relay headers are dropped; the node's go on.
        #expect(text.contains("X-Parley-Relay: s3cret\r\n") && text.contains("X-Parley-Relay-For: 10.0.0.9\r\n"))
        #expect(!text.contains("forged") && !text.contains("6.6.6.6"))
        #expect(relay.isFromNode(HTTPRequestHead(method: "GET", target: "/", headers: [EngineIORelay.secretHeader: "s3cret"])))
        // An upgrade keeps its Connection and Upgrade, and its first frames follow the head.
        let upgrade = HTTPRequestHead(method: "GET", target: "/socket.io/?EIO=4&transport=websocket&sid=b~x",
                                      headers: ["Host": "chat.example", "Connection": "Upgrade", "Upgrade": "websocket",
                                                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13"])
        let frames: [UInt8] = [0x81, 0x81, 1, 2, 3, 4, 0x33]
        let bytes = relay.forwarded(upgrade, body: frames, clientIP: "10.0.0.9") ?? []
        let head = String(decoding: bytes.dropLast(frames.count), as: UTF8.self)
        #expect(head.contains("Connection: Upgrade\r\n") && head.contains("Upgrade: websocket\r\n") && !head.contains("Content-Length"))
        #expect(head.hasSuffix("\r\n\r\n") && Array(bytes.suffix(frames.count)) == frames)
    }

    @Test func addressesAreHostAndPort() {
        #expect(EngineIORelay.split("127.0.0.1:8080")! == ("127.0.0.1", 8080))
        #expect(EngineIORelay.split("[::1]:80")! == ("::1", 80))
        #expect(EngineIORelay.split("host") == nil && EngineIORelay.split("host:0") == nil && EngineIORelay.split(":80") == nil)
        #expect(EngineIORelay.split("host:99999") == nil)
    }
}
