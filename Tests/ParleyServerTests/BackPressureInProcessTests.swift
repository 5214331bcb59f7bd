import Dispatch
import Foundation
import ParleyCore
import ParleyIO
@testable import ParleyServer
import ParleyTestSupport
import Testing

/// Publisher back-pressure on the line and native doors, in-process: a sender to a room
/// whose deliveries are behind is not read (its bytes wait, unread, on its in-memory
/// connection) until the room catches up; nothing is lost or reordered.
@Suite struct BackPressureInProcessTests {
    /// Holds loop `index` (its deliveries pile up) until the returned semaphore is signalled.
    static func hold(_ server: InProcessServer, loop index: Int) -> DispatchSemaphore {
        let release = DispatchSemaphore(value: 0)
        server.server.group.loops[index].execute { _ = release.wait(timeout: .now() + 20) }
        return release
    }

    @Test func aSlowRoomStopsReadingItsLinePublisherUntilItCatchesUp() async throws {
        let server = try InProcessServer { $0.roomBacklog = 4; $0.lineRatePerSecond = 1_000_000; $0.lineBurst = 1_000_000 }
        defer { server.stop() }
        let listener = try await server.lineClient(name: "listener", loop: 0)
        let publisher = try await server.lineClient(name: "pub", loop: 1)
        _ = try await listener.readLine(until: { $0 == "pub has joined" })
        let release = Self.hold(server, loop: 0)
        for n in 0..<40 { publisher.send("msg:m\(n)\n") }
        try await eventually("the publisher throttled") { server.server.core.limits.count(.publisherThrottled) >= 1 }
        // Not read while the room is behind: the rest of its lines wait on its connection.
        #expect(await publisher.bytesNotYetRead() > 0)
        release.signal()
        var received: [String] = []
        while received.count < 40 {
            let line = try await listener.readLine(timeout: 10)
            if line.hasPrefix("pub:") { received.append(String(line.dropFirst(4))) }
        }
        #expect(received == (0..<40).map { "m\($0)" }, "every message, in order, once the room caught up")
        try await eventually("the publisher read everything") { await publisher.bytesNotYetRead() == 0 }
    }

    @Test func aSlowRoomStopsReadingItsNativePublisherUntilItCatchesUp() async throws {
        let server = try InProcessServer { $0.roomBacklog = 4; $0.nativeRatePerSecond = 1_000_000; $0.nativeBurst = 1_000_000 }
        defer { server.stop() }
        let listener = try await server.native(loop: 0)
        _ = try await listener.subscribe("r")
        let publisher = try await server.native(loop: 1)
        let release = Self.hold(server, loop: 0)
        for n in 0..<40 { publisher.publish(.string("m\(n)"), to: "r") }
        try await eventually("the publisher throttled") { server.server.core.limits.count(.publisherThrottled) >= 1 }
        #expect(await publisher.peer.bytesNotYetRead() > 0)
        release.signal()
        var received: [String] = []
        while received.count < 40 {
            let message = try await listener.next(timeout: 10) { $0["type"] == "publish" }
            received.append(message["message"]?.stringValue ?? "")
        }
        #expect(received == (0..<40).map { "m\($0)" })
    }

    @Test func aLoopThatDoesNotExistIsRefused() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        await #expect(throws: StartupError.self) { _ = try await server.line(loop: 7) }
    }
}
