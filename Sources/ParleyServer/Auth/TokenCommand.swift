import ParleyCore

/// `parley token`: mints a development token, printed to stdout.
public enum TokenCommand {
    public static let usage = """
    usage: parley token --channel ID --secret SECRET --client CLIENT_ID [options]

    Mints an HS256 JWT in Scaledrone's format for development.

    options:
      --channel ID        channel the token is for (required)
      --secret SECRET     the channel's secret (required, at least 32 bytes)
      --client ID         client id the token is for: the handshake's client_id (required)
      --room-regex RE     room-name pattern the grants apply to (default ".*")
      --publish BOOL      may publish (default true)
      --subscribe BOOL    may subscribe (default true)
      --history N         history messages a subscribe may ask for (default 100)
      --moderate BOOL     may edit and delete other members' messages (default false)
      --ttl SECONDS       lifetime (default 3600)
      --data JSON         authData shown to others (optional)
    """

    /// Returns the token, or throws a usage error with the text to print.
    public static func run(arguments: [String], clock: any WallClock = SystemWallClock()) throws(ServerConfiguration.UsageError) -> String {
        var values: [String: String] = [:]
        let known = ["--channel", "--secret", "--client", "--room-regex", "--publish", "--subscribe", "--history", "--moderate", "--ttl", "--data"]
        var index = 0
        while index < arguments.count {
            let flag = arguments[index]
            guard known.contains(flag) else { throw ServerConfiguration.UsageError(description: "unknown option \(flag)\n\n\(usage)") }
            guard index + 1 < arguments.count else { throw ServerConfiguration.UsageError(description: "\(flag) needs a value") }
            values[flag] = arguments[index + 1]
            index += 2
        }
        func required(_ flag: String) throws(ServerConfiguration.UsageError) -> String {
            guard let value = values[flag], !value.isEmpty else {
                throw ServerConfiguration.UsageError(description: "\(flag) is required\n\n\(usage)")
            }
            return value
        }
        func bool(_ flag: String, _ fallback: Bool) throws(ServerConfiguration.UsageError) -> Bool {
            guard let text = values[flag] else { return fallback }
            switch text { case "true", "yes", "1": return true; case "false", "no", "0": return false
            default: throw ServerConfiguration.UsageError(description: "\(flag) must be true or false, got \"\(text)\"") }
        }
        func int(_ flag: String, _ fallback: Int, _ range: ClosedRange<Int>) throws(ServerConfiguration.UsageError) -> Int {
            guard let text = values[flag] else { return fallback }
            guard let value = Int(text), range.contains(value) else {
                throw ServerConfiguration.UsageError(description: "\(flag) must be a whole number in \(range.lowerBound)...\(range.upperBound), got \"\(text)\"")
            }
            return value
        }
        let channel = try required("--channel"), secret = try required("--secret"), client = try required("--client")
        // The same rule as the config file's channel secrets: a token signed with a short secret
        // can be brute-forced offline, so no token is minted with one.
        guard secret.utf8.count >= ChannelSettings.minimumSecretBytes else {
            throw ServerConfiguration.UsageError(description: "--secret must be at least \(ChannelSettings.minimumSecretBytes) bytes (it is \(secret.utf8.count)), as the config file requires of a channel's secret; use e.g. openssl rand -base64 32")
        }
        let regex = values["--room-regex"] ?? ".*"
        do { _ = try RoomPattern(regex) } catch {
            throw ServerConfiguration.UsageError(description: "--room-regex: \(error.message)")
        }
        var data: JSONValue?
        if let text = values["--data"] {
            do { data = try JSONParser.parse(text) } catch {
                throw ServerConfiguration.UsageError(description: "--data must be JSON: \(error.message)")
            }
        }
        let ttl = try int("--ttl", 3600, 1...(10 * 365 * 86400))
        let verifier = TokenVerifier(hmac: OpenSSLHMAC(), clock: clock)
        return verifier.mint(secret: secret, channel: channel, client: client,
                             expiresAtSeconds: clock.nowMillis() / 1000 + Int64(ttl),
                             permissions: [(regex, try bool("--publish", true), try bool("--subscribe", true),
                                            try int("--history", 100, 0...1_000_000))],
                             data: data, moderating: try bool("--moderate", false) ? [regex] : [])
    }
}
