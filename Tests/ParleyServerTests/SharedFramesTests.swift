import ParleyCore
import ParleyIO
@testable import ParleyServer
import Testing

/// The native frames every event loop shares: a message is encoded once per server, not once
/// per loop, and the table stays bounded.
@Suite struct SharedFramesTests {
    private func message(_ text: String) -> Message {
        Message(id: "m-\(text)", offset: 1, timestampMillis: 1, room: RoomKey(channel: "c", room: "r"), sender: nil, body: .string(text))
    }

    @Test func theSecondLoopTakesTheFrameTheFirstMade() {
        let shared = SharedFrames()
        let hello = message("hello")
        var encodings = 0
        let first = shared.frame(of: hello) { encodings += 1; return IOBuffer(Array("one".utf8)) }
        let second = shared.frame(of: hello) { encodings += 1; return IOBuffer(Array("two".utf8)) }
        #expect(encodings == 1)
        #expect(first === second)
        // Another message is encoded for itself.
        let other = shared.frame(of: message("other")) { encodings += 1; return IOBuffer(Array("three".utf8)) }
        #expect(encodings == 2)
        #expect(other?.bytes == Array("three".utf8))
    }

    @Test func largeFramesAreNotKept() {
        let shared = SharedFrames()
        let big = message("big")
        var encodings = 0
        for _ in 0..<2 {
            _ = shared.frame(of: big) {
                encodings += 1
                return IOBuffer([UInt8](repeating: 120, count: SharedFrames.maxFrameBytes + 1))
            }
        }
        #expect(encodings == 2)
    }

    @Test func theTableHoldsNoMoreThanItsBytes() {
        let shared = SharedFrames()
        var kept: [Message] = []
        // Enough 4 KiB frames to pass the bound twice over.
        for index in 0..<(2 * SharedFrames.maxBytes / SharedFrames.maxFrameBytes) {
            let next = message("n\(index)")
            kept.append(next)
            _ = shared.frame(of: next) { IOBuffer([UInt8](repeating: 120, count: SharedFrames.maxFrameBytes)) }
            #expect(shared.heldBytes <= SharedFrames.maxBytes)
        }
        #expect(shared.heldBytes > SharedFrames.maxBytes / 2)
    }

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
