import Testing
@testable import ParleyServer

/// `parley serve --help`: every option's line shows its flag, its value and its text apart.
@Suite struct UsageTextTests {
    @Test func everyFlagIsSetApartFromItsText() throws {
        let lines = ServerConfiguration.usage.split(separator: "\n").map(String.init)
        for setting in ServerSetting.table {
            guard let flag = setting.flag else { continue }
            let left = "  \(flag) \(setting.placeholder)"
            let line = try #require(lines.first { $0.hasPrefix(left) }, "no line for \(flag)")
            let rest = line.dropFirst(left.count)
            #expect(rest.hasPrefix("  "), "\(flag): \(line)")
            #expect(rest.trimmingPrefix(while: { $0 == " " }).hasPrefix(setting.help), "\(flag): \(line)")
        }
    }
}
