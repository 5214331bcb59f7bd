import Foundation
import Testing
import ParleyCore
@testable import ParleyServer

@Suite struct ConfigFileTests {
    func load(_ text: String) throws(ServerConfiguration.UsageError) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        try ConfigFile.apply(Array(text.utf8), name: "parley.json", to: &configuration)
        return configuration
    }

    func message(_ text: String) -> String? {
        do { _ = try load(text); return nil } catch { return error.description }
    }

    static let full = """
    {
      "openChannels": false,
      "channels": [
        {"id": "acme", "secret": "4W1xq9cS0vZk8Yb2HnT5rEu7LpJ3mQ6d", "requireAuth": true,
         "history": {"retentionCount": 500, "retentionDays": 30}, "limits": {"publishRate": 10}},
        {"id": "public"}
      ],
      "limits": {"nativeRatePerSecond": 25, "writeQueueLimit": 65536, "nativeMaxRooms": 7,
                 "webSocketMaxMessageSize": 2048, "lineMaxLength": 100, "httpMaxBodyBytes": 2048},
      "history": {"retentionCount": 10000},
      "tls": {"cert": "/etc/parley/cert.pem", "key": "/etc/parley/key.pem", "line": true}
    }
    """

    @Test func readsEverySection() throws {
        let c = try load(Self.full)
        #expect(!c.openChannels)
        #expect(c.channels.count == 2)
        #expect(c.channels[0].id == "acme" && c.channels[0].secret == "4W1xq9cS0vZk8Yb2HnT5rEu7LpJ3mQ6d" && c.channels[0].requireAuth)
        #expect(c.channels[0].retentionCount == 500 && c.channels[0].retentionDays == 30 && c.channels[0].publishRate == 10)
        #expect(c.channels[1].secret == nil && !c.channels[1].requireAuth)
        #expect(c.nativeRatePerSecond == 25 && c.nativeBurst == 50)
        #expect(c.writeQueueLimit == 65536 && c.nativeMaxRooms == 7 && c.webSocketMaxMessageSize == 2048)
        #expect(c.lineMaxLength == 100 && c.httpMaxBodyBytes == 2048)
        #expect(c.retentionCount == 10000)
        #expect(c.tlsCertificateFile == "/etc/parley/cert.pem" && c.tlsKeyFile == "/etc/parley/key.pem" && c.lineTLS)
        #expect(c.refusal(ofChannel: "acme") == nil)
        #expect(c.refusal(ofChannel: "public") == nil)
        #expect(c.refusal(ofChannel: "other") == "channel \"other\" is not open on this server")
    }

    @Test func listingChannelsClosesTheOthersUnlessOpenChannelsSaysSo() throws {
        #expect(ServerConfiguration().openChannels)
        #expect(try load(#"{"limits": {}}"#).openChannels)
        #expect(!(try load(#"{"channels": [{"id": "a"}]}"#).openChannels))
        #expect(try load(#"{"openChannels": true, "channels": [{"id": "a"}]}"#).openChannels)
        #expect(try load(#"{"channels": [{"id": "a"}], "openChannels": true}"#).openChannels)
    }

    /// A token is all it takes to test guesses of its secret offline (one HMAC each), so the
    /// config file refuses a secret under 32 bytes, saying why.
    @Test func secretsAreAtLeast32Bytes() throws {
        #expect(message(#"{"channels": [{"id": "a", "secret": "s3cret"}]}"#)
                == "config file parley.json: channels[0].secret must be at least 32 bytes (it is 6): tokens signed with a short secret can be brute-forced offline; use e.g. openssl rand -base64 32")
        #expect(message(#"{"channels": [{"id": "a", "secret": "\#(String(repeating: "x", count: 31))", "requireAuth": true}]}"#)?
                    .contains("channels[0].secret must be at least 32 bytes (it is 31)") == true)
        #expect(try load(#"{"channels": [{"id": "a", "secret": "\#(String(repeating: "é", count: 16))"}]}"#).channels[0].secret?.utf8.count == 32,
                "bytes, not characters")
    }

    @Test func errorsNameTheKeyPath() {
        #expect(message(#"{"channels": [{"id": "a"}, {"id": "b", "requireAuth": "yes", "secret": "4W1xq9cS0vZk8Yb2HnT5rEu7LpJ3mQ6d"}]}"#)
                == "config file parley.json: channels[1].requireAuth must be true or false")
        #expect(message(#"{"chanels": []}"#)?.hasPrefix("config file parley.json: unknown key chanels (allowed here:") == true)
        #expect(message(#"{"channels": [{"id": "a", "colour": 1}]}"#)?.hasPrefix("config file parley.json: unknown key channels[0].colour") == true)
        #expect(message(#"{"limits": {"nativeMaxRooms": "many"}}"#) == "config file parley.json: limits.nativeMaxRooms must be a whole number in 1...100000")
        #expect(message(#"{"limits": {"nativeMaxRooms": 0}}"#) == "config file parley.json: limits.nativeMaxRooms must be a whole number in 1...100000")
        #expect(message(#"{"channels": [{"id": "a", "requireAuth": true}]}"#)?.contains("channels[0].secret is required") == true)
        #expect(message(#"{"channels": [{"secret": "x"}]}"#) == "config file parley.json: channels[0].id is missing")
        #expect(message(#"{"channels": [{"id": "a/b"}]}"#)?.contains("channels[0].id must be") == true)
        #expect(message(#"{"channels": [{"id": "a"}, {"id": "a"}]}"#)?.contains("listed twice") == true)
        #expect(message(#"{"channels": {"id": "a"}}"#) == "config file parley.json: channels must be an array of objects")
        #expect(message(#"{"tls": {"cert": "c"}}"#) == "config file parley.json: tls needs both cert and key")
        #expect(message(#"{"tls": {"cert": "c", "key": "k", "line": 1}}"#) == "config file parley.json: tls.line must be true or false")
        #expect(message(#"{"openChannels": "no"}"#) == "config file parley.json: openChannels must be true or false")
        #expect(message(#"{"channels": [{"id": "a", "limits": {"publishRate": -1}}]}"#)?.contains("channels[0].limits.publishRate must be a number") == true)
        #expect(message("[1]") == "config file parley.json: the top level must be an object")
        #expect(message(#"{"channels": [ {"id": "a"} "#)?.hasPrefix("config file parley.json: invalid JSON") == true)
    }

    @Test func missingFileIsNamed() {
        var configuration = ServerConfiguration()
        #expect(throws: ServerConfiguration.UsageError(description: "config file /nonexistent/parley.json: no such file")) {
            try ConfigFile.load(path: "/nonexistent/parley.json", into: &configuration)
        }
    }

    @Test func environmentAndFlagsOverrideTheFile() throws {
        let path = NSTemporaryDirectory() + "parley-config-\(UUID().uuidString).json"
        try Data(#"{"limits": {"nativeMaxRooms": 7, "writeQueueLimit": 65536, "lineMaxLength": 100}}"#.utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fromFlag = try #require(try ServerConfiguration.parse(arguments: ["--config", path, "--max-rooms", "9"],
                                                                  environment: ["PARLEY_WRITE_QUEUE_LIMIT": "8192"]))
        #expect(fromFlag.nativeMaxRooms == 9)
        #expect(fromFlag.writeQueueLimit == 8192)
        #expect(fromFlag.lineMaxLength == 100)
        let fromEnv = try #require(try ServerConfiguration.parse(arguments: [], environment: ["PARLEY_CONFIG": path]))
        #expect(fromEnv.nativeMaxRooms == 7)
        #expect(throws: ServerConfiguration.UsageError.self) {
            try ServerConfiguration.parse(arguments: ["--config=/nonexistent.json"], environment: [:])
        }
    }
}
