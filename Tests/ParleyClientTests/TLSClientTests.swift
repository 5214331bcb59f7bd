import Foundation
import ParleyClient
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

@Suite(.serialized) struct TLSClientTests {
    @Test func parleyClientChatsOverWSS() async throws {
        let (cert, key) = try makeTestCertificate()
        let server = try startClientTestServer { $0.tlsCertificateFile = cert; $0.tlsKeyFile = key }
        defer { server.shutdown(timeout: .seconds(1)) }
        var transport = LibUVWebSocketTransport()
        transport.trustedCertificatesFile = cert
        let url = URL(string: "wss://localhost:\(server.httpPort)/v3/websocket")!
        let alice = ParleyClient(url: url, channel: "demo", clientData: ["name": "alice"], transport: transport)
        let bob = ParleyClient(url: url, channel: "demo", clientData: ["name": "bob"], transport: transport)
        try await alice.connect()
        try await bob.connect()
        let aliceRoom = try await alice.subscribe("secure")
        let bobRoom = try await bob.subscribe("secure")
        let stream = bobRoom.events
        let ack = try await aliceRoom.publish(text: "over TLS")
        #expect(ack.offset == 1)
        var received: String?
        for await event in stream {
            if case .message(let message) = event { received = message.text; break }
        }
        #expect(received == "over TLS")
        await alice.disconnect()
        await bob.disconnect()
    }

    @Test func untrustedCertificateIsRefused() async throws {
        let (cert, key) = try makeTestCertificate()
        let server = try startClientTestServer { $0.tlsCertificateFile = cert; $0.tlsKeyFile = key }
        defer { server.shutdown(timeout: .seconds(1)) }
        // The system store does not know a fresh self-signed certificate.
        do {
            _ = try await LibUVWebSocketTransport().open(try ParleyEndpoint(url: URL(string: "wss://localhost:\(server.httpPort)/v3/websocket")!)) { _ in }
            Issue.record("an untrusted certificate was accepted")
        } catch {
            #expect(error.code == .connectionFailed)
            #expect(error.message.contains("TLS") || error.message.contains("certificate"), "\(error.message)")
        }
    }
}
