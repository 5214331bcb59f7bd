import ParleyCore

extension ChannelAccess {
    /// The access rules for `channel` as the server's configuration sets them, verifying
    /// tokens with OpenSSL's HMAC and the hub's clock.
    init(channel: String, core: ServerCore) {
        let settings = core.configuration.settings(ofChannel: channel)
        self.init(channel: channel, secret: settings?.secret, requiresAuth: settings?.requireAuth == true,
                  verifier: TokenVerifier(hmac: OpenSSLHMAC(), clock: core.hub.clock))
    }
}
