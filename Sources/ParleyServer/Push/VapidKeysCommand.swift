import ParleyCore

/// `parley vapid-keys`: a fresh VAPID key pair for Web Push (docs/push.md), as the flags and
/// the config-file keys that take it.
public enum VapidKeysCommand {
    public static let usage = """
    usage: parley vapid-keys

    Prints a new VAPID key pair (P-256, base64url) for Web Push, as environment lines and as
    config-file keys. Give both to `parley serve` (--vapid-public-key, --vapid-private-key, or
    PARLEY_VAPID_PUBLIC_KEY / PARLEY_VAPID_PRIVATE_KEY) and keep the private key secret: a
    browser's subscription is bound to the public key, so changing it means subscribing again.
    """

    public static func run() throws(ServerConfiguration.UsageError) -> String {
        let key: P256Key
        do { key = try P256Key.generate() } catch { throw ServerConfiguration.UsageError(description: "cannot make a key: \(error)") }
        let publicKey = Base64URL.encode(key.publicKey), privateKey = Base64URL.encode(key.privateKey)
        return """
        PARLEY_VAPID_PUBLIC_KEY=\(publicKey)
        PARLEY_VAPID_PRIVATE_KEY=\(privateKey)

        config file:
          "push": {"vapid_public_key": "\(publicKey)", "vapid_private_key": "\(privateKey)"}
        """
    }
}
