import Foundation
import Synchronization
import Testing
@testable import ParleyIO
import ParleyTestSupport

/// The in-memory connection behaves as the real one does to its handler: reads, coalesced
/// writes, the write-queue limit, back-pressure both ways, flushing closes, drains; TLS is
/// refused.
@Suite struct InMemoryConnectionTests {
    static let group = EventLoopGroup(loopCount: 1)
    var loop: EventLoop { Self.group.loops[0] }

    /// Records reads and the close; answers through `onRead`.
    final class Recorder: ConnectionHandler, @unchecked Sendable {
        // Safe: touched only on the connection's loop (the handler's calls) and read by the
        // test through `InMemoryPeer.withConnection`, which runs on that loop too.
        var reads: [[UInt8]] = []
        var closes: [ConnectionCloseReason] = []
        var onRead: (TCPConnection, [UInt8]) -> Void = { _, _ in }

        func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
            reads.append(Array(bytes))
            onRead(connection, Array(bytes))
        }
        func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) { closes.append(reason) }
    }

    func open(_ recorder: Recorder, ip: String = "10.1.2.3", setUp: @escaping @Sendable (TCPConnection) -> Void = { _ in })
        async throws -> InMemoryPeer {
        let handler = UncheckedBox(recorder)
        return try await InMemoryPeer.connect(on: loop, remoteIP: ip) { connection in
            connection.handler = handler.value
            setUp(connection)
        }
    }

    @Test func readsArriveInOrderAndAnswersComeBack() async throws {
        let recorder = Recorder()
        recorder.onRead = { connection, bytes in connection.write(bytes.reversed()) }
        let peer = try await open(recorder)
        #expect(await peer.withConnection { $0?.remoteAddress } == "10.1.2.3:\(peer.remotePort)")
        #expect(await peer.withConnection { $0?.clientIP } == "10.1.2.3")
        peer.send("abc")
        peer.send("de")
        let answer = try await peer.read(atLeast: 5)
        #expect(String(decoding: answer, as: UTF8.self) == "cbaed")
        #expect(await peer.withConnection { _ in recorder.reads.map { String(decoding: $0, as: UTF8.self) } } == ["abc", "de"])
    }

    @Test func writesOfOneTurnGoOutTogetherAndInOrder() async throws {
        let recorder = Recorder()
        let peer = try await open(recorder)
        let queuedInTurn = await peer.withConnection { connection -> Int in
            for i in 0..<100 { connection?.write("\(i),") }
            return connection?.queuedBytes ?? -1
        }
        // Nothing left during the turn: all of it was queued, then flushed at its end.
        #expect(queuedInTurn == (0..<100).map { "\($0)," }.joined().utf8.count)
        let bytes = try await peer.read(atLeast: queuedInTurn)
        #expect(String(decoding: bytes, as: UTF8.self) == (0..<100).map { "\($0)," }.joined())
        #expect(await peer.withConnection { $0?.queuedBytes } == 0)
    }

    @Test func aPeerThatDoesNotReadIsCutAtTheQueueLimit() async throws {
        let recorder = Recorder()
        let peer = try await open(recorder) { $0.maxQueuedBytes = 10_000 }
        peer.stopReading()
        let chunk = [UInt8](repeating: 7, count: 4000)
        // Two turns of 4000 bytes wait (the peer reads nothing): 8000 queued, still open.
        for _ in 0..<2 { _ = await peer.withConnection { $0?.write(chunk) } }
        #expect(await peer.withConnection { $0?.queuedBytes } == 8000)
        #expect(peer.closeReason == nil)
        _ = await peer.withConnection { $0?.write(chunk) }
        #expect(try await peer.waitForClose() == .writeQueueOverflow)
        #expect(await peer.withConnection { _ in recorder.closes } == [.writeQueueOverflow])
        #expect(peer.unread.isEmpty)
    }

    @Test func heldBytesArriveWhenThePeerReadsAgainAndWhenDrainedRuns() async throws {
        let recorder = Recorder()
        let peer = try await open(recorder)
        peer.stopReading()
        _ = await peer.withConnection { $0?.write("held back") }
        let drained = Locked(false)
        let queued = await peer.withConnection { connection -> Int in
            connection?.whenDrained(below: 0) { drained.withLock { $0 = true } }
            return connection?.queuedBytes ?? -1
        }
        #expect(queued == 9)
        #expect(peer.unread.isEmpty)
        try await Task.sleep(for: .milliseconds(20))
        #expect(!drained.value)
        peer.startReading()
        #expect(String(decoding: try await peer.read(atLeast: 9), as: UTF8.self) == "held back")
        try await eventually("the drain waiter ran") { drained.value }
    }

    @Test func stopReadingHoldsTheSentBytesBackUntilStartReading() async throws {
        let recorder = Recorder()
        let peer = try await open(recorder)
        _ = await peer.withConnection { $0?.stopReading() }
        peer.send("one")
        peer.send("two")
        try await Task.sleep(for: .milliseconds(20))
        #expect(await peer.withConnection { _ in recorder.reads.count } == 0)
        #expect(await peer.bytesNotYetRead() == 6)
        _ = await peer.withConnection { $0?.startReading() }
        try await eventually("both reads arrived") { await peer.withConnection { _ in recorder.reads.count } == 2 }
        #expect(await peer.bytesNotYetRead() == 0)
    }

    @Test func aReadStoppedInsideTheHandlerStopsTheNextOneToo() async throws {
        let recorder = Recorder()
        recorder.onRead = { connection, _ in connection.stopReading() }
        let peer = try await open(recorder)
        peer.send("a")
        peer.send("b")
        try await eventually("the first read") { await peer.withConnection { _ in recorder.reads.count } == 1 }
        try await Task.sleep(for: .milliseconds(20))
        #expect(await peer.withConnection { _ in recorder.reads.count } == 1)
    }

    @Test func aFlushingCloseSendsEverythingThenTellsTheHandler() async throws {
        let recorder = Recorder()
        let peer = try await open(recorder)
        _ = await peer.withConnection { connection in
            connection?.write("bye")
            connection?.close()
        }
        #expect(try await peer.waitForClose() == .local)
        #expect(peer.unread == Array("bye".utf8))
        #expect(await peer.withConnection { _ in recorder.closes } == [.local])
    }

    @Test func aFlushingCloseWaitsForAPeerThatDoesNotRead() async throws {
        let recorder = Recorder()
        let peer = try await open(recorder)
        peer.stopReading()
        _ = await peer.withConnection { connection in
            connection?.write("last words")
            connection?.close()
        }
        try await Task.sleep(for: .milliseconds(20))
        #expect(peer.closeReason == nil)
        #expect(await peer.withConnection { $0?.state } == .closingAfterFlush)
        peer.startReading()
        #expect(try await peer.waitForClose() == .local)
        #expect(peer.unread == Array("last words".utf8))
    }

    @Test func thePeersEOFClosesAfterItsLastBytesAndTheAnswerIsFlushed() async throws {
        let recorder = Recorder()
        recorder.onRead = { connection, bytes in connection.write(bytes) }
        let peer = try await open(recorder)
        peer.send("echo me")
        peer.closeWrite()
        #expect(try await peer.waitForClose() == .peerClosed)
        #expect(peer.unread == Array("echo me".utf8))
        #expect(await peer.withConnection { _ in recorder.reads.count } == 1)
    }

    @Test func aResetClosesAtOnceAndDropsTheQueue() async throws {
        let recorder = Recorder()
        let peer = try await open(recorder)
        peer.stopReading()
        _ = await peer.withConnection { $0?.write("never read") }
        peer.reset()
        #expect(try await peer.waitForClose() == .peerClosed)
        peer.startReading()
        try await Task.sleep(for: .milliseconds(10))
        #expect(peer.unread.isEmpty)
    }

    @Test func aConnectionLeftWithoutAHandlerIsClosed() async throws {
        let peer = try await InMemoryPeer.connect(on: loop) { _ in }
        #expect(await peer.withConnection { $0 == nil })
    }

    @Test func aStoppedLoopRefusesAConnectionAndItsPeerStillAnswers() async throws {
        let group = EventLoopGroup(loopCount: 1)
        let recorder = Recorder()
        let handler = UncheckedBox(recorder)
        let peer = try await InMemoryPeer.connect(on: group.loops[0]) { $0.handler = handler.value }
        group.shutdown()
        #expect(peer.closeReason == .shutdown)
        #expect(await peer.withConnection { $0 == nil })
        await #expect(throws: IOError.self) { _ = try await InMemoryPeer.connect(on: group.loops[0]) { _ in } }
    }

    @Test func startTLSIsRefusedWithAClearError() async throws {
        let recorder = Recorder()
        let peer = try await open(recorder)
        let (certificate, key) = try makeTestCertificate()
        let context = try TLSContext(certificateChainFile: certificate, privateKeyFile: key)
        let message = await peer.withConnection { connection -> String? in
            do {
                try connection?.startTLS(context)
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(message == "TLS is not available on an in-memory connection")
    }

    @Test func largeSendsArriveInReadBufferSizedReads() async throws {
        let recorder = Recorder()
        let peer = try await open(recorder)
        peer.send([UInt8](repeating: 1, count: EventLoop.readBufferSize * 2 + 5))
        try await eventually("three reads") { await peer.withConnection { _ in recorder.reads.map(\.count) } == [EventLoop.readBufferSize, EventLoop.readBufferSize, 5] }
    }
}

/// Hands a loop-confined object to the loop that owns it.
struct UncheckedBox<T>: @unchecked Sendable {
    // Safe: the value is created by the test and from then on used only on the loop.
    let value: T
    init(_ value: T) { self.value = value }
}
