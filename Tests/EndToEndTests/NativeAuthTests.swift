import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// The token-expiry timer over a real socket; every other auth rule is tested in-process
/// (Tests/ParleyServerTests/AuthInProcessTests).
@Suite(.serialized) struct NativeAuthTests {
    typealias F = AuthFixtures

    @Test func theConnectionClosesWhenTheTokenExpires() async throws {
        let server = try startAuthServer()
        defer { server.shutdown() }
        let (client, _) = try await NativeClient.handshake(server, channel: "acme")
        let expMillis = Int64(Date().timeIntervalSince1970 * 1000) + 700
        #expect(try await client.authenticate(F.jwt(F.payload(client: client.clientID, exp: expMillis)))["error"] == nil)
        #expect(try await client.subscribe("room")["error"] == nil)
        let notice = try await client.next { $0["error"] != nil }
        #expect(notice["error"]?.stringValue?.contains("token expired") == true)
        #expect(try await client.ws.closeCode(timeout: 5) == 1008)
    }
}
