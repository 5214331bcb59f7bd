import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// History replies have a byte budget and history requests a rate (docs/security.md,
/// "Identity and history"): 200 stored messages of 900 KiB and six requests on one
/// connection grew the server by 1.46 GB.
@Suite(.serialized) struct HistoryLimitsTests {
    @Test func historyPagesEndAtTheirByteBudgetAndSayThereIsMore() async throws {
        let server = try startTestServer { $0.historyPageBytes = 64 << 10 }
        defer { server.shutdown() }
        let client = try await NativeClient.connect(server, clientData: ["name": "alice"])
        let big = String(repeating: "x", count: 20_000)
        for n in 1...10 {
            try client.send(["type": "publish", "room": "r", "message": .string(big), "callback": .number(JSONNumber(100 + n))])
            _ = try await client.next { $0["callback"]?.intValue == 100 + n }
        }
        try client.send(["type": "history", "room": "r", "limit": 100, "callback": 1])
        let page = try await client.next { $0["callback"] == 1 }
        let messages = try #require(page["messages"]?.arrayValue)
        #expect(messages.compactMap { $0["offset"]?.intValue } == [8, 9, 10])
        #expect(page["has_more"] == true)
        // Paging on from there gets the rest, page by page.
        try client.send(["type": "history", "room": "r", "before": 8, "limit": 100, "callback": 2])
        let next = try await client.next { $0["callback"] == 2 }
        #expect(next["messages"]?.arrayValue?.compactMap { $0["offset"]?.intValue } == [5, 6, 7])
        #expect(next["has_more"] == true)
        // A subscribe's history_count has the same budget.
        let late = try await NativeClient.connect(server)
        _ = try await late.subscribe("r", historyCount: 10)
        var indexes: [Int] = []
        while let pushed = try? await late.next(timeout: 0.5), pushed["type"] == "history_message" {
            indexes.append(try #require(pushed["index"]?.intValue))
        }
        #expect(indexes == [0, 1, 2])
    }

    @Test func historyRequestsAreRateLimitedPerConnection() async throws {
        let server = try startTestServer { $0.historyRatePerSecond = 1; $0.historyBurst = 2 }
        defer { server.shutdown() }
        let client = try await NativeClient.connect(server)
        for n in 1...3 { try client.send(["type": "history", "room": "r", "callback": .number(JSONNumber(n))]) }
        var replies: [Int: JSONValue] = [:]
        while replies.count < 3 {
            let reply = try await client.next { $0["callback"] != nil }
            replies[try #require(reply["callback"]?.intValue)] = reply
        }
        #expect(replies[1]?["error"] == nil && replies[2]?["error"] == nil)
        #expect(replies[3]?["error"]?.stringValue?.hasPrefix("history rate limit exceeded") == true)
        // Publishing is not affected: the buckets are separate.
        try client.send(["type": "publish", "room": "r", "message": "hi", "callback": 9])
        #expect(try await client.next { $0["callback"] == 9 }["error"] == nil)
        // Another connection has its own bucket.
        let other = try await NativeClient.connect(server)
        try other.send(["type": "history", "room": "r", "callback": 1])
        #expect(try await other.next { $0["callback"] == 1 }["error"] == nil)
    }
}
