import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// The native door and HTTP over real sockets (smoke tests); the door's rules are tested
/// in-process in Tests/ParleyServerTests/NativeDoorInProcessTests.
@Suite(.serialized) struct NativeDoorTests {
    @Test func handshakeSubscribeAndObservableMembers() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice", "color": "#FF0000"])
        #expect(!alice.clientID.isEmpty)
        let reply = try await alice.subscribe("observable-room")
        #expect(reply.objectValue?.count == 1)
        let members = try await alice.next()
        #expect(members["type"] == "observable_members")
        #expect(members["room"] == "observable-room")
        #expect(members["data"] == .array([["id": .string(alice.clientID), "clientData": ["name": "alice", "color": "#FF0000"]]]))
    }

    @Test func keepAliveAndPipelining() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let socket = try TestSocket(port: server.httpPort)
        try socket.send("GET /demo/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /demo/rooms HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        #expect(await socket.closed(within: 5))
        let text = String(decoding: socket.buffered, as: UTF8.self)
        #expect(text.components(separatedBy: "HTTP/1.1 200").count == 3)
        #expect(text.contains(#"{"users_count":0}"#))
        #expect(text.hasSuffix("[]"))
    }
}
