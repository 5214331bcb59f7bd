import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Synchronization
import Testing

/// Resume with `since` from far back: the replay goes page by page as the client reads, so a
/// client away for 200,000 messages gets all of them, in order, with the default 4 MiB
/// write-queue limit and flat server memory, then live ones.
@Suite(.serialized) struct ResumeTests {
    private static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
              let pages = Int(text.split(separator: " ")[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    @Test func aClientAwayFor200kMessagesResumesThemAllInOrderThenLive() async throws {
        let server = try startTestServer { $0.syncFull = false }
        defer { server.shutdown() }
        let room = RoomKey(channel: "demo", room: "long-away")
        let total = 200_000
        // Published while the client is away (straight into the hub, as fast as it stores).
        let failures = Atomic<Int>(0)
        let group = DispatchGroup()
        for n in 1...total {
            group.enter()
            try server.hub.publish(.string("message number \(n) with some padding to look like chat"), to: room, from: nil) { result in
                if case .failure = result { failures.add(1, ordering: .relaxed) }
                group.leave()
            }
            if n % 5_000 == 0 { group.wait() }
        }
        group.wait()
        #expect(failures.load(ordering: .relaxed) == 0)

        let before = Self.residentBytes()
        let ws = try TestWebSocket(port: server.httpPort)
        try ws.sendText(#"{"type":"handshake","channel":"demo","callback":0}"#)
        _ = try await ws.nextText()
        try ws.sendText(#"{"type":"subscribe","room":"long-away","callback":1,"since":0}"#)
        #expect(try await ws.nextText().contains(#""callback":1"#))
        var expected: Int64 = 1
        var peak = before
        while expected <= Int64(total) {
            let text = try await ws.nextText(timeout: 30)
            let value = try JSONParser.parse(text)
            guard value["type"]?.stringValue == "publish", let offset = value["offset"]?.intValue else { continue }
            guard Int64(offset) == expected else {
                Issue.record("expected offset \(expected), got \(offset)")
                return
            }
            expected += 1
            if expected % 20_000 == 0 { peak = max(peak, Self.residentBytes()) }
        }
        // Then live: the next message arrives as an ordinary push.
        try server.hub.publish("live again", to: room, from: nil) { _ in }
        let live = try await ws.nextText(timeout: 10)
        #expect(live.contains(#""offset":200001"#))
        #expect(live.contains("live again"))
        // The replay went page by page: the server never held the backlog at once (200,000
        // messages are ~40 MB encoded; the old single read held them all, then cut the
        // client off at the write-queue limit).
        #expect(peak - before < 64 << 20, "resident memory grew by \((peak - before) >> 20) MiB during the replay")
    }
}
