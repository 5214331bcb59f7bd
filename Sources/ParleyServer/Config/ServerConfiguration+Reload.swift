/// What a running server takes from a reloaded configuration (SIGHUP).
extension ServerConfiguration {
    /// Settings only a restart changes: what binds sockets, opens the store or sizes memory.
    /// A reload keeps the running values and names the ones that differ.
    static var restartOnly: [(name: String, differs: (ServerConfiguration, ServerConfiguration) -> Bool,
                              keep: (inout ServerConfiguration, ServerConfiguration) -> Void)] {
        func field<Value: Equatable>(_ name: String, _ path: WritableKeyPath<ServerConfiguration, Value>)
            -> (String, (ServerConfiguration, ServerConfiguration) -> Bool, (inout ServerConfiguration, ServerConfiguration) -> Void) {
            (name, { $0[keyPath: path] != $1[keyPath: path] }, { $0[keyPath: path] = $1[keyPath: path] })
        }
        return [
            field("--host", \.host), field("--http-port", \.httpPort), field("--line-port", \.linePort),
            field("--data", \.dataDirectory), field("--loops", \.loops), field("--lobby", \.lobby),
            field("--history", \.historyCapacity), field("--history-room-memory", \.historyBytesPerRoom),
            field("--history-memory", \.historyBytesTotal), field("--room-backlog", \.roomBacklog),
            field("--history-page-bytes", \.historyPageBytes),
            field("--retention-count", \.retentionCount), field("--retention-days", \.retentionDays),
            field("--sync", \.syncFull), field("--tls-cert", \.tlsCertificateFile), field("--tls-key", \.tlsKeyFile),
            field("--line-tls", \.lineTLS), field("--ws-echo-path", \.webSocketEchoPath), field("--log-format", \.logFormat),
            field("--max-connections", \.maxConnections), field("--max-connections-per-ip", \.maxConnectionsPerIP),
            field("--rest-rate", \.restRatePerSecond), field("--rest-rate", \.restBurst),
            field("--max-store-bytes", \.storeMaxBytes),
            field("--trusted-proxies", \.trustedProxies), field("--line-proxy-protocol", \.lineProxyProtocol),
        ]
    }

    /// `self` (the running configuration) with what a reload may change taken from `new`:
    /// channels, their secrets and auth rules, `openChannels`, the limits, the log level, the
    /// metrics and admin tokens, the drain and shutdown times. `needsRestart` names the other
    /// settings that differ (their running values stay), and channels whose history
    /// retention changed (the store applies retention from startup).
    public func reloaded(from new: ServerConfiguration) -> (configuration: ServerConfiguration, needsRestart: [String]) {
        var merged = new
        var needsRestart: [String] = []
        for (name, differs, keep) in Self.restartOnly where differs(self, new) {
            keep(&merged, self)
            if !needsRestart.contains(name) { needsRestart.append(name) }
        }
        for (index, channel) in merged.channels.enumerated() {
            let old = settings(ofChannel: channel.id)
            if old?.retentionCount != channel.retentionCount || old?.retentionDays != channel.retentionDays {
                merged.channels[index].retentionCount = old?.retentionCount
                merged.channels[index].retentionDays = old?.retentionDays
                needsRestart.append("channels[\(channel.id)].history")
            }
        }
        return (merged, needsRestart)
    }
}
