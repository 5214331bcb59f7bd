import Foundation
import Testing
import ParleyCore
import ParleyServer
import ParleyTestSupport

/// A node on `rediss://` (an ACL user, `--redis-tls-ca`) against `redis-server --tls-port`.
@Suite(.serialized) struct RedisTLSNodeTests {
    @Test func aNodeChatsOverTLSAsAnACLUser() throws {
        let (cert, key) = try makeTestCertificate()
        let tlsPort = try RedisServer.freePort()
        let redis = try RedisServer.start(extraArguments: [
            "--tls-port", "\(tlsPort)", "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert,
            "--tls-auth-clients", "no", "--user", "parley", "on", ">pw", "~*", "&*", "+@all",
        ])
        defer { redis.stop() }
        let node = try startTestServer { configuration in
            configuration.redisURL = "rediss://parley:pw@127.0.0.1:\(tlsPort)"
            configuration.redisTLSCAFile = cert
            configuration.nodeID = "tls-node"
            configuration.redisKeyPrefix = "tls-\(UUID().uuidString.prefix(8))"
        }
        defer { node.shutdown() }
        #expect(node.listeningLines.contains { $0.contains("on rediss://parley@127.0.0.1:\(tlsPort)") }, "\(node.listeningLines)")
        let client = try NativeClient.connect(node, clientData: ["name": "tia"])
        try client.subscribe("r")
        let receipt = try client.request(["type": "publish", "room": "r", "message": "over tls"], callback: 5)
        #expect(receipt["offset"] == 1, "\(receipt)")
        #expect(try client.allHistory("r").compactMap { $0["message"]?.stringValue } == ["over tls"])
        // It went through the TLS port as the ACL user: the plain port shows the stream.
        #expect(try redis.cli("--user", "parley", "--pass", "pw", "--no-auth-warning", "DBSIZE") != "0")
    }

    @Test func aNodeShowsItsClientCertificateToARedisThatAsksForOne() throws {
        let (cert, key) = try makeTestCertificate()
        let tlsPort = try RedisServer.freePort()
        // The self-signed certificate is the CA, the server's certificate and the node's.
        let redis = try RedisServer.start(extraArguments: [
            "--tls-port", "\(tlsPort)", "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "yes",
        ])
        defer { redis.stop() }
        let node = try startTestServer { configuration in
            configuration.redisURL = "rediss://127.0.0.1:\(tlsPort)"
            configuration.redisTLSCAFile = cert
            configuration.redisTLSCertFile = cert
            configuration.redisTLSKeyFile = key
            configuration.redisKeyPrefix = "mtls-\(UUID().uuidString.prefix(8))"
        }
        defer { node.shutdown() }
        let client = try NativeClient.connect(node, clientData: ["name": "mia"])
        try client.subscribe("r")
        let receipt = try client.request(["type": "publish", "room": "r", "message": "mutual tls"], callback: 5)
        #expect(receipt["offset"] == 1, "\(receipt)")
        // A key without its certificate stops the start, saying so.
        do {
            let broken = try ParleyServer(configuration: .forTests { configuration in
                configuration.redisURL = "rediss://127.0.0.1:\(tlsPort)"
                configuration.redisTLSCAFile = cert
                configuration.redisTLSKeyFile = key
            })
            broken.shutdown()
            Issue.record("a node started with a client key and no certificate")
        } catch {
            #expect("\(error)".contains("client certificate needs its private key"), "\(error)")
        }
    }

    @Test func anUnreadableCAFileStopsStartup() throws {
        do {
            let node = try ParleyServer(configuration: .forTests { configuration in
                configuration.redisURL = "rediss://127.0.0.1:1"
                configuration.redisTLSCAFile = "/nonexistent/ca.pem"
            })
            node.shutdown()
            Issue.record("a node started with a CA file that does not exist")
        } catch {
            #expect("\(error)".contains("TLS to Redis"), "\(error)")
        }
    }
}
