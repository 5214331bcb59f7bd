import Foundation
import Testing
import ParleyIO
@testable import ParleyRedis
import ParleyTestSupport

/// `rediss://` against a redis-server with `--tls-port` and certificates made by openssl.
@Suite(.serialized) struct RedisTLSTests {
    /// A CA, and a server certificate it signed for 127.0.0.1 and localhost.
    static func certificates(in directory: String) throws {
        func openssl(_ arguments: String...) throws { try RedisServer.run("openssl", arguments) }
        try openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=Parley test CA",
                    "-keyout", "\(directory)/ca.key", "-out", "\(directory)/ca.crt")
        try openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                    "-keyout", "\(directory)/server.key", "-out", "\(directory)/server.csr")
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(toFile: "\(directory)/san.ext", atomically: true, encoding: .utf8)
        try openssl("x509", "-req", "-in", "\(directory)/server.csr", "-CA", "\(directory)/ca.crt", "-CAkey", "\(directory)/ca.key",
                    "-CAcreateserial", "-days", "2", "-extfile", "\(directory)/san.ext", "-out", "\(directory)/server.crt")
        // A client certificate the CA signed (for a server that asks for one).
        try openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=parley-node",
                    "-keyout", "\(directory)/client.key", "-out", "\(directory)/client.csr")
        try openssl("x509", "-req", "-in", "\(directory)/client.csr", "-CA", "\(directory)/ca.crt", "-CAkey", "\(directory)/ca.key",
                    "-CAcreateserial", "-days", "2", "-out", "\(directory)/client.crt")
        // A second CA that signed nothing here.
        try openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=Other CA",
                    "-keyout", "\(directory)/other.key", "-out", "\(directory)/other.crt")
    }

    /// A redis-server on a TLS port with the certificates of ``certificates(in:)`` (in a
    /// fresh directory the caller removes).
    /// A client the server turns away: reported down, and a command through it fails.
    static func expectRefused(_ client: RedisClient, _ what: String) async throws {
        try await eventually("\(what) is reported down", timeout: 10) { client.status.state == .down }
        guard case .failure = try await client.result(RedisCommand("PING"), timeout: 5) else {
            Issue.record("a command went through: \(what)")
            return
        }
    }

    static func tlsServer(clientCertificates: Bool, extra: [String] = []) throws -> (RedisServer, port: Int, directory: String) {
        let directory = NSTemporaryDirectory() + "parley-redis-tls-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try certificates(in: directory)
        let tlsPort = try RedisServer.freePort()
        let redis = try RedisServer.start(extraArguments: [
            "--tls-port", "\(tlsPort)", "--tls-cert-file", "\(directory)/server.crt", "--tls-key-file", "\(directory)/server.key",
            "--tls-ca-cert-file", "\(directory)/ca.crt", "--tls-auth-clients", clientCertificates ? "yes" : "no",
        ] + extra)
        return (redis, tlsPort, directory)
    }

    @Test func rediss() async throws {
        let (redis, tlsPort, directory) = try Self.tlsServer(clientCertificates: false, extra: ["--user", "chat", "on", ">s3cret", "~*", "&*", "+@all"])
        defer { redis.stop(); try? FileManager.default.removeItem(atPath: directory) }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }

        let endpoint = try RedisEndpoint(url: "rediss://chat:s3cret@127.0.0.1:\(tlsPort)/2")
        #expect(endpoint.usesTLS && endpoint.username == "chat" && endpoint.database == 2)
        #expect(endpoint.description == "rediss://chat@127.0.0.1:\(tlsPort)/2")
        var configuration = fastConfiguration()
        configuration.tls = RedisTLS(context: try TLSContext(clientTrusting: "\(directory)/ca.crt"))
        let client = RedisClient(endpoint: endpoint, group: group, configuration: configuration)
        defer { client.close() }
        #expect(try await client.call("SET", "k", "over tls").string == "OK")
        #expect(try await client.call("ACL", "WHOAMI").string == "chat")
        #expect(try redis.cli("-n", "2", "GET", "k") == "over tls", "stored in database 2 of the same server")

        // A server whose certificate chains to another CA is refused.
        var untrusting = fastConfiguration()
        untrusting.tls = RedisTLS(context: try TLSContext(clientTrusting: "\(directory)/other.crt"))
        let refused = RedisClient(endpoint: endpoint, group: group, configuration: untrusting)
        defer { refused.close() }
        try await Self.expectRefused(refused, "a server whose certificate is not trusted")
        // The wrong name is refused too (the certificate names 127.0.0.1 and localhost).
        var misnamed = configuration
        misnamed.tls?.serverName = "redis.example"
        let wrongName = RedisClient(endpoint: endpoint, group: group, configuration: misnamed)
        defer { wrongName.close() }
        try await eventually("the misnamed server is reported down", timeout: 10) { wrongName.status.state == .down }
        // rediss:// without TLS settings says so.
        let bare = RedisClient(endpoint: endpoint, group: group, configuration: fastConfiguration())
        defer { bare.close() }
        try await eventually("rediss:// without TLS settings is down", timeout: 10) { bare.status.state == .down }
        #expect(bare.status.message?.contains("needs TLS settings") == true, "\(bare.status)")
        // A wrong password is refused.
        let wrongPassword = RedisClient(endpoint: try RedisEndpoint(url: "rediss://chat:nope@127.0.0.1:\(tlsPort)"), group: group,
                                        configuration: configuration)
        defer { wrongPassword.close() }
        try await eventually("a wrong password is down", timeout: 10) { wrongPassword.status.state == .down }
    }

    @Test func aServerThatAsksForAClientCertificateTakesOnlyOneItsCASigned() async throws {
        let (redis, tlsPort, directory) = try Self.tlsServer(clientCertificates: true)
        defer { redis.stop(); try? FileManager.default.removeItem(atPath: directory) }
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let endpoint = try RedisEndpoint(url: "rediss://127.0.0.1:\(tlsPort)")
        var withCertificate = fastConfiguration()
        withCertificate.tls = RedisTLS(context: try TLSContext(clientTrusting: "\(directory)/ca.crt", certificateFile: "\(directory)/client.crt",
                                                               privateKeyFile: "\(directory)/client.key"))
        let client = RedisClient(endpoint: endpoint, group: group, configuration: withCertificate)
        defer { client.close() }
        #expect(try await client.call("SET", "k", "mutual tls").string == "OK")
        // Without a certificate, or with one another CA signed, the server refuses.
        var without = fastConfiguration()
        without.tls = RedisTLS(context: try TLSContext(clientTrusting: "\(directory)/ca.crt"))
        let bare = RedisClient(endpoint: endpoint, group: group, configuration: without)
        defer { bare.close() }
        try await Self.expectRefused(bare, "a client without a certificate")
        var foreign = fastConfiguration()
        foreign.tls = RedisTLS(context: try TLSContext(clientTrusting: "\(directory)/ca.crt", certificateFile: "\(directory)/other.crt",
                                                       privateKeyFile: "\(directory)/other.key"))
        let stranger = RedisClient(endpoint: endpoint, group: group, configuration: foreign)
        defer { stranger.close() }
        try await eventually("a certificate of another CA is down", timeout: 10) { stranger.status.state == .down }
        // The certificate needs its key, the key its certificate, and they must match.
        #expect(throws: IOError.self) { try TLSContext(clientTrusting: nil, certificateFile: "\(directory)/client.crt") }
        #expect(throws: IOError.self) {
            try TLSContext(clientTrusting: nil, certificateFile: "\(directory)/client.crt", privateKeyFile: "\(directory)/other.key")
        }
    }
}
