import COpenSSL
import ParleyCore

/// A NIST P-256 key through OpenSSL: ECDH for Web Push payloads (RFC 8291), ES256 signatures
/// for VAPID (RFC 8292) and APNs provider tokens.
///
/// `@unchecked Sendable` proof: the key is immutable after init (OpenSSL's EVP_PKEY is
/// reference-counted and safe to use from several threads for derive and sign, which build
/// their own contexts per call).
final class P256Key: @unchecked Sendable {
    let pkey: OpaquePointer

    private init(_ pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ what: String) {
            let code = ERR_get_error()
            var buffer = [CChar](repeating: 0, count: 256)
            if code != 0 { ERR_error_string_n(code, &buffer, buffer.count) }
            description = code == 0 ? what : "\(what): \(String(cString: buffer))"
        }
    }

    /// A fresh random key pair.
    static func generate() throws(Failure) -> P256Key {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw Failure("EC keygen context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_group_name(ctx, "P-256") == 1,
              EVP_PKEY_generate(ctx, &pkey) == 1, let pkey else { throw Failure("EC key generation") }
        return P256Key(pkey)
    }

    /// A key from its raw parts: the uncompressed public point (65 bytes), and the private
    /// scalar (32 bytes) for a key pair.
    convenience init(publicKey: [UInt8], privateKey: [UInt8]? = nil) throws(Failure) {
        guard publicKey.count == 65, publicKey[0] == 4 else { throw Failure("a P-256 public key is 65 bytes, starting with 4") }
        if let privateKey, privateKey.count != 32 { throw Failure("a P-256 private key is 32 bytes") }
        guard let builder = OSSL_PARAM_BLD_new() else { throw Failure("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        var scalar: OpaquePointer?
        defer { BN_clear_free(scalar) }
        // The builder keeps pointers until OSSL_PARAM_BLD_to_param: the bytes must outlive the
        // calls that pass them (a Swift array or string passed as a pointer does not).
        let point = UnsafeMutablePointer<UInt8>.allocate(capacity: publicKey.count)
        point.initialize(from: publicKey, count: publicKey.count)
        defer { point.deallocate() }
        guard OSSL_PARAM_BLD_push_utf8_string(builder, parley_param_group(), parley_curve_p256(), 0) == 1,
              OSSL_PARAM_BLD_push_octet_string(builder, parley_param_pub(), point, publicKey.count) == 1 else { throw Failure("key parameters") }
        if let privateKey {
            scalar = BN_bin2bn(privateKey, Int32(privateKey.count), nil)
            guard scalar != nil, OSSL_PARAM_BLD_push_BN(builder, parley_param_priv(), scalar) == 1 else { throw Failure("private key parameter") }
        }
        guard let params = OSSL_PARAM_BLD_to_param(builder) else { throw Failure("OSSL_PARAM_BLD_to_param") }
        defer { OSSL_PARAM_free(params) }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw Failure("EC context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        let selection = privateKey == nil ? parley_evp_pkey_public_key() : parley_evp_pkey_keypair()
        guard EVP_PKEY_fromdata_init(ctx) == 1, EVP_PKEY_fromdata(ctx, &pkey, selection, params) == 1, let pkey else {
            throw Failure("not a P-256 key")
        }
        self.init(pkey)
    }

    /// A private key from PEM (PKCS#8, as an APNs `.p8` file holds it).
    convenience init(pem: String) throws(Failure) {
        self.init(try Self.privateKey(pem: pem, type: EVP_PKEY_EC, named: "EC"))
    }

    /// An OpenSSL private key of `type` read from PEM; the caller owns it.
    static func privateKey(pem: String, type: Int32, named name: String) throws(Failure) -> OpaquePointer {
        let bytes = Array(pem.utf8)
        // A memory BIO reads the caller's bytes in place: they must stay valid while it reads
        // (a Swift array passed as a pointer is valid only during that one call).
        let read = bytes.withUnsafeBufferPointer { buffer -> OpaquePointer?? in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return .none }
            defer { BIO_free(bio) }
            return .some(PEM_read_bio_PrivateKey(bio, nil, nil, nil))
        }
        guard let read else { throw Failure("BIO_new_mem_buf") }
        guard let pkey = read else { throw Failure("not a PEM private key") }
        guard EVP_PKEY_get_base_id(pkey) == type else {
            EVP_PKEY_free(pkey)
            throw Failure("not an \(name) key")
        }
        return pkey
    }

    /// A signature over SHA-256 of `message` with `pkey`, as OpenSSL makes it (DER for ECDSA,
    /// PKCS #1 v1.5 for RSA).
    static func digestSign(_ message: [UInt8], with pkey: OpaquePointer, what: String) throws(Failure) -> [UInt8] {
        guard let md = EVP_MD_CTX_new() else { throw Failure("digest context") }
        defer { EVP_MD_CTX_free(md) }
        var length = 0
        guard EVP_DigestSignInit(md, nil, EVP_sha256(), nil, pkey) == 1,
              EVP_DigestSign(md, nil, &length, message, message.count) == 1 else { throw Failure(what) }
        var out = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(md, &out, &length, message, message.count) == 1 else { throw Failure(what) }
        return Array(out.prefix(length))
    }

    /// The uncompressed public point (65 bytes).
    var publicKey: [UInt8] {
        var out = [UInt8](repeating: 0, count: 65)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(pkey, "pub", &out, out.count, &length) == 1 else { return [] }
        return Array(out.prefix(length))
    }

    /// The private scalar (32 bytes); empty for a public key.
    var privateKey: [UInt8] {
        var scalar: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, "priv", &scalar) == 1, let scalar else { return [] }
        defer { BN_clear_free(scalar) }
        var out = [UInt8](repeating: 0, count: 32)
        guard BN_bn2binpad(scalar, &out, 32) == 32 else { return [] }
        return out
    }

    /// Whether the public key is the private key's (OpenSSL takes the two parts as given):
    /// the secret agreed with a fresh key is the same from both sides.
    var isConsistentPair: Bool {
        guard let other = try? P256Key.generate(), let publicOnly = try? P256Key(publicKey: publicKey),
              let mine = try? sharedSecret(with: P256Key(publicKey: other.publicKey)),
              let theirs = try? other.sharedSecret(with: publicOnly) else { return false }
        return mine == theirs
    }

    /// ECDH: the shared x coordinate with `peer`'s public key (32 bytes).
    func sharedSecret(with peer: P256Key) throws(Failure) -> [UInt8] {
        guard let ctx = EVP_PKEY_CTX_new(pkey, nil) else { throw Failure("derive context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var length = 0
        guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_derive_set_peer(ctx, peer.pkey) == 1,
              EVP_PKEY_derive(ctx, nil, &length) == 1 else { throw Failure("ECDH") }
        var out = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_derive(ctx, &out, &length) == 1 else { throw Failure("ECDH") }
        return Array(out.prefix(length))
    }

    /// ES256: an ECDSA P-256 signature over SHA-256 of `message`, as JWS wants it (r ‖ s, 64 bytes).
    func signES256(_ message: [UInt8]) throws(Failure) -> [UInt8] {
        let der = try Self.digestSign(message, with: pkey, what: "ECDSA")
        let signature = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var start: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &start, buffer.count)
        }
        guard let signature else { throw Failure("ECDSA signature") }
        defer { ECDSA_SIG_free(signature) }
        var out = [UInt8](repeating: 0, count: 64)
        guard let r = ECDSA_SIG_get0_r(signature), let s = ECDSA_SIG_get0_s(signature),
              BN_bn2binpad(r, &out, 32) == 32 else { throw Failure("ECDSA signature") }
        let tail = out.withUnsafeMutableBufferPointer { buffer in BN_bn2binpad(s, buffer.baseAddress! + 32, 32) }
        guard tail == 32 else { throw Failure("ECDSA signature") }
        return out
    }
}

/// HKDF and AES-128-GCM, as RFC 8291 uses them.
enum PushCrypto {
    static func hmac(_ key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        OpenSSLHMAC().authenticationCode(key: key, message: message)
    }

    /// HKDF-Expand's first block (enough for every length RFC 8291 asks, ≤ 32).
    static func hkdf(salt: [UInt8], ikm: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        let prk = hmac(salt, ikm)
        return Array(hmac(prk, info + [1]).prefix(length))
    }

    /// AES-128-GCM: ciphertext ‖ 16-byte tag.
    static func aes128gcm(key: [UInt8], nonce: [UInt8], plaintext: [UInt8]) throws(P256Key.Failure) -> [UInt8] {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw P256Key.Failure("cipher context") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var length: Int32 = 0, tail: Int32 = 0
        guard EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, parley_evp_gcm_set_ivlen(), Int32(nonce.count), nil) == 1,
              EVP_EncryptInit_ex(ctx, nil, nil, key, nonce) == 1,
              EVP_EncryptUpdate(ctx, &out, &length, plaintext, Int32(plaintext.count)) == 1 else { throw P256Key.Failure("AES-GCM") }
        let sealed = out.withUnsafeMutableBufferPointer { buffer in
            EVP_EncryptFinal_ex(ctx, buffer.baseAddress! + Int(length), &tail)
        }
        guard sealed == 1 else { throw P256Key.Failure("AES-GCM") }
        var tag = [UInt8](repeating: 0, count: 16)
        guard EVP_CIPHER_CTX_ctrl(ctx, parley_evp_gcm_get_tag(), 16, &tag) == 1 else { throw P256Key.Failure("AES-GCM tag") }
        return Array(out.prefix(Int(length + tail))) + tag
    }

    static func random(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        _ = RAND_bytes(&out, Int32(count))
        return out
    }
}
