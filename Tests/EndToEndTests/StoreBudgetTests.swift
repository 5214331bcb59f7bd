import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// The embedded store's size budget (`--max-store-bytes`): open mode keeps every message of
/// every channel anyone makes up, so without it anyone could fill the disk.
@Suite(.serialized) struct StoreBudgetTests {
    @Test func pastTheBudgetAPublishIsRefusedClearlyAndTheServerSaysWhy() throws {
        let budget = 1 << 20
        let server = try startTestServer {
            $0.storeMaxBytes = budget
            $0.nativeRatePerSecond = 1_000_000
            $0.nativeBurst = 1_000_000
        }
        defer { server.shutdown() }
        let client = try NativeClient.connect(server)
        let big = JSONValue.string(String(repeating: "z", count: 20_000))
        var stored = 0, failure: String?
        for n in 1...200 where failure == nil {
            // Rooms of made-up channels cost the same budget: it is one for the server.
            let reply = try client.request(["type": "publish", "room": .string("r\(n % 7)"), "message": big], callback: n)
            if let error = reply["error"]?.stringValue { failure = error } else { stored += 1 }
        }
        #expect(failure?.contains("the message store is full: it reached its size budget of \(budget) bytes") == true,
                "\(failure ?? "nothing was refused")")
        // At most the budget went to disk (the WAL aside), and what is stored can be read.
        #expect(stored > 10 && stored * 20_000 <= budget)
        let page = try client.request(["type": "history", "room": "r1", "limit": 5], callback: 10_000)
        #expect(page["messages"]?.arrayValue?.isEmpty == false)
        let ready = try httpRequest(port: server.httpPort, "GET", "/readyz")
        #expect(ready.status == 503 && ready.body.contains("size budget"), "\(ready.body)")
    }

    @Test func theBudgetIsAFlagWithAFloorAndZeroTurnsItOff() throws {
        #expect(try ServerConfiguration.parse(arguments: ["--max-store-bytes", "0"], environment: [:])?.storeMaxBytes == nil)
        #expect(try ServerConfiguration.parse(arguments: ["--max-store-bytes", "2097152"], environment: [:])?.storeMaxBytes == 2 << 20)
        #expect(throws: ServerConfiguration.UsageError.self) {
            _ = try ServerConfiguration.parse(arguments: ["--max-store-bytes", "1000"], environment: [:])
        }
        #expect(ServerConfiguration().storeMaxBytes == 10 << 30)
    }
}
