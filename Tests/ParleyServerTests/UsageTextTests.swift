import Testing
@testable import ParleyServer

/// `parley serve --help`: every option's line shows its flag, its value and its text apart.
@Suite struct UsageTextTests {
    @Test func everyFlagIsSetApartFromItsText() throws {
        let lines = ServerConfiguration.usage.split(separator: "\n").map(String.init)
        for option in ServerConfiguration.options {
            let left = "  \(option.flag) \(option.value)"
            let line = try #require(lines.first { $0.hasPrefix(left) }, "no line for \(option.flag)")
            let rest = line.dropFirst(left.count)
            #expect(rest.hasPrefix("  "), "\(option.flag): \(line)")
            #expect(rest.trimmingPrefix(while: { $0 == " " }).hasPrefix(option.help), "\(option.flag): \(line)")
        }
    }
}
