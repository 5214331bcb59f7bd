import Foundation
import ParleyCore
@testable import ParleyServer
import Testing

/// `--trusted-proxies`, `--line-proxy-protocol`, the upload budgets: flags, variables and
/// config-file keys, and what a reload does with them.
@Suite struct ProxyConfigurationTests {
    @Test func flagsAndVariables() throws {
        let parsed = try #require(try ServerConfiguration.parse(
            arguments: ["--trusted-proxies", "10.0.0.0/8, ::1,192.0.2.7", "--line-proxy-protocol",
                        "--upload-rate-total", "100", "--upload-bytes-per-ip", "5000", "--upload-bytes-total", "9000"],
            environment: [:]))
        #expect(parsed.trustedProxies.map(\.description) == ["10.0.0.0/8", "::1/128", "192.0.2.7/32"])
        #expect(parsed.lineProxyProtocol)
        #expect(parsed.uploadsPerMinuteTotal == 100 && parsed.uploadBytesPerIPPerDay == 5000 && parsed.uploadBytesTotalPerDay == 9000)
        let env = try #require(try ServerConfiguration.parse(arguments: [], environment: [
            "PARLEY_TRUSTED_PROXIES": "2001:db8::/32", "PARLEY_LINE_PROXY_PROTOCOL": "0"]))
        #expect(env.trustedProxies.map(\.description) == ["2001:db8::/32"] && !env.lineProxyProtocol)
        let defaults = ServerConfiguration()
        #expect(defaults.trustedProxies.isEmpty && !defaults.lineProxyProtocol)
        for bad in ["10.0.0.0/33", "example.com", "10.0.0.1:80"] {
            #expect(throws: ServerConfiguration.UsageError.self) {
                try ServerConfiguration.parse(arguments: ["--trusted-proxies", bad], environment: [:])
            }
        }
    }

    @Test func configFileKeys() throws {
        var configuration = ServerConfiguration()
        try ConfigFile.apply(Array(#"{"trustedProxies": ["10.1.0.0/16"], "lineProxyProtocol": true, "limits": {"uploadsPerMinuteTotal": 7, "uploadBytesPerIPPerDay": 1000, "uploadBytesTotalPerDay": 2000}}"#.utf8),
                             name: "parley.json", to: &configuration)
        #expect(configuration.trustedProxies == [IPNetwork(parsing: "10.1.0.0/16")!] && configuration.lineProxyProtocol)
        #expect(configuration.uploadsPerMinuteTotal == 7 && configuration.uploadBytesPerIPPerDay == 1000 && configuration.uploadBytesTotalPerDay == 2000)
        var broken = ServerConfiguration()
        #expect(throws: ServerConfiguration.UsageError.self) {
            try ConfigFile.apply(Array(#"{"trustedProxies": ["nope"]}"#.utf8), name: "parley.json", to: &broken)
        }
    }

    @Test func aReloadKeepsTheRunningProxies() {
        var running = ServerConfiguration()
        running.trustedProxies = [IPNetwork(parsing: "10.0.0.0/8")!]
        var new = running
        new.trustedProxies = []
        new.lineProxyProtocol = true
        let (merged, needsRestart) = running.reloaded(from: new)
        #expect(merged.trustedProxies == running.trustedProxies && !merged.lineProxyProtocol)
        #expect(needsRestart.contains("--trusted-proxies") && needsRestart.contains("--line-proxy-protocol"))
    }
}
