import Foundation
import ParleyCore

/// Web Push (RFC 8030) with its payload encryption (RFC 8291, `aes128gcm`) and the server's
/// identification (RFC 8292, VAPID): what a browser's push service accepts.
enum WebPush {
    /// The body of one push: `salt ‖ rs ‖ idlen ‖ keyid (the sender's public key) ‖
    /// AES-128-GCM(plaintext ‖ 0x02)`, a single record. `sender` and `salt` are fresh per
    /// message; tests pass RFC 8291's own to check the result.
    static func encrypt(_ plaintext: [UInt8], p256dh: [UInt8], auth: [UInt8], sender: P256Key? = nil,
                        salt: [UInt8]? = nil) throws(P256Key.Failure) -> [UInt8] {
        let sender: P256Key = if let sender { sender } else { try P256Key.generate() }
        let salt = salt ?? PushCrypto.random(16)
        let receiver = try P256Key(publicKey: p256dh)
        let senderPublic = sender.publicKey
        let ecdh = try sender.sharedSecret(with: receiver)
        let keyInfo = Array("WebPush: info".utf8) + [0] + p256dh + senderPublic
        let ikm = PushCrypto.hkdf(salt: auth, ikm: ecdh, info: keyInfo, length: 32)
        let cek = PushCrypto.hkdf(salt: salt, ikm: ikm, info: Array("Content-Encoding: aes128gcm".utf8) + [0], length: 16)
        let nonce = PushCrypto.hkdf(salt: salt, ikm: ikm, info: Array("Content-Encoding: nonce".utf8) + [0], length: 12)
        let sealed = try PushCrypto.aes128gcm(key: cek, nonce: nonce, plaintext: plaintext + [2])
        let recordSize: UInt32 = 4096
        let header = salt + withUnsafeBytes(of: recordSize.bigEndian, Array.init) + [UInt8(senderPublic.count)] + senderPublic
        return header + sealed
    }

    /// The largest plaintext one push carries (push services take 4096 bytes of body).
    static let maxPlaintext = 3_993

    /// `Authorization: vapid t=JWT, k=KEY` for `endpoint`: an ES256 JWT with the endpoint's
    /// origin as `aud`, `exp` 12 hours on, and `subject` (a `mailto:` or `https:` contact).
    static func authorization(endpoint: String, key: P256Key, subject: String, nowSeconds: Int64) throws(P256Key.Failure) -> String {
        guard let url = URL(string: endpoint), let scheme = url.scheme, let host = url.host else {
            throw P256Key.Failure("not a URL: \(endpoint.prefix(80))")
        }
        let origin = "\(scheme)://\(host)" + (url.port.map { ":\($0)" } ?? "")
        let header = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
        let claims = JSONValue.object(["aud": .string(origin), "exp": .number(JSONNumber(Int(nowSeconds + 12 * 3600))),
                                       "sub": .string(subject)])
        let input = header + "." + Base64URL.encode(claims.serialized())
        let signature = try key.signES256(Array(input.utf8))
        return "vapid t=\(input).\(Base64URL.encode(signature)), k=\(Base64URL.encode(key.publicKey))"
    }
}
