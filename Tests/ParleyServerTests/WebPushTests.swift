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
