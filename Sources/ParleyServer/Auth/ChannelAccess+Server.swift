import ParleyCore

extension ChannelAccess {
    /// The access rules for `channel` as `configuration` sets them, verifying tokens with
    /// OpenSSL's HMAC and `clock`.
    init(channel: String, configuration: ServerConfiguration, clock: any WallClock) {
        let settings = configuration.settings(ofChannel: channel)
        self.init(channel: channel, secret: settings?.secret, requiresAuth: settings?.requireAuth == true,
                  verifier: TokenVerifier(hmac: OpenSSLHMAC(), clock: clock))
    }
}
