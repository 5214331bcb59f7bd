import Testing
import ParleyCore
@testable import ParleyServer

/// Web Push's payload encryption against RFC 8291's own example (Appendix A), and VAPID
/// signatures that verify.
@Suite struct WebPushTests {
    static func b64(_ text: String) -> [UInt8] { Base64URL.decode(text) ?? [] }

    @Test func theRFC8291ExampleEncryptsToItsPublishedBody() throws {
        let sender = try P256Key(publicKey: Self.b64("BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"),
                                 privateKey: Self.b64("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"))
        let body = try WebPush.encrypt(Array("When I grow up, I want to be a watermelon".utf8),
                                       p256dh: Self.b64("BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"),
                                       auth: Self.b64("BTBZMqHH6r4Tts7J_aSIgg"), sender: sender, salt: Self.b64("DGv6ra1nlYgDCS1FRnbzlw"))
        #expect(Base64URL.encode(body) == "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")
    }

    @Test func keysRoundTripAndAgreeOnASecret() throws {
        let a = try P256Key.generate(), b = try P256Key.generate()
        #expect(a.publicKey.count == 65 && a.publicKey[0] == 4 && a.privateKey.count == 32)
        let again = try P256Key(publicKey: a.publicKey, privateKey: a.privateKey)
        #expect(try again.sharedSecret(with: P256Key(publicKey: b.publicKey)) == b.sharedSecret(with: P256Key(publicKey: a.publicKey)))
        #expect(throws: P256Key.Failure.self) { try P256Key(publicKey: [4] + [UInt8](repeating: 1, count: 64)) }
        #expect(throws: P256Key.Failure.self) { try P256Key(publicKey: [1, 2, 3]) }
    }

    @Test func aVAPIDHeaderNamesTheOriginAndSignsWithTheKey() throws {
        let key = try P256Key.generate()
        let header = try WebPush.authorization(endpoint: "https://push.example.net:8443/send/abc?x=1", key: key,
                                               subject: "mailto:ops@example.org", nowSeconds: 1_000)
        #expect(header.hasPrefix("vapid t=") && header.hasSuffix(", k=" + Base64URL.encode(key.publicKey)))
        let token = String(header.dropFirst("vapid t=".count).prefix { $0 != "," })
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3 && Self.b64(parts[2]).count == 64)
        let claims = try JSONParser.parse(Self.b64(parts[1]))
        #expect(claims["aud"]?.stringValue == "https://push.example.net:8443" && claims["exp"]?.intValue == 1_000 + 43_200)
        #expect(claims["sub"]?.stringValue == "mailto:ops@example.org")
        // Two signatures of the same input differ (ECDSA is randomized) but are both 64 bytes.
        #expect(try key.signES256([1, 2, 3]) != key.signES256([1, 2, 3]))
    }
}

@Suite struct PushSettingsTests {
    @Test func onlyTheAllowedPushServicesCanBeNamed() throws {
        var configuration = ServerConfiguration()
        configuration.webPushEndpoints = ["https://fcm.googleapis.com/", "https://*.notify.windows.com/", "http://127.0.0.1:9999/"]
        let settings = try PushSettings(configuration)
        #expect(settings.vapid == nil, "no keys: push is off")
        #expect(settings.allows(endpoint: "https://fcm.googleapis.com/fcm/send/abc"))
        #expect(settings.allows(endpoint: "https://db5p.notify.windows.com/w/?token=x"))
        #expect(settings.allows(endpoint: "http://127.0.0.1:9999/push/1"))
        for bad in ["https://fcm.googleapis.com.evil.example/x", "https://evil.example/https://fcm.googleapis.com/",
                    "https://notify.windows.com.evil/x", "https://x@evil.notify.windows.com/", "http://169.254.169.254/latest",
                    "http://127.0.0.1:99990/x", "https://fcm.googleapis.com"] {
            #expect(!settings.allows(endpoint: bad), "\(bad)")
        }
    }

    @Test func bothVAPIDKeysOrNeither() throws {
        var configuration = ServerConfiguration()
        configuration.vapidPublicKey = "x"
        #expect(throws: StartupError.self) { try PushSettings(configuration) }
        let key = try P256Key.generate()
        configuration.vapidPublicKey = Base64URL.encode(key.publicKey)
        configuration.vapidPrivateKey = Base64URL.encode(key.privateKey)
        #expect(try PushSettings(configuration).vapid?.publicKey == key.publicKey)
        configuration.vapidPrivateKey = Base64URL.encode(try P256Key.generate().privateKey)
        #expect(throws: StartupError.self, "a private key of another pair") { try PushSettings(configuration) }
    }
}

/// A device is its owner's to remove: another user who knows the subscription (a token that
/// leaked) cannot unregister it, on the native door or over REST; its owner can.
@Suite struct PushDeviceOwnershipTests {
    @Test func onlyItsOwnerRemovesADevice() async throws {
        let vapid = try P256Key.generate()
        let server = try InProcessServer {
            $0.vapidPublicKey = Base64URL.encode(vapid.publicKey)
            $0.vapidPrivateKey = Base64URL.encode(vapid.privateKey)
            $0.webPushEndpoints = ["https://push.example/"]
        }
        defer { server.stop() }
        let store = try #require(server.server.core.pushService?.store)
        let subscription: JSONValue = ["endpoint": "https://push.example/send/1",
                                       "keys": ["p256dh": .string(Base64URL.encode(try P256Key.generate().publicKey)),
                                                "auth": .string(Base64URL.encode([UInt8](repeating: 9, count: 16)))]]
        func user(_ id: String, ip: String) async throws -> InProcessNative {
            let client = try await InProcessNative.open(server, ip: ip)
            client.send(["type": "handshake", "channel": "demo", "user_id": .string(id), "callback": 0])
            _ = try await client.next()
            return client
        }
        let bob = try await user("bob", ip: "192.0.2.41")
        bob.send(["type": "register_device", "platform": "webpush", "subscription": subscription, "callback": 1])
        #expect(try await bob.next { $0["callback"] == 1 }["error"] == nil)
        #expect(try store.devices(of: "bob", in: "demo").count == 1)
        let mallory = try await user("mallory", ip: "192.0.2.42")
        mallory.send(["type": "unregister_device", "platform": "webpush", "token": "https://push.example/send/1", "callback": 2])
        #expect(try await mallory.next { $0["callback"] == 2 }["error"] == nil, "the same answer: nothing to tell")
        let rest = try await server.request("POST", "/demo/users/mallory/devices",
                                            json: #"{"platform":"webpush","token":"https://push.example/send/1","unregister":true}"#,
                                            ip: "192.0.2.42")
        #expect(rest.status == 200)
        #expect(try store.devices(of: "bob", in: "demo").count == 1, "still bob's")
        bob.send(["type": "unregister_device", "platform": "webpush", "token": "https://push.example/send/1", "callback": 3])
        #expect(try await bob.next { $0["callback"] == 3 }["error"] == nil)
        #expect(try store.devices(of: "bob", in: "demo").isEmpty)
    }
}
