/// What a running server takes from a reloaded configuration (SIGHUP).
extension ServerConfiguration {
    /// `self` (the running configuration) with what a reload may change taken from `new`:
    /// channels, their secrets and auth rules, `openChannels`, and every setting the table
    /// (``ServerSetting/table``) marks reloadable (limits, the log level, the metrics and admin
    /// tokens, the drain and shutdown times, ...). `needsRestart` names the other settings that
    /// differ, in table order (their running values stay), and channels whose history
    /// retention changed (the store applies retention from startup).
    public func reloaded(from new: ServerConfiguration) -> (configuration: ServerConfiguration, needsRestart: [String]) {
        var merged = new
        var needsRestart: [String] = []
        for setting in ServerSetting.table where !setting.reloadable && setting.differs(self, new) {
            setting.keep(&merged, self)
            needsRestart.append(setting.name)
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
