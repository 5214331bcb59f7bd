import ParleyCore
import ParleyIO
@testable import ParleyServer
import Testing

/// Fan-out across loops in-process: the inbox's queue, runs of a room's messages.
@Suite struct FanOutInProcessTests {
    @Test func subscribersOnBothLoopsGetTheMessageAsItWasSent() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await server.native(loop: 0)
        let bob = try await server.native(loop: 1)
        for client in [alice, bob] { try await client.subscribe("room") }
        for text in ["one", "two"] {
            alice.publish(.string(text), to: "room")
            for client in [alice, bob] {
                let pushed = try await client.next { $0["type"] == "publish" }
                #expect(pushed["message"] == .string(text))
                #expect(pushed["room"] == "room")
            }
        }
    }

    /// A burst lands in one group commit: each loop handles it as a run (one write per
    /// subscriber), in order, nothing missing.
    @Test func aBurstReachesEverySubscriberInOrder() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await server.native(loop: 0)
        let bob = try await server.native(loop: 1)
        let carol = try await server.native(loop: 1)
        for client in [alice, bob, carol] { try await client.subscribe("room") }
        let texts = (1...12).map { "m\($0)" }
        for text in texts { alice.publish(.string(text), to: "room") }
        for client in [alice, bob, carol] {
            var got: [String] = []
            while got.count < texts.count {
                let pushed = try await client.next { $0["type"] == "publish" }
                got.append(pushed["message"]?.stringValue ?? "?")
            }
            #expect(got == texts)
        }
    }
}
