import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// The native door's and HTTP's timers (pings, request and idle timeouts) on real sockets;
/// its rates and limits are tested in-process (IdentityAndNativeLimitsInProcessTests).
@Suite(.serialized) struct NativeLimitsTests {
    @Test func silentPeerIsPingedThenClosed() async throws {
        let server = try startTestServer { $0.webSocketPingIntervalMillis = 300 }
        defer { server.shutdown() }
        let lively = try await NativeClient.connect(server)
        let silent = try TestWebSocket(port: server.httpPort)
        // The lively client keeps reading (and so answers pings) the whole time the silent one
        // is being given up on, and stays connected.
        // It reads on a thread of its own: a busy test pool must not make it miss the pings.
        let livelyWS = lively.ws
        let stop = Locked(false)
        let livelyReads = BackgroundThread { () -> (texts: [String], closed: Bool) in
            var texts: [String] = []
            while !stop.value && !livelyWS.isClosedForReading {
                if let text = try? livelyWS.receiveText(timeout: 0.05) { texts.append(text) }
            }
            return (texts, livelyWS.isClosedForReading)
        }
        // The silent one never read, never ponged: closed without ceremony.
        let silentClosed = await silent.socket.closed(within: 2.8)
        stop.withLock { $0 = true }
        #expect(silentClosed)
        let (texts, livelyClosed) = try livelyReads.result(timeout: 10)
        #expect(texts.isEmpty && !livelyClosed, "the lively client got \(texts), closed: \(livelyClosed)")
        // Still there: the reply to a request made now is the next thing it gets.
        try lively.send(["type": "subscribe", "room": "r", "callback": 1])
        #expect(try await lively.next() == ["callback": 1])
    }

    @Test func httpRequestAndIdleTimeouts() async throws {
        let server = try startTestServer { $0.httpRequestTimeoutMillis = 200; $0.httpIdleTimeoutMillis = 300 }
        defer { server.shutdown() }
        let trickle = try TestSocket(port: server.httpPort)
        try trickle.send("GET /demo/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        #expect(try await trickle.nextLine().hasPrefix("HTTP/1.1 408"))
        #expect(await trickle.closed(within: 3))
        let idle = try TestSocket(port: server.httpPort)
        #expect(await idle.closed(within: 3))
    }
}
