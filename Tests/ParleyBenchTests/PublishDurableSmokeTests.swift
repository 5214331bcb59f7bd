import Foundation
import Testing
import ParleyServer
@testable import ParleyBench

/// `parley bench publish-durable` at toy size against an in-process server: receipts come back
/// and are counted; a run that cannot connect says FAILED first and is not ok.
@Suite(.serialized) struct PublishDurableSmokeTests {
    @Test func countsReceiptsFromARealServer() throws {
        let server = try SmokeTests.server()
        defer { server.shutdown(timeout: .seconds(1)) }
        var options = try DurablePublishBench.parse(["--url", "ws://127.0.0.1:\(server.httpPort)/v3/websocket",
                                                     "--publishers", "4", "--duration", "1", "--window", "4"])
        options.loops = 1
        let (report, ok) = DurablePublishBench.run(options)
        #expect(ok, "\(report)")
        #expect(report.hasPrefix("publish-durable: 4 publishers connected (0 failed)"), "\(report)")
        let acked = report.split(separator: "\n").first { $0.hasPrefix("acknowledged:") }
        #expect(acked != nil && !(acked?.hasPrefix("acknowledged: 0 ") ?? true), "\(report)")
    }

    @Test func aRunThatCannotConnectSaysFailedFirst() throws {
        let options = try DurablePublishBench.parse(["--url", "ws://127.0.0.1:1/v3/websocket", "--publishers", "2", "--duration", "1"])
        let (report, ok) = DurablePublishBench.run(options)
        #expect(!ok)
        #expect(report.hasPrefix("FAILED:"), "\(report)")
    }

    @Test func badArgumentsAreRefused() {
        #expect(throws: (any Error).self) { try DurablePublishBench.parse(["--url", "http://x/"]) }
        #expect(throws: (any Error).self) { try DurablePublishBench.parse(["--publishers", "0"]) }
        #expect(throws: (any Error).self) { try DurablePublishBench.parse(["--nope"]) }
    }
}
