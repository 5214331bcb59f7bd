import Foundation
import ParleyClient
import ParleyIO
import ParleyTestSupport
import Synchronization

/// Collects a room's events in the background so tests can wait for one (polling, with a timeout).
actor EventLog {
    private(set) var events: [RoomEvent] = []
    private var task: Task<Void, Never>?
    /// Whether the room's event stream has ended.
    private(set) var finished = false

    init(_ room: Room) {
        let stream = room.events
        Task { await self.start(stream) }
    }

    private func start(_ stream: AsyncStream<RoomEvent>) {
        task = Task {
            for await event in stream { self.append(event) }
            self.markFinished()
        }
    }

    private func markFinished() { finished = true }

    /// Waits until the room's event stream ends.
    func waitForEnd(timeout: Double = 5) async throws {
        do {
            try await eventually("the event stream to end", timeout: timeout, pollMillis: 10) { finished }
        } catch is TimeoutError {
            throw TimeoutError(what: "the event stream to end; saw \(events)", seconds: timeout)
        }
    }

    private func append(_ event: RoomEvent) { events.append(event) }

    /// Waits until `predicate` holds for the events so far; returns the first matching event.
    @discardableResult
    func waitFor(_ what: String, timeout: Double = 5, _ predicate: @Sendable (RoomEvent) -> Bool) async throws -> RoomEvent {
        var hit: RoomEvent?
        do {
            try await eventually(what, timeout: timeout, pollMillis: 10) {
                hit = events.first(where: predicate)
                return hit != nil
            }
        } catch is TimeoutError {
            throw TimeoutError(what: "waiting for \(what); saw \(events)", seconds: timeout)
        }
        return hit!
    }

    /// Texts of `.message` events, in order.
    var messageTexts: [String] {
        events.compactMap { if case .message(let m) = $0 { m.text } else { nil } }
    }

    var historyTexts: [String] {
        events.compactMap { if case .history(let m) = $0 { m.text } else { nil } }
    }

    func clear() { events = [] }
}

/// Returns once a client with `policy` that a server sends away with 1001 ("going away", which
/// is retried) has come back `times` times. A test that proves a client does NOT come back
/// waits for this instead of a while: a reconnect with the same policy, had it been
/// scheduled, would have happened by then, however busy the machine.
func waitForControlClientReconnects(_ times: Int, policy: ReconnectPolicy) async throws {
    let server = try ClosingFakeServer(closeCode: 1001, reason: "control")
    defer { server.stop() }
    let control = ParleyClient(url: nativeURL(port: server.port), channel: "demo", reconnectPolicy: policy)
    try await control.connect()
    try await eventually("the control client came back \(times) times", timeout: 20) { server.connections > times }
    await control.disconnect()
}

/// A TCP proxy in front of the server so a test can cut a client's connection from the
/// server side and keep it down for a while ("block"), without restarting the server.
final class TCPProxy: Sendable {
    final class Counters: Sendable {
        let accepted = Atomic<Int>(0)
        let blocked = Atomic<Bool>(false)
        /// Drop every byte instead of forwarding it (a peer that went silent).
        let silent = Atomic<Bool>(false)
    }
    private let group: EventLoopGroup
    private let listener: TCPListener
    let counters = Counters()
    var port: Int { listener.port }

    init(upstreamPort: Int) throws {
        let group = EventLoopGroup(loopCount: 1)
        self.group = group
        let counters = self.counters
        listener = try TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { client in
            counters.accepted.add(1, ordering: .relaxed)
            guard !counters.blocked.load(ordering: .relaxed) else { return }   // no handler: closed
            let near = Pipe(counters: counters)
            client.handler = near
            client.loop.connect(host: "127.0.0.1", port: upstreamPort) { result in
                switch result {
                case .success(let upstream):
                    let far = Pipe(counters: counters)
                    upstream.handler = far
                    far.attach(client)
                    near.attach(upstream)
                case .failure:
                    client.close(flush: false)
                }
            }
        }
    }

    /// Closes every proxied connection (both sides) abruptly.
    func dropAll() {
        let done = DispatchSemaphore(value: 0)
        let loop = group.loops[0]
        loop.execute {
            loop.forEachConnection { $0.close(flush: false) }
            done.signal()
        }
        done.wait()
    }

    func stop() {
        listener.close()
        dropAll()
        group.shutdown()
    }

    /// One direction of a proxied pair: what it reads goes to the peer.
    private final class Pipe: ConnectionHandler {
        private var peer: TCPConnection?
        private var buffered: [UInt8] = []
        private let counters: Counters

        init(counters: Counters) { self.counters = counters }

        func attach(_ peer: TCPConnection) {
            self.peer = peer
            if !buffered.isEmpty { peer.write(buffered) }
            buffered = []
        }

        func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
            if counters.silent.load(ordering: .relaxed) { return }
            if let peer { peer.write(Array(bytes)) } else { buffered.append(contentsOf: bytes) }
        }

        func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
            peer?.close(flush: false)
        }
    }
}
