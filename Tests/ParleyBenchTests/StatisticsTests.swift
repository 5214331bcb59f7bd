import Testing
@testable import ParleyBench

@Suite struct StatisticsTests {
    @Test func percentilesOfOneToHundredAreExact() {
        var h = LatencyHistogram()
        for v in (1...100).shuffled() { h.record(micros: UInt64(v)) }
        #expect(h.count == 100)
        #expect(h.percentile(50) == 50)
        #expect(h.percentile(90) == 90)
        #expect(h.percentile(99) == 99)
        #expect(h.percentile(99.9) == 100)
        #expect(h.percentile(100) == 100)
        #expect(h.max == 100)
        #expect(h.min == 1)
        #expect(h.mean == 50.5)
    }

    @Test func nearestRankOnSmallSets() {
        var h = LatencyHistogram()
        for v: UInt64 in [15, 20, 35, 40, 50] { h.record(micros: v) }
        #expect(h.percentile(30) == 20)   // rank ceil(1.5) = 2
        #expect(h.percentile(40) == 20)   // rank 2
        #expect(h.percentile(50) == 35)   // rank ceil(2.5) = 3
        #expect(h.percentile(100) == 50)
        #expect(LatencyHistogram().percentile(99) == 0)
    }

    @Test func largeValuesStayWithinBucketError() {
        var h = LatencyHistogram()
        let values: [UInt64] = [1_500, 12_345, 999_999, 5_000_000, 61_000_000]
        for v in values { h.record(micros: v) }
        for (i, v) in values.enumerated() {
            let p = Double(i + 1) / Double(values.count) * 100
            let got = Double(h.percentile(p))
            #expect(abs(got - Double(v)) / Double(v) < 0.004, "p\(p): \(got) vs \(v)")
        }
        #expect(h.max == 61_000_000)
    }

    @Test func mergeEqualsRecordingEverything() {
        var a = LatencyHistogram(), b = LatencyHistogram(), all = LatencyHistogram()
        for v in 0..<5_000 {
            let value = UInt64((v * 7919) % 100_000)
            if v % 3 == 0 { a.record(micros: value) } else { b.record(micros: value) }
            all.record(micros: value)
        }
        a.merge(b)
        #expect(a == all)
        #expect(a.percentile(99.9) == all.percentile(99.9))
    }

    @Test func sequenceTrackerFindsDuplicatesAndLoss() {
        var t = SequenceTracker()
        for s in [0, 1, 1, 3, 200, 3] { t.record(s) }
        #expect(t.count == 4)
        #expect(t.duplicates == 2)
        #expect(t.contains(200) && !t.contains(2))
        #expect(t.missing(sent: 5) == 2)      // 2 and 4
        #expect(t.missing(sent: 201) == 197)  // 201 sent, 0 1 3 200 seen
        #expect(t.missing(sent: 0) == 0)
    }

    @Test func sequenceTrackerAcrossWordBoundaries() {
        var t = SequenceTracker()
        for s in 0..<1_000 where s % 10 != 0 { t.record(s) }
        #expect(t.count == 900)
        #expect(t.missing(sent: 1_000) == 100)
        #expect(t.missing(sent: 64) == 7)     // 0,10,...,60
        #expect(t.missing(sent: 65) == 7)
    }

    @Test func payloadRoundTripsInsideAnyFraming() {
        let body = BenchPayload.make(publisher: 12, sequence: 345, sentNanos: 6_789_000_111, size: 100)
        #expect(body.count == 100)
        let framings: [String] = [
            "{\"type\":\"publish\",\"room\":\"r\",\"message\":\"\(String(decoding: body, as: UTF8.self))\",\"id\":\"x\"}",
            "p12:\(String(decoding: body, as: UTF8.self))",
            "42[\"newChatMessage\",\"p12\",\"\(String(decoding: body, as: UTF8.self))\",\"now\"]",
        ]
        for text in framings {
            #expect(BenchPayload.find(in: Array(text.utf8)) == .init(publisher: 12, sequence: 345, sentNanos: 6_789_000_111))
        }
        #expect(BenchPayload.find(in: Array("#b:1:2".utf8)) == nil)
        #expect(BenchPayload.find(in: Array("nothing here at all".utf8)) == nil)
    }

    @Test func urlsAndFlags() throws {
        #expect(BenchURL(parsing: "ws://127.0.0.1:8080/v3/websocket") == BenchURL(host: "127.0.0.1", port: 8080, path: "/v3/websocket"))
        #expect(BenchURL(parsing: "tcp://localhost:8081") == BenchURL(host: "127.0.0.1", port: 8081))
        #expect(BenchURL(parsing: "ws://[::1]:9/x")?.host == "::1")
        #expect(BenchURL(parsing: "ws://:80") == nil)
        let o = try BenchCommand.parseFanout(["--url", "ws://127.0.0.1:1/v3/websocket", "--rate", "max", "--window=8", "--members", "5"])
        #expect(o.rate == .max && o.window == 8 && o.members == 5)
        #expect(throws: (any Error).self) { try BenchCommand.parseFanout(["--url", "tcp://127.0.0.1:1", "--door", "line", "--rooms", "2"]) }
        #expect(throws: (any Error).self) { try BenchCommand.parseFanout(["--url", "ws://127.0.0.1:1", "--members", "2", "--publishers", "3"]) }
    }
}
