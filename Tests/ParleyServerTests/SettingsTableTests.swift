import Foundation
import ParleyCore
@testable import ParleyServer
import Testing

/// `ServerSetting.table` is the one description of every setting: a flag, its variable and
/// its config-file path (and older keys) set the same thing by the same rule, a reload follows
/// its reloadable column, and `--help` and the README show every row.
@Suite struct SettingsTableTests {
    /// A valid value for every setting, unlike its default: as text (flag, variable) and as
    /// JSON (config file). A setting added to the table without one here fails
    /// `everySettingHasASample`.
    static let samples: [String: (text: String, json: String)] = [
        "--host": ("0.0.0.0", #""0.0.0.0""#), "--http-port": ("9090", "9090"), "--line-port": ("9091", "9091"),
        "--data": ("/tmp/parley-x", #""/tmp/parley-x""#), "--loops": ("3", "3"), "--lobby": ("a/b", #""a/b""#),
        "--max-line-length": ("100", "100"), "--line-rate": ("7", "7"), "doors.line.burst": ("9", "9"),
        "--join-history": ("5", "5"), "--write-queue-limit": ("8192", "8192"), "--max-message-size": ("2048", "2048"),
        "--deflate-max-message-size": ("16384", "16384"), "--inbound-buffer-bytes": ("2097152", "2097152"),
        "--max-rooms": ("9", "9"), "--publish-rate": ("7.5", "7.5"), "doors.native.publish_burst": ("9", "9"),
        "--max-history-count": ("5", "5"), "--history-rate": ("3", "3"), "doors.native.history_burst": ("9", "9"),
        "--join-rate": ("4", "4"), "limits.join_burst": ("7", "7"), "--download-rate": ("30", "30"),
        "--max-client-data": ("100", "100"), "doors.native.ping_interval_ms": ("5000", "5000"),
        "--history": ("5", "5"), "--history-room-memory": ("5", "5"), "--history-memory": ("5", "5"),
        "--room-backlog": ("5", "5"), "--retention-count": ("5", "5"), "--retention-days": ("5", "5"),
        "--history-page-bytes": ("2048", "2048"), "history.page_messages": ("5", "5"),
        "--edit-window": ("60", "60"), "actions.max_edits": ("5", "5"), "actions.max_reactions_per_message": ("5", "5"),
        "actions.max_reactions_per_member": ("5", "5"),
        "--max-conversations": ("300", "300"), "users.receipts_listed": ("20", "20"), "users.inbox_watch_rooms": ("10", "10"),
        "--vapid-public-key": ("BKey", #""BKey""#), "--vapid-private-key": ("secret", #""secret""#),
        "--vapid-subject": ("mailto:ops@example.org", #""mailto:ops@example.org""#),
        "--webpush-endpoints": ("https://push.example/", #"["https://push.example/"]"#), "--push-ca": ("/tmp/ca.pem", #""/tmp/ca.pem""#),
        "--apns-key-file": ("/tmp/k.p8", #""/tmp/k.p8""#), "--apns-key-id": ("KEY1234567", #""KEY1234567""#),
        "--apns-team-id": ("TEAM123456", #""TEAM123456""#), "--apns-endpoint": ("https://apns.test", #""https://apns.test""#),
        "--fcm-service-account": ("/tmp/sa.json", #""/tmp/sa.json""#), "--fcm-endpoint": ("https://fcm.test", #""https://fcm.test""#),
        "--fcm-token-endpoint": ("https://oauth.test/token", #""https://oauth.test/token""#),
        "--relay-address": ("10.0.0.7:8080", #""10.0.0.7:8080""#),
        "--history-inflight-bytes": ("2097152", "2097152"),
        "--history-bytes-per-ip": ("1048576", "1048576"),
        "--publish-bytes-per-ip": ("2097152", "2097152"),
        "--redis-tls-cert": ("/tmp/client.crt", #""/tmp/client.crt""#), "--redis-tls-key": ("/tmp/client.key", #""/tmp/client.key""#),
        "--apns-sandbox-endpoint": ("https://sandbox.apns.test", #""https://sandbox.apns.test""#),
        "push.coalesce_ms": ("500", "500"), "push.max_queued": ("50", "50"), "push.max_per_user_per_minute": ("5", "5"),
        "push.max_room_users": ("7", "7"), "push.preview": ("0", "false"), "push.mentions_override_mutes": ("0", "false"),
        "--max-body-size": ("2048", "2048"), "--max-multi-publish-bytes": ("2048", "2048"), "--rest-rate": ("7", "7"),
        "doors.http.request_timeout_ms": ("5000", "5000"), "doors.http.idle_timeout_ms": ("5000", "5000"),
        "--allowed-origins": ("https://a.example.com", #"["https://a.example.com"]"#),
        "--max-store-bytes": ("0", "0"), "--sync": ("normal", #""normal""#),
        "--socketio-max-payload": ("2048", "2048"), "--socketio-ping-interval": ("300", "300"),
        "--socketio-ping-timeout": ("300", "300"), "--socketio-connect-timeout": ("300", "300"),
        "--socketio-max-polling-sessions": ("5", "5"), "--socketio-polling-rate": ("7", "7"),
        "--max-connections": ("5", "5"), "--max-connections-per-ip": ("5", "5"), "--handshake-timeout": ("2.5", "2.5"),
        "--idle-timeout": ("2.5", "2.5"), "--rate-abuse-factor": ("3", "3"), "--max-members-listed": ("5", "5"), "--max-open-channels": ("7", "7"),
        "--max-members-list-bytes": ("2048", "2048"), "--trusted-proxies": ("10.0.0.0/8", #"["10.0.0.0/8"]"#),
        "--line-proxy-protocol": ("1", "true"), "--files": ("/tmp/parley-f", #""/tmp/parley-f""#),
        "--public-url": ("https://chat.example.com", #""https://chat.example.com""#), "--max-upload-size": ("5", "5"),
        "--upload-types": ("image/png", #"["image/png"]"#), "--upload-rate": ("5", "5"), "--upload-rate-total": ("5", "5"),
        "--upload-bytes-per-ip": ("5", "5"), "--upload-bytes-total": ("5", "5"), "--files-quota": ("5", "5"),
        "--image-pixels-per-ip": ("7", "7"), "--image-pixels-total": ("8", "8"),
        "--upload-grace": ("5", "5"), "files.collect_interval_seconds": ("5", "5"), "files.upload_timeout_ms": ("5000", "5000"),
        "--file-workers": ("3", "3"), "--tls-cert": ("/c.pem", #""/c.pem""#), "--tls-key": ("/k.pem", #""/k.pem""#),
        "--line-tls": ("1", "true"), "--log-level": ("debug", #""debug""#), "--log-format": ("json", #""json""#),
        "--drain-time": ("2.5", "2.5"), "--shutdown-timeout": ("2.5", "2.5"),
        "metrics.token": ("0123456789abcdef-m", #""0123456789abcdef-m""#), "admin.token": ("0123456789abcdef-a", #""0123456789abcdef-a""#),
        "--redis": ("redis://127.0.0.1:6379", #""redis://127.0.0.1:6379""#), "--redis-cluster": ("a:1,b:2", #""a:1,b:2""#),
        "--redis-sentinel": ("s1:26379,s2:26379", #"["s1:26379", "s2:26379"]"#), "--redis-sentinel-master": ("chat", #""chat""#),
        "--redis-tls-ca": ("/ca.pem", #""/ca.pem""#), "--redis-replicas-ack": ("1", "1"), "--redis-replicas-ack-timeout": ("0.5", "0.5"),
        "--node-id": ("n-1", #""n-1""#), "--presence-lease": ("4.5", "4.5"), "--redis-prefix": ("p2", #""p2""#),
        "--ws-echo-path": ("/echo", #""/echo""#), "--eio-echo-path": ("/eio", #""/eio""#), "--sio-test-app": ("1", "true"),
    ]

    /// The config file checks that a certificate comes with its key: those rows are tried together.
    static let partners = ["--tls-cert": "--tls-key", "--tls-key": "--tls-cert"]

    static var rows: [ServerSetting] { ServerSetting.table.filter { $0.path != nil } }

    func row(_ name: String) throws -> ServerSetting { try #require(ServerSetting.table.first { $0.name == name }) }

    /// `{"a": {"b": VALUE}}` for the path `a.b`, every given path merged into one document.
    func document(_ entries: [(path: String, json: String)]) -> String {
        var tree: [String: Any] = [:]
        func insert(_ parts: ArraySlice<Substring>, _ json: String, into node: inout [String: Any]) {
            let key = String(parts.first!)
            if parts.count == 1 { node[key] = json; return }
            var child = node[key] as? [String: Any] ?? [:]
            insert(parts.dropFirst(), json, into: &child)
            node[key] = child
        }
        for entry in entries { insert(entry.path.split(separator: ".")[...], entry.json, into: &tree) }
        func render(_ node: [String: Any]) -> String {
            "{" + node.keys.sorted().map { key in
                let value = node[key]!
                return "\"\(key)\": " + ((value as? [String: Any]).map(render) ?? value as! String)
            }.joined(separator: ", ") + "}"
        }
        return render(tree)
    }

    func file(_ text: String) throws(ServerConfiguration.UsageError) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        try ConfigFile.apply(Array(text.utf8), name: "t.json", to: &configuration)
        return configuration
    }

    @Test func everySettingHasASample() {
        for setting in Self.rows { #expect(Self.samples[setting.name] != nil, "no sample for \(setting.name)") }
        #expect(Set(Self.samples.keys) == Set(Self.rows.map(\.name)))
    }

    /// The flag, the variable, the documented path and every alias give the same
    /// configuration, and not the default one.
    @Test func aFlagItsVariableAndItsFilePathsSetTheSame() throws {
        for setting in Self.rows {
            let sample = try #require(Self.samples[setting.name])
            let group = [setting] + (try Self.partners[setting.name].map { [try row($0)] } ?? [])
            let values = group.map { (setting: $0, sample: Self.samples[$0.name]!) }
            var results: [(String, ServerConfiguration)] = []
            if setting.flag != nil {
                let flags = values.map { "\($0.setting.flag!)=\($0.sample.text)" }
                results.append(("flag", try #require(try ServerConfiguration.parse(arguments: flags, environment: [:]))))
                let environment = Dictionary(uniqueKeysWithValues: values.map { ($0.setting.environment!, $0.sample.text) })
                results.append(("env", try #require(try ServerConfiguration.parse(arguments: [], environment: environment))))
            }
            for path in setting.paths {
                let others = values.dropFirst().map { (path: $0.setting.path!, json: $0.sample.json) }
                results.append((path, try file(document([(path, sample.json)] + others))))
            }
            let first = try #require(results.first)
            #expect(first.1 != ServerConfiguration(), "\(setting.name): the sample \(sample.text) is the default")
            for (input, configuration) in results.dropFirst() {
                #expect(configuration == first.1, "\(setting.name): \(input) differs from \(first.0)")
            }
        }
    }

    /// Out of its range, a setting is refused with the same rule by all three inputs, each
    /// naming itself.
    @Test func outOfRangeIsRefusedAlikeOnEveryInput() throws {
        let range = /^a (?:whole )?number in (-?[0-9.]+)\.\.\.(-?[0-9.]+)$/
        var checked = 0
        for setting in Self.rows {
            guard let match = setting.accepts.wholeMatch(of: range),
                  let low = Double(match.1), let high = Double(match.2) else { continue }
            for bad in [low - 1, high + 1] where abs(bad) < 1e15 {
                let text = SettingRule<Double>.format(bad)
                let rule = "must be \(setting.accepts)"
                if let flag = setting.flag, let env = setting.environment {
                    #expect(throws: ServerConfiguration.UsageError(description: "\(flag) \(rule), got \"\(text)\"")) {
                        try ServerConfiguration.parse(arguments: [flag, text], environment: [:])
                    }
                    #expect(throws: ServerConfiguration.UsageError(description: "\(env) \(rule), got \"\(text)\"")) {
                        try ServerConfiguration.parse(arguments: [], environment: [env: text])
                    }
                }
                for path in setting.paths {
                    #expect(throws: ServerConfiguration.UsageError(description: "config file t.json: \(path) \(rule)")) {
                        try file(document([(path, text)]))
                    }
                }
                checked += 1
            }
        }
        #expect(checked > 80, "every numeric setting is tried at both ends")
    }

    /// The stricter rule where the flag and the file used to differ.
    @Test func theFlagsRangeHoldsInTheFile() {
        #expect(throws: ServerConfiguration.UsageError(description: "config file t.json: limits.httpMaxBodyBytes must be a whole number in 1024...1073741824")) {
            try file(#"{"limits": {"httpMaxBodyBytes": 1000}}"#)
        }
        #expect(throws: ServerConfiguration.UsageError(description: "config file t.json: limits.nativeRatePerSecond must be a number in 1...10000000")) {
            try file(#"{"limits": {"nativeRatePerSecond": 0.5}}"#)
        }
        #expect(throws: ServerConfiguration.UsageError(description: "--line-rate must be a number in 1...1000000, got \"2000000\"")) {
            try ServerConfiguration.parse(arguments: ["--line-rate", "2000000"], environment: [:])
        }
        #expect(throws: ServerConfiguration.UsageError(description: "config file t.json: limits.lineRatePerSecond must be a number in 1...1000000")) {
            try file(#"{"limits": {"lineRatePerSecond": 2000000}}"#)
        }
    }

    @Test func aPathAndItsAliasTogetherAreRefused() {
        #expect(throws: ServerConfiguration.UsageError(description: "config file t.json: doors.native.max_rooms and limits.nativeMaxRooms set the same setting; keep doors.native.max_rooms")) {
            try file(#"{"doors": {"native": {"max_rooms": 5}}, "limits": {"nativeMaxRooms": 6}}"#)
        }
        #expect(throws: ServerConfiguration.UsageError(description: "config file t.json: doors.native must be an object")) {
            try file(#"{"doors": {"native": 5}}"#)
        }
        #expect(throws: ServerConfiguration.UsageError.self) { try file(#"{"doors": {"native": {"max_room": 5}}}"#) }
    }

    /// A burst given in the file wins over the rate's 2x, whichever comes first in the file.
    @Test func anExplicitBurstWinsOverTheRatesDouble() throws {
        for text in [#"{"doors": {"native": {"publish_burst": 3, "publish_rate_per_second": 10}}}"#,
                     #"{"limits": {"nativeBurst": 3, "nativeRatePerSecond": 10}}"#] {
            let c = try file(text)
            #expect(c.nativeRatePerSecond == 10 && c.nativeBurst == 3)
        }
        #expect(try file(#"{"doors": {"native": {"publish_rate_per_second": 10}}}"#).nativeBurst == 20)
    }

    /// A reload takes what the table marks reloadable and names (and keeps) the rest.
    /// The per-address request rates live in limiters made once at start (and reported to the
    /// cluster's shared buckets under those rates): a reload cannot change them, so the table
    /// must say restart (`--socketio-polling-rate` said reload, and a reload changed only the
    /// number in the 429's text).
    @Test func perAddressRequestRatesNeedARestart() {
        for name in ["--rest-rate", "--download-rate", "--socketio-polling-rate"] {
            #expect(ServerSetting.table.first { $0.name == name }?.reloadable == false, "\(name)")
        }
    }

    @Test func theReloadDiffFollowsTheTable() throws {
        let running = ServerConfiguration()
        for setting in Self.rows where Self.partners[setting.name] == nil {
            let sample = try #require(Self.samples[setting.name])
            let fresh = try file(document([(setting.path!, sample.json)]))
            let (merged, needsRestart) = running.reloaded(from: fresh)
            if setting.reloadable {
                #expect(merged == fresh && needsRestart.isEmpty, "\(setting.name) is reloadable")
            } else {
                #expect(merged == running && needsRestart == [setting.name], "\(setting.name) needs a restart: \(needsRestart)")
            }
        }
        var fresh = running
        fresh.tlsCertificateFile = "/c.pem"
        fresh.tlsKeyFile = "/k.pem"
        #expect(running.reloaded(from: fresh).needsRestart == ["--tls-cert", "--tls-key"])
    }

    /// Messages elsewhere name a setting through the table, never a literal.
    @Test func aPropertyNamesItsFlag() {
        #expect(ServerSetting.flag(of: \ServerConfiguration.tlsKeyFile) == "--tls-key")
        #expect(ServerSetting.flag(of: \ServerConfiguration.restBurst) == "--rest-rate", "a rate's burst is its row's")
        #expect(ServerSetting.flag(of: \ServerConfiguration.nativeBurst) == "--publish-rate")
        #expect(ServerSetting.flag(of: \ServerConfiguration.metricsToken) == "metrics.token")
        #expect(ServerSetting.configEnvironment == "PARLEY_CONFIG")
    }

    @Test func helpShowsEveryRow() {
        let usage = ServerConfiguration.usage
        for setting in ServerSetting.table {
            if let flag = setting.flag, let env = setting.environment {
                let line = usage.split(separator: "\n").first { $0.hasPrefix("  \(flag) ") }
                #expect(line?.contains("(default \(setting.defaultText))  [\(env)]") == true, "\(flag): \(line ?? "none")")
            } else if let path = setting.path {
                #expect(usage.contains("  \(path) "), "\(path) is not in --help")
            }
        }
    }

    /// The README's option table is `ServerSetting.markdownTable`. Run with
    /// `PARLEY_WRITE_README=1` to rewrite it after changing the table.
    @Test func readmeOptionTableIsTheTable() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let readme = try String(contentsOf: url, encoding: .utf8)
        let begin = "<!-- settings table: made from ServerSetting.table (SettingsTableTests; PARLEY_WRITE_README=1 rewrites it) -->\n"
        let end = "\n<!-- end of settings table -->"
        let start = try #require(readme.range(of: begin), "README.md has no settings table marker")
        let stop = try #require(readme.range(of: end, range: start.upperBound..<readme.endIndex))
        let table = ServerSetting.markdownTable
        if ProcessInfo.processInfo.environment["PARLEY_WRITE_README"] == "1" {
            try (readme[..<start.upperBound] + table + readme[stop.lowerBound...]).write(to: url, atomically: true, encoding: .utf8)
            return
        }
        #expect(String(readme[start.upperBound..<stop.lowerBound]) == table,
                "README.md's option table differs from ServerSetting.table; run the test with PARLEY_WRITE_README=1")
    }

    /// The README's full config-file example is accepted.
    @Test func readmeConfigExampleParses() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let readme = try String(contentsOf: url, encoding: .utf8)
        let example = try #require(readme.range(of: "Full example:\n\n```json\n"))
        let close = try #require(readme.range(of: "\n```", range: example.upperBound..<readme.endIndex))
        let c = try file(String(readme[example.upperBound..<close.lowerBound]))
        #expect(!c.channels.isEmpty)
    }
}
