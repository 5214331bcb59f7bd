import Foundation
import ParleyCore
import ParleyLog
@testable import ParleyServer
import Testing

/// The operations options: flags, environment variables, config-file keys, and what a
/// reload may change.
@Suite struct OperationsConfigurationTests {
    @Test func logFlagsEnvironmentAndFileKeys() throws {
        let flags = try #require(try ServerConfiguration.parse(arguments: ["--log-level", "debug", "--log-format=json",
                                                                           "--drain-time", "7.5", "--shutdown-timeout", "0"],
                                                               environment: [:]))
        #expect(flags.logLevel == .debug && flags.logFormat == .json)
        #expect(flags.drainMillis == 7_500 && flags.shutdownGraceMillis == 0)
        let env = try #require(try ServerConfiguration.parse(arguments: [], environment: ["PARLEY_LOG_LEVEL": "warn", "PARLEY_LOG_FORMAT": "text"]))
        #expect(env.logLevel == .warn && env.logFormat == .text)
        #expect(ServerConfiguration() == ServerConfiguration() && ServerConfiguration().logLevel == .info && ServerConfiguration().drainMillis == 0)
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(arguments: ["--log-level", "loud"], environment: [:]) }
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(arguments: ["--log-format", "xml"], environment: [:]) }
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(arguments: ["--drain-time", "-1"], environment: [:]) }

        var file = ServerConfiguration()
        try ConfigFile.apply(Array(#"{"log": {"level": "error", "format": "json"}, "metrics": {"token": "0123456789abcdef-m"}, "admin": {"token": "0123456789abcdef-a"}}"#.utf8),
                             name: "p.json", to: &file)
        #expect(file.logLevel == .error && file.logFormat == .json)
        #expect(file.metricsToken == "0123456789abcdef-m" && file.adminToken == "0123456789abcdef-a")
        func refusal(_ text: String) -> String? {
            var c = ServerConfiguration()
            do { try ConfigFile.apply(Array(text.utf8), name: "p.json", to: &c); return nil } catch { return error.description }
        }
        #expect(refusal(#"{"admin": {"token": "short"}}"#) == "config file p.json: admin.token must be at least 16 characters with no spaces")
        #expect(refusal(#"{"log": {"level": "loud"}}"#) == "config file p.json: log.level must be trace, debug, info, warn or error")
        #expect(refusal(#"{"metrics": {"user": "x"}}"#)?.contains("unknown key metrics.user") == true)
    }

    @Test func aReloadTakesWhatItMayAndNamesWhatNeedsARestart() {
        var running = ServerConfiguration()
        running.channels = [ChannelSettings(id: "a")]
        var fresh = running
        fresh.channels = [ChannelSettings(id: "a", secret: "new", requireAuth: true), ChannelSettings(id: "b")]
        fresh.channels[1].retentionCount = 10
        fresh.openChannels = false
        fresh.nativeRatePerSecond = 5
        fresh.logLevel = .trace
        fresh.adminToken = "0123456789abcdef"
        fresh.httpPort = 9999
        fresh.dataDirectory = "/elsewhere"
        fresh.logFormat = .json
        let (merged, restart) = running.reloaded(from: fresh)
        #expect(merged.channels.map(\.id) == ["a", "b"] && merged.channels[0].secret == "new" && merged.channels[0].requireAuth)
        #expect(merged.channels[1].retentionCount == nil, "retention is applied by the store at startup")
        #expect(!merged.openChannels && merged.nativeRatePerSecond == 5 && merged.logLevel == .trace)
        #expect(merged.adminToken == "0123456789abcdef")
        #expect(merged.httpPort == running.httpPort && merged.dataDirectory == running.dataDirectory && merged.logFormat == .text)
        #expect(restart == ["--http-port", "--data", "--log-format", "channels[b].history"])
    }

    @Test func prometheusTextEscapesAndFormats() {
        var out = PrometheusText()
        out.family("x_total", "counter", help: "X.")
        out.sample("x_total", 3, labels: ["path": "a\"b\\c\nd"])
        out.sample("x_total", 0.25)
        out.histogram("h_seconds", boundsMicros: [1_000, 500_000], counts: [1, 2, 3], sumMicros: 2_500_000)
        #expect(out.text == """
            # HELP x_total X.
            # TYPE x_total counter
            x_total{path="a\\"b\\\\c\\nd"} 3
            x_total 0.25
            h_seconds_bucket{le="0.001"} 1
            h_seconds_bucket{le="0.5"} 3
            h_seconds_bucket{le="+Inf"} 6
            h_seconds_sum 2.5
            h_seconds_count 6

            """)
        let histogram = MetricHistogram(boundsMicros: [10, 100])
        for micros in [0, 10, 11, 100, 101, -5] { histogram.observe(micros: micros) }
        #expect(histogram.snapshot.counts == [3, 2, 1])
        #expect(histogram.snapshot.sumMicros == 222)
    }

    @Test func bansExpireAndMatchNamesWithoutCase() async throws {
        let bans = BanList()
        let keeper = BanKeeper(store: InMemoryBanStore(), list: bans, clock: ManualClock(millis: 0))
        #expect(bans.ban(ip: "1.2.3.4", name: "x", nowMillis: 0) == nil)
        let byName = try await keeper.add(.name("  Mallory "), seconds: 10, reason: "spam")
        #expect(byName.target == .name("mallory"))
        _ = try await keeper.add(.ip("1.2.3.4"), seconds: 5, reason: "")
        #expect(bans.ban(ip: nil, name: "MALLORY", nowMillis: 9_999)?.id == byName.id)
        #expect(bans.ban(ip: "1.2.3.4", name: nil, nowMillis: 4_999) != nil)
        #expect(bans.ban(ip: "1.2.3.4", name: nil, nowMillis: 5_000) == nil, "expired")
        #expect(bans.list(nowMillis: 6_000).map(\.id) == [byName.id])
        #expect(try await keeper.remove(id: byName.id))
        #expect(try await !keeper.remove(id: byName.id))
        #expect(bans.ban(ip: nil, name: "mallory", nowMillis: 0) == nil)
    }

    /// A keeper reads what its store holds, and tells which bans are new to it: a cluster
    /// node learns of a ban added through another node this way.
    @Test func aKeeperPicksUpBansAnotherNodeAdded() async throws {
        let store = InMemoryBanStore()
        let clock = ManualClock(millis: 0)
        let here = BanKeeper(store: store, list: BanList(), clock: clock)
        let there = BanKeeper(store: store, list: BanList(), clock: clock)
        #expect(try await here.reload().isEmpty)
        #expect(try await here.reloadIfChanged().isEmpty, "nothing changed")
        let ban = try await there.add(.ip("198.51.100.4"), seconds: 60, reason: "spam")
        #expect(try await here.reloadIfChanged() == [ban])
        #expect(here.list.ban(ip: "198.51.100.4", name: nil, nowMillis: 1) == ban)
        #expect(try await here.reloadIfChanged().isEmpty, "known now")
        #expect(try await there.remove(id: ban.id))
        _ = try await here.reloadIfChanged()
        #expect(here.list.ban(ip: "198.51.100.4", name: nil, nowMillis: 1) == nil, "lifted everywhere")
    }

    /// Logging stays cheap on the server's paths when its level is off: the message of a
    /// disabled line is never built.
    @Test func aDisabledLevelNeverBuildsTheLine() {
        let memory = MemoryLogHandler()
        let logger = Logger(label: "parley", destination: LogDestination(handler: memory, level: .warn))
        var built = 0
        func text() -> String { built += 1; return "x" }
        logger.debug(text())
        logger.info(text())
        #expect(built == 0 && memory.records.isEmpty)
    }
}
