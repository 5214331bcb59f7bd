import Foundation
import ParleyClient
import ParleyCore
import ParleyServer
import Testing

/// A self-signed certificate for localhost / 127.0.0.1, made with the openssl tool.
func makeSelfSignedCertificate() throws -> (cert: String, key: String) {
    let dir = NSTemporaryDirectory() + "parley-client-tls-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/key.pem",
                         "-out", dir + "/cert.pem", "-days", "1", "-subj", "/CN=localhost",
                         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw ParleyClientError(.connectionFailed, "openssl req failed") }
    return (dir + "/cert.pem", dir + "/key.pem")
}

@Suite(.serialized) struct TLSClientTests {
    @Test func parleyClientChatsOverWSS() async throws {
        let (cert, key) = try makeSelfSignedCertificate()
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
        let (cert, key) = try makeSelfSignedCertificate()
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
