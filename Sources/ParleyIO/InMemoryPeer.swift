import CLibUV
import Foundation
import Synchronization

/// The far end of an in-memory ``TCPConnection``: a connection without a socket, for tests
/// (SwiftNIO's `EmbeddedChannel` idea). The connection is the same class as a real one, on a
/// real loop: its handler sees reads, writes are queued and coalesced per loop turn and cut
/// at ``TCPConnection/maxQueuedBytes``, `stopReading` holds bytes back, `close(flush:)`
/// flushes and then calls `connectionDidClose`, `whenDrained` works. Only the socket is
/// replaced: where a real connection's flush hands its bytes to the kernel, this one's hands
/// them to the peer, and `startTLS` throws.
///
/// The test drives the peer from any thread: ``send(_:)-(([UInt8]))`` delivers bytes as a read
/// on the connection's loop, ``read(timeout:_:)`` waits for what the connection wrote,
/// ``stopReading()`` makes a peer that does not read, ``closeWrite()`` and ``reset()`` end it
/// from this side. Every wait has a timeout.
public final class InMemoryPeer: Sendable {
    /// The connection's loop.
    public let loop: EventLoop
    /// The connection's ``TCPConnection/id``.
    public let connectionID: UInt64
    /// The address the connection reports as its peer's.
    public let remoteIP: String
    public let remotePort: Int
    let shared: Mutex<Shared>

    struct Shared {
        /// Bytes the connection wrote that the test has not read yet.
        var received: [UInt8] = []
        /// Set when the connection closed: why, as its handler was told.
        var closeReason: ConnectionCloseReason?
    }

    /// Why a wait ended without what it waited for.
    public struct Timeout: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    private static let nextPort = Atomic<Int>(0)

    init(loop: EventLoop, connectionID: UInt64, remoteIP: String, remotePort: Int) {
        self.loop = loop
        self.connectionID = connectionID
        self.remoteIP = remoteIP
        self.remotePort = remotePort
        shared = Mutex(Shared())
    }

    /// Opens an in-memory connection on `loop` as if a listener had accepted it from
    /// `remoteIP`: `accept` runs on the loop with the connection, exactly like a
    /// ``TCPListener``'s `onAccept` (it sets the handler; a connection left without one is
    /// closed at once, otherwise reading starts). Returns once `accept` has run; throws when
    /// the loop has stopped.
    public static func connect(on loop: EventLoop, remoteIP: String = "127.0.0.1", remotePort: Int? = nil,
                               accept: @escaping @Sendable (TCPConnection) -> Void) async throws(IOError) -> InMemoryPeer {
        let port = remotePort ?? 20_000 + nextPort.add(1, ordering: .relaxed).newValue % 40_000
        let peer: InMemoryPeer? = await withCheckedContinuation { continuation in
            let taken = loop.tryExecute {
                guard !loop.isStopping else { return continuation.resume(returning: nil) }
                let (connection, peer) = TCPConnection.inMemory(on: loop, remoteIP: remoteIP, remotePort: port)
                accept(connection)
                if connection.handler == nil {
                    connection.close(flush: false)
                } else {
                    connection.startReading()
                }
                continuation.resume(returning: peer)
            }
            if !taken { continuation.resume(returning: nil) }
        }
        guard let peer else { throw IOError(message: "the event loop has stopped: no connection can be opened on it") }
        return peer
    }

    // MARK: the test's side of the wire

    /// Sends bytes to the connection: delivered in order as reads on its loop (at most the
    /// loop's read buffer per read, like a socket), while it reads.
    public func send(_ bytes: [UInt8]) {
        onWire { wire, connection in
            wire.queueRead(bytes)
            wire.scheduleReads(of: connection)
        }
    }

    /// Sends a string's UTF-8 bytes.
    public func send(_ text: String) { send(Array(text.utf8)) }

    /// Closes this side for writing (EOF): the connection reads what was sent before, then
    /// closes as on a peer's EOF (flushing what it queued: this side still reads it).
    public func closeWrite() {
        onWire { wire, connection in
            wire.peerSentEOF = true
            wire.scheduleReads(of: connection)
        }
    }

    /// Resets the connection: it closes at once (reason ``ConnectionCloseReason/peerClosed``),
    /// dropping what it queued.
    public func reset() {
        onWire { _, connection in connection.close(flush: false, reason: .peerClosed) }
    }

    /// This side stops reading: what the connection writes from now on waits in its write
    /// queue (``TCPConnection/queuedBytes``), as for a peer whose socket buffers are full,
    /// until ``startReading()``; past ``TCPConnection/maxQueuedBytes`` the connection is cut.
    public func stopReading() {
        onWire { wire, _ in wire.peerReads = false }
    }

    /// This side reads again: what waited arrives, and the connection's queue drains.
    public func startReading() {
        onWire { wire, connection in
            wire.peerReads = true
            if let bytes = wire.takeHeld() {
                self.shared.withLock { $0.received += bytes }
                connection.wireDrained()
            }
        }
    }

    /// Runs `body` on the loop with the connection, if it is still open.
    private func onWire(_ body: @escaping @Sendable (InMemoryWire, TCPConnection) -> Void) {
        let (loop, id) = (self.loop, connectionID)
        loop.execute {
            guard let connection = loop.connections[id], let wire = connection.wire else { return }
            body(wire, connection)
        }
    }

    /// Runs `body` on the connection's loop with the connection (nil once it is closed, or
    /// without running on the loop once the loop has stopped) and returns its result: a test
    /// reads the connection's state where it lives.
    public func withConnection<T: Sendable>(_ body: @escaping @Sendable (TCPConnection?) -> T) async -> T {
        let (loop, id) = (self.loop, connectionID)
        return await withCheckedContinuation { continuation in
            let taken = loop.tryExecute { continuation.resume(returning: body(loop.connections[id])) }
            if !taken { continuation.resume(returning: body(nil)) }
        }
    }

    /// Bytes sent that the connection has not read yet: held back while it does not read
    /// (``TCPConnection/stopReading()``, back-pressure); 0 once it is closed.
    public func bytesNotYetRead() async -> Int {
        await withConnection { connection in connection?.wire?.pendingReadBytes ?? 0 }
    }

    // MARK: what the connection wrote

    /// Bytes the connection wrote that have not been read (taken) yet.
    public var unread: [UInt8] { shared.withLock { $0.received } }

    /// Why the connection closed, once it has (nil while it is open).
    public var closeReason: ConnectionCloseReason? { shared.withLock { $0.closeReason } }

    /// Waits until `parse` finds what it wants in the unread bytes and returns it. `parse`
    /// removes what it used from the front of the buffer (leaving the rest for the next read)
    /// and returns nil when more bytes are needed. Throws ``Timeout`` after `timeout` seconds,
    /// or when the connection closed with nothing more to find.
    public func read<T>(timeout: Double = 5, _ what: String = "data", _ parse: (inout [UInt8]) throws -> T?) async throws -> T {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while true {
            // Only this side removes bytes and the loop only appends, so parse a copy and
            // then drop what it used from the front.
            let (snapshot, closed) = shared.withLock { ($0.received, $0.closeReason != nil) }
            var buffer = snapshot
            if let found = try parse(&buffer) {
                let used = snapshot.count - buffer.count
                if used > 0 { shared.withLock { $0.received.removeFirst(used) } }
                return found
            }
            if closed {
                throw Timeout(description: "the connection closed (\(closeReason.map { "\($0)" } ?? "")) before \(what) arrived; unread: \(Self.show(snapshot))")
            }
            if ContinuousClock.now >= deadline {
                throw Timeout(description: "no \(what) within \(timeout) s; unread: \(Self.show(snapshot))")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Takes every unread byte once at least `count` have arrived.
    public func read(atLeast count: Int = 1, timeout: Double = 5) async throws -> [UInt8] {
        try await read(timeout: timeout, "\(count) bytes") { buffer in
            guard buffer.count >= count else { return nil }
            defer { buffer.removeAll() }
            return buffer
        }
    }

    /// Waits until the connection has closed and returns why (what its handler was told).
    /// Unread bytes stay readable.
    @discardableResult
    public func waitForClose(timeout: Double = 5) async throws -> ConnectionCloseReason {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while true {
            if let reason = closeReason { return reason }
            if ContinuousClock.now >= deadline {
                throw Timeout(description: "the connection did not close within \(timeout) s; unread: \(Self.show(unread))")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Bytes for a failure message: text when they are, else their count.
    static func show(_ bytes: [UInt8]) -> String {
        guard !bytes.isEmpty else { return "nothing" }
        let prefix = bytes.prefix(600)
        if let text = String(validating: prefix, as: UTF8.self) { return "\(bytes.count) bytes: \(text.debugDescription)" }
        return "\(bytes.count) bytes (binary)"
    }
}

/// The connection's side of the wire: what the peer sent and has not been read yet, and
/// what the connection wrote while the peer did not read. Loop-confined.
final class InMemoryWire {
    /// Weak: the test owns its peer; bytes for a peer it dropped go nowhere.
    weak var peer: InMemoryPeer?
    /// Sends not yet delivered as reads, in order.
    private var reads: [[UInt8]] = []
    private var readsStart = 0
    var peerSentEOF = false
    /// Whether the test side reads (takes what is flushed at once).
    var peerReads = true
    /// Flushed while the peer did not read; counted as libuv's write queue.
    var held: [IOBuffer] = []
    var heldBytes = 0
    private var readsScheduled = false

    func queueRead(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        // At most one read buffer per read, as a socket delivers.
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + EventLoop.readBufferSize)
            reads.append(Array(bytes[start..<end]))
            start = end
        }
    }

    var hasReads: Bool { readsStart < reads.count }

    var pendingReadBytes: Int { reads[readsStart...].reduce(0) { $0 + $1.count } }

    func nextRead() -> [UInt8]? {
        guard readsStart < reads.count else { return nil }
        let chunk = reads[readsStart]
        readsStart += 1
        if readsStart == reads.count {
            reads.removeAll(keepingCapacity: true)
            readsStart = 0
        }
        return chunk
    }

    /// Delivers pending reads in a task of their own on the loop (as libuv calls back in a
    /// later phase), never from inside the caller.
    func scheduleReads(of connection: TCPConnection) {
        guard !readsScheduled else { return }
        readsScheduled = true
        let (loop, id) = (connection.loop, connection.id)
        loop.execute {
            guard let connection = loop.connections[id], let wire = connection.wire else { return }
            wire.readsScheduled = false
            connection.deliverInMemoryReads()
        }
    }

    /// The peer takes `buffers` now, unless it does not read or bytes already wait.
    func take(_ buffers: UnsafeBufferPointer<IOBuffer>) -> Bool {
        guard peerReads, held.isEmpty else { return false }
        var bytes: [UInt8] = []
        for buffer in buffers { bytes.append(contentsOf: UnsafeRawBufferPointer(start: buffer.base, count: buffer.count)) }
        peer?.shared.withLock { $0.received += bytes }
        return true
    }

    /// What waited for the peer, now handed over; nil when nothing did.
    func takeHeld() -> [UInt8]? {
        guard !held.isEmpty else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(heldBytes)
        for buffer in held { bytes.append(contentsOf: UnsafeRawBufferPointer(start: buffer.base, count: buffer.count)) }
        held.removeAll()
        heldBytes = 0
        return bytes
    }

    func dropHeld() {
        held.removeAll()
        heldBytes = 0
    }

    func connectionClosed(reason: ConnectionCloseReason) {
        peer?.shared.withLock { $0.closeReason = reason }
    }
}

extension TCPConnection {
    /// A connection on `loop` whose far end is an ``InMemoryPeer`` instead of a socket.
    /// Loop thread only; ``InMemoryPeer/connect(on:remoteIP:remotePort:accept:)`` is the
    /// public way in.
    static func inMemory(on loop: EventLoop, remoteIP: String, remotePort: Int) -> (TCPConnection, InMemoryPeer) {
        loop.assertInEventLoop()
        // A TCP handle without a socket: libuv closes it like any other, and its write-queue
        // counter stands for what the peer has not read.
        let handle = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(loop.uvLoop, handle)
        let wire = InMemoryWire()
        let connection = TCPConnection(loop: loop, handle: handle, peer: (remoteIP, remotePort), wire: wire)
        let peer = InMemoryPeer(loop: loop, connectionID: connection.id, remoteIP: remoteIP, remotePort: remotePort)
        wire.peer = peer
        return (connection, peer)
    }
}
