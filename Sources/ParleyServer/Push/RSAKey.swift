import COpenSSL

/// An RSA private key through OpenSSL, for RS256 signatures (the JWT a Google service account
/// exchanges for an FCM access token).
///
/// `@unchecked Sendable` proof: as ``P256Key``, the key is immutable after init and every
/// signature builds its own OpenSSL context.
final class RSAKey: @unchecked Sendable {
    private let pkey: OpaquePointer

    /// A private key from PEM (PKCS #8 `BEGIN PRIVATE KEY`, as a service account's JSON holds
    /// it, or PKCS #1 `BEGIN RSA PRIVATE KEY`).
    init(pem: String) throws(P256Key.Failure) {
        pkey = try P256Key.privateKey(pem: pem, type: EVP_PKEY_RSA, named: "RSA")
    }

    deinit { EVP_PKEY_free(pkey) }

    /// RS256: RSASSA-PKCS1-v1_5 over SHA-256 of `message`.
    func signRS256(_ message: [UInt8]) throws(P256Key.Failure) -> [UInt8] {
        try P256Key.digestSign(message, with: pkey, what: "RSA signature")
    }
}
