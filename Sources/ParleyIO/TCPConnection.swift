import CLibUV

/// Why a connection closed.
public enum ConnectionCloseReason: Sendable, Equatable {
    /// The peer closed its side (EOF) or reset the connection.
    case peerClosed
    /// This side asked to close.
    case local
    /// The peer did not read fast enough: its write queue passed the limit.
    case writeQueueOverflow
    /// The server is shutting down.
    case shutdown
    /// A socket error.
    case error(IOError)
}

/// Receives a connection's bytes and its end. Called on the connection's loop.
public protocol ConnectionHandler: AnyObject {
    /// Bytes arrived. `bytes` is only valid during the call.
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer)
    /// The connection is closed; no more calls follow.
    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason)
}

/// A TCP connection owned by one event loop. Use it only on that loop's thread.
///
/// Writes are queued and coalesced: everything written during one loop turn goes out as one
/// `writev`. The queue is bounded: a peer that stops reading is disconnected once its queue
/// passes ``maxQueuedBytes``, without slowing anyone else.
///
/// Tests make one without a socket, whose far end is an ``InMemoryPeer``: the same class and
/// write path; only the flush, reads and the close differ.
public final class TCPConnection {
    /// The loop this connection lives on, for life.
    public let loop: EventLoop
    /// Unique within the process.
    public let id: UInt64
    /// The peer's address as `ip:port`.
    public let remoteAddress: String
    /// The peer's IP address without the port.
    public let remoteIP: String
    /// The client's IP address: ``remoteIP``, unless the peer is a trusted reverse proxy that
    /// named the client (X-Forwarded-For, a PROXY protocol header); the server's doors set it.
    /// Per-IP limits, bans and the admin API's client list use this one.
    public var clientIP: String
    /// True for a connection this process opened (`EventLoop.connect`), false for one a
    /// listener accepted.
    public internal(set) var isOutbound = false
    /// Receives reads and the close. Released after `connectionDidClose`.
    public var handler: (any ConnectionHandler)?
    /// Largest number of bytes that may wait to be written before the connection is cut.
    public var maxQueuedBytes: Int {
        get { out.pointee.maxQueuedBytes }
        set { out.pointee.maxQueuedBytes = newValue }
    }

    /// Lifecycle.
    public enum State: Sendable, Equatable { case open, closingAfterFlush, closed }
    /// Read on every delivery, so it lives with the write state (no exclusivity check).
    @inlinable public private(set) var state: State {
        get { out.pointee.state }
        set { out.pointee.state = newValue }
    }

    let handle: UnsafeMutablePointer<uv_tcp_t>
    /// The write path's state, behind a pointer: `pointee` accesses carry no dynamic
    /// exclusivity checks, which on class properties cost ~20 runtime calls (~1,500
    /// instructions) per delivery. Loop thread only, like everything here.
    @usableFromInline let out: UnsafeMutablePointer<WriteState>
    private var closeReason: ConnectionCloseReason = .local
    private var isReading = false
    /// TLS state when the connection is encrypted (see ``startTLS(_:serverName:)``); set
    /// once, before any write.
    private var tls: TLSSession? {
        didSet { out.pointee.isTLS = tls != nil }
    }
    /// Called once the queue has drained to a mark (``whenDrained(below:_:)``).
    private var drainWaiter: (mark: Int, body: () -> Void)?
    /// The in-memory peer standing in for the socket (``InMemoryPeer``); nil for a real one.
    /// Only reads, `flush` and the close look at it: the write path is the same.
    let wire: InMemoryWire?

    convenience init(loop: EventLoop, handle: UnsafeMutablePointer<uv_tcp_t>) {
        self.init(loop: loop, handle: handle, peer: TCPConnection.peerName(handle), wire: nil)
    }

    init(loop: EventLoop, handle: UnsafeMutablePointer<uv_tcp_t>, peer: (ip: String, port: Int), wire: InMemoryWire?) {
        self.loop = loop
        self.handle = handle
        self.wire = wire
        self.id = loop.makeConnectionID()
        out = .allocate(capacity: 1)
        out.initialize(to: WriteState())
        let (ip, port) = peer
        self.remoteIP = ip
        self.clientIP = ip
        self.remoteAddress = ip.contains(":") ? "[\(ip)]:\(port)" : "\(ip):\(port)"
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        loop.connections[id] = self
    }

    deinit {
        out.pointee.pending.free()
        out.deinitialize(count: 1)
        out.deallocate()
    }

    private var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
    }

    static func from(_ pointer: UnsafeMutableRawPointer?) -> TCPConnection {
        Unmanaged<TCPConnection>.fromOpaque(pointer!).takeUnretainedValue()
    }

    /// Bytes waiting to be written (queued here plus held by libuv).
    public var queuedBytes: Int { out.pointee.pendingBytes + uv_stream_get_write_queue_size(stream) }

    // MARK: reading

    /// Starts delivering reads to the handler.
    public func startReading() {
        guard state == .open, !isReading else { return }
        isReading = true
        if let wire { wire.scheduleReads(of: self); return }
        uv_read_start(stream, { handle, _, buf in
            let loop = EventLoop.from(handle!.pointee.loop)
            buf!.pointee = uv_buf_init(loop.readBuffer.assumingMemoryBound(to: CChar.self),
                                       UInt32(EventLoop.readBufferSize))
        }, { stream, nread, buf in
            let connection = TCPConnection.from(stream!.pointee.data)
            if nread > 0 {
                let bytes = UnsafeRawBufferPointer(start: buf!.pointee.base, count: nread)
                connection.loop.statistics.didRead(nread)
                connection.deliver(bytes)
            } else if nread < 0 {
                let code = Int32(nread)
                if code == UV_EOF.rawValue || code == UV_ECONNRESET.rawValue {
                    connection.close(flush: code == UV_EOF.rawValue, reason: .peerClosed)
                } else {
                    connection.close(flush: false, reason: .error(IOError(uv: code, "read")))
                }
            }
        })
    }

    /// Hands bytes the in-memory peer sent to the handler, as reads, while reading (on this
    /// loop, never from inside a handler's call); then the peer's EOF, like libuv's.
    func deliverInMemoryReads() {
        guard let wire else { return }
        while isReading, state == .open, let chunk = wire.nextRead() {
            loop.statistics.didRead(chunk.count)
            chunk.withUnsafeBytes { deliver($0) }
        }
        if isReading, state == .open, wire.peerSentEOF, !wire.hasReads {
            close(flush: true, reason: .peerClosed)
        }
    }

    private func deliver(_ bytes: UnsafeRawBufferPointer) {
        guard let tls else {
            handler?.connection(self, didRead: bytes)
            return
        }
        do {
            let (plaintext, output) = try tls.receive(bytes)
            if !output.isEmpty { enqueue(IOBuffer(output)) }
            if !plaintext.isEmpty, state == .open {
                plaintext.withUnsafeBytes { handler?.connection(self, didRead: $0) }
            }
        } catch {
            close(flush: true, reason: .error(error))
        }
    }

    /// Encrypts this connection from now on: server side (when `context` is a server context)
    /// it waits for the peer's ClientHello; client side it sends its own, verifying the
    /// server's certificate against `serverName`. Reads reach the handler as plaintext and
    /// writes are encrypted, transparently.
    public func startTLS(_ context: TLSContext, serverName: String? = nil) throws(IOError) {
        if wire != nil { throw IOError(message: "TLS is not available on an in-memory connection") }
        let session = try TLSSession(context: context, serverName: serverName)
        tls = session
        if !context.isServer { enqueue(IOBuffer(session.start())) }
    }

    /// True when the connection is encrypted.
    public var isTLS: Bool { out.pointee.isTLS }

    /// Stops reading (back-pressure); the kernel buffers, then the peer's writes block.
    public func stopReading() {
        guard isReading else { return }
        isReading = false
        if wire == nil { uv_read_stop(stream) }
    }

    // MARK: writing

    /// Queues `buffer`; it goes out at the end of this loop turn together with everything else
    /// written to this connection in the same turn.
    public func write(_ buffer: IOBuffer) {
        guard state == .open, buffer.count > 0 else { return }
        guard out.pointee.isTLS, let tls else { enqueue(buffer); return }
        do {
            let ciphertext = try tls.send(buffer)
            if !ciphertext.isEmpty { enqueue(IOBuffer(ciphertext)) }
        } catch {
            close(flush: false, reason: .error(error))
        }
    }

    /// Queues bytes exactly as they go on the wire.
    private func enqueue(_ buffer: IOBuffer) {
        guard state == .open, buffer.count > 0 else { return }
        out.pointee.pending.append(buffer)
        out.pointee.pendingBytes += buffer.count
        if out.pointee.pendingBytes + uv_stream_get_write_queue_size(stream) > maxQueuedBytes {
            close(flush: false, reason: .writeQueueOverflow)
            return
        }
        if !out.pointee.isDirty {
            out.pointee.isDirty = true
            loop.markDirty(self)
        }
    }

    /// Copies and queues `bytes`.
    public func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        write(IOBuffer(bytes))
    }

    /// Copies and queues a string's UTF-8 bytes.
    public func write(_ string: String) {
        write(IOBuffer(string: string))
    }

    func flush() {
        out.pointee.isDirty = false
        guard !out.pointee.pending.isEmpty, state != .closed else { return }
        if let wire { flush(into: wire); return }
        // Nothing of ours in libuv's queue: hand the bytes straight to the kernel. Usually
        // it takes them all, and the turn costs one writev and no write request, callback or
        // re-arming of the socket for writability (which uv_write costs every time).
        var written = 0
        if out.pointee.inFlightWrites == 0 {
            written = tryWrite()
            if written < 0 { return }
            if written == out.pointee.pendingBytes {
                loop.statistics.didWrite(written)
                out.pointee.pending.removeAll()
                out.pointee.pendingBytes = 0
                writesDrained()
                return
            }
        }
        // A pooled request takes the queued buffers into its own (reused) array, so a flush
        // in steady state allocates nothing (it used to allocate the request, its uv_write_t,
        // a uv_buf_t array and a fresh queue: four mallocs per connection per loop turn).
        let request = loop.takeWriteRequest()
        out.pointee.pending.moveAll(into: &request.lists.pointee.buffers)
        loop.statistics.didWrite(out.pointee.pendingBytes)
        out.pointee.pendingBytes = 0
        // What the kernel already took is skipped: whole buffers, then the start of the next
        // (the buffers stay referenced by the request until the write completes).
        var skip = written
        for buffer in request.lists.pointee.buffers {
            if skip >= buffer.count {
                skip -= buffer.count
                continue
            }
            request.lists.pointee.bufs.append(uv_buf_init((buffer.base + skip).assumingMemoryBound(to: CChar.self),
                                                          UInt32(buffer.count - skip)))
            skip = 0
        }
        request.request.pointee.data = Unmanaged.passRetained(request).toOpaque()
        let status = request.lists.pointee.bufs.withUnsafeMutableBufferPointer { bufs in
            uv_write(request.request, stream, bufs.baseAddress, UInt32(bufs.count)) { req, status in
                let request = Unmanaged<WriteRequest>.fromOpaque(req!.pointee.data).takeRetainedValue()
                let connection = TCPConnection.from(req!.pointee.handle.pointee.data)
                connection.writeCompleted(request, status: status)
                connection.loop.recycle(request)
            }
        }
        if status < 0 {
            Unmanaged<WriteRequest>.fromOpaque(request.request.pointee.data).release()
            loop.recycle(request)
            close(flush: false, reason: .error(IOError(uv: status, "write")))
        } else {
            out.pointee.inFlightWrites += 1
        }
    }

    /// The in-memory flush: the peer takes the turn's bytes, or, while it does not read, they
    /// wait as libuv's queue would hold them (counted in ``queuedBytes``, so the queue limit
    /// still cuts the connection) until it reads again (``wireDrained()``).
    private func flush(into wire: InMemoryWire) {
        let bytes = out.pointee.pendingBytes
        loop.statistics.didWrite(bytes)
        out.pointee.pendingBytes = 0
        if wire.take(out.pointee.pending.buffers) {
            out.pointee.pending.removeAll()
            writesDrained()
            return
        }
        out.pointee.pending.moveAll(into: &wire.held)
        wire.heldBytes += bytes
        handle.pointee.write_queue_size = wire.heldBytes
        // The held bytes are one write in flight: a flushing close waits for them.
        out.pointee.inFlightWrites = 1
    }

    /// The in-memory peer read what was held for it.
    func wireDrained() {
        handle.pointee.write_queue_size = 0
        out.pointee.inFlightWrites = 0
        writesDrained()
    }

    /// `uv_try_write` of everything pending, in one writev. Returns the bytes the kernel
    /// took (0 when it would block), or -1 when the connection failed and was closed.
    private func tryWrite() -> Int {
        let scratch = loop.writeState
        scratch.pointee.scratch.removeAll(keepingCapacity: true)
        for buffer in out.pointee.pending.buffers {
            scratch.pointee.scratch.append(uv_buf_init(buffer.base.assumingMemoryBound(to: CChar.self), UInt32(buffer.count)))
        }
        let result = scratch.pointee.scratch.withUnsafeBufferPointer { bufs in
            uv_try_write(stream, bufs.baseAddress, UInt32(bufs.count))
        }
        if result >= 0 { return Int(result) }
        if result == UV_EAGAIN.rawValue || result == UV_ENOSYS.rawValue { return 0 }
        let peerGone = result == UV_EPIPE.rawValue || result == UV_ECONNRESET.rawValue
        close(flush: false, reason: peerGone ? .peerClosed : .error(IOError(uv: result, "write")))
        return -1
    }

    /// Everything queued has reached the kernel: a closing connection can finish, a drain
    /// waiter can run.
    private func writesDrained() {
        if state == .closingAfterFlush && out.pointee.inFlightWrites == 0 && out.pointee.pending.isEmpty {
            finishClose()
            return
        }
        if drainWaiter != nil { checkDrained() }
    }

    /// Runs `body` once (on this loop) when no more than `mark` bytes wait to be written:
    /// at the end of this loop turn when that is already so. A reader of a large backlog
    /// (a replay, a file) writes a chunk, then waits here before reading the next, so memory
    /// stays bounded whatever the peer's speed. One waiter at a time; a new one replaces it.
    public func whenDrained(below mark: Int, _ body: @escaping () -> Void) {
        guard state == .open else { return }
        drainWaiter = (mark, body)
        if queuedBytes <= mark {
            let (loop, id) = (self.loop, self.id)
            loop.execute { loop.connections[id]?.checkDrained() }
        }
    }

    private func checkDrained() {
        guard state == .open, let waiter = drainWaiter, queuedBytes <= waiter.mark else { return }
        drainWaiter = nil
        waiter.body()
    }

    private func writeCompleted(_ request: WriteRequest, status: Int32) {
        out.pointee.inFlightWrites -= 1
        if status < 0 && status != UV_ECANCELED.rawValue {
            // A reset or broken pipe is the peer going away; anything else keeps its errno.
            let peerGone = status == UV_EPIPE.rawValue || status == UV_ECONNRESET.rawValue
            close(flush: false, reason: peerGone ? .peerClosed : .error(IOError(uv: status, "write")))
            return
        }
        writesDrained()
    }

    // MARK: closing

    /// Closes the connection. With `flush`, queued bytes are written first (for at most a
    /// few seconds); without, they are dropped. Safe to call more than once.
    public func close(flush: Bool = true, reason: ConnectionCloseReason = .local) {
        switch state {
        case .closed:
            return
        case .closingAfterFlush:
            if flush { return }
        case .open:
            closeReason = reason
            if flush, let tls { enqueue(IOBuffer(tls.shutdown())) }
        }
        stopReading()
        if flush && (!out.pointee.pending.isEmpty || out.pointee.inFlightWrites > 0) {
            state = .closingAfterFlush
            if !out.pointee.isDirty && !out.pointee.pending.isEmpty {
                out.pointee.isDirty = true
                loop.markDirty(self)
            }
            // A peer that never reads must not keep a closing connection alive.
            let timer = LoopTimer(loop: loop)
            timer.start(after: 3000, keepAlive: true) { [weak self] in
                self?.close(flush: false, reason: .local)
            }
            return
        }
        finishClose()
    }

    private func finishClose() {
        guard state != .closed else { return }
        state = .closed
        out.pointee.pending.removeAll()
        out.pointee.pendingBytes = 0
        if let wire {
            // What a peer did not read is dropped, as a reset drops it (libuv wants an empty
            // write queue at close).
            wire.dropHeld()
            handle.pointee.write_queue_size = 0
        }
        let handlePointer = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)
        if uv_is_closing(handlePointer) != 0 {
            // The loop is stopping and has already closed the handle.
            didClose()
            return
        }
        uv_close(handlePointer) { handle in
            let connection = TCPConnection.from(handle!.pointee.data)
            connection.didClose()
            handle!.deallocate()
        }
    }

    private func didClose() {
        drainWaiter = nil
        loop.connections.removeValue(forKey: id)
        let handler = self.handler
        self.handler = nil
        wire?.connectionClosed(reason: closeReason)
        handler?.connectionDidClose(self, reason: closeReason)
    }

    // MARK: addresses

    static func peerName(_ handle: UnsafeMutablePointer<uv_tcp_t>) -> (String, Int) {
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getpeername(handle, $0, &length) }
        }
        guard status == 0 else { return ("?", 0) }
        return SocketAddress.describe(storage)
    }
}

/// A connection's queued writes (see `TCPConnection.out`).
@usableFromInline struct WriteState {
    var pending = BufferQueue()
    var pendingBytes = 0
    var isDirty = false
    var inFlightWrites = 0
    @usableFromInline var state = TCPConnection.State.open
    var isTLS = false
    var maxQueuedBytes = 4 << 20
}

/// One `uv_write` in flight: owns the request memory and keeps the buffers alive until the
/// kernel has them. Reused through the loop's pool (``EventLoop/takeWriteRequest()``).
final class WriteRequest {
    let request: UnsafeMutablePointer<uv_write_t>
    /// The buffers (kept alive until the write completes) and their `uv_buf_t`s, behind a
    /// pointer for the same reason as `TCPConnection.out`.
    let lists: UnsafeMutablePointer<(buffers: [IOBuffer], bufs: [uv_buf_t])>

    init() {
        request = .allocate(capacity: 1)
        lists = .allocate(capacity: 1)
        lists.initialize(to: ([], []))
    }

    deinit {
        lists.deinitialize(count: 1)
        lists.deallocate()
        request.deallocate()
    }
}

extension EventLoop {
    /// Most idle write requests a loop keeps for reuse.
    static let writeRequestPoolLimit = 4096

    /// A request with empty arrays, from the pool when it has one. Loop thread only.
    func takeWriteRequest() -> WriteRequest {
        writeState.pointee.spare.popLast() ?? WriteRequest()
    }

    /// Returns a finished request to the pool (dropping its buffers). Loop thread only.
    func recycle(_ request: WriteRequest) {
        let lists = request.lists
        lists.pointee.buffers.removeAll(keepingCapacity: lists.pointee.buffers.capacity <= 64)
        lists.pointee.bufs.removeAll(keepingCapacity: lists.pointee.bufs.capacity <= 64)
        if writeState.pointee.spare.count < Self.writeRequestPoolLimit { writeState.pointee.spare.append(request) }
    }
}

/// The buffers queued on one connection during a loop turn: a plain growable array of
/// references without `Array`'s uniqueness checks and copy-on-write paths, which cost about a
/// tenth of the fan-out's CPU when every delivery appended to an `Array`. Owned by exactly one
/// `WriteState` (never copied while it holds storage: `WriteState` lives behind the
/// connection's pointer), freed by the connection's `deinit`.
struct BufferQueue {
    private var base: UnsafeMutablePointer<IOBuffer>?
    private(set) var count = 0
    private var capacity = 0
    /// Storage kept across turns up to this many buffers; a burst beyond it is given back.
    private static let keptCapacity = 64

    var isEmpty: Bool { count == 0 }

    /// The queued buffers, in order (valid until the next mutation).
    var buffers: UnsafeBufferPointer<IOBuffer> { UnsafeBufferPointer(start: base, count: count) }

    mutating func append(_ buffer: IOBuffer) {
        if count == capacity { grow() }
        (base! + count).initialize(to: buffer)
        count += 1
    }

    private mutating func grow() {
        let newCapacity = max(8, capacity * 2)
        let fresh = UnsafeMutablePointer<IOBuffer>.allocate(capacity: newCapacity)
        if let base {
            fresh.moveInitialize(from: base, count: count)
            base.deallocate()
        }
        base = fresh
        capacity = newCapacity
    }

    /// Drops every buffer (keeping the storage unless a burst made it large).
    mutating func removeAll() {
        guard let base else { return }
        base.deinitialize(count: count)
        count = 0
        if capacity > Self.keptCapacity { free() }
    }

    /// Moves every buffer to the end of `array` (which keeps them alive), leaving this empty.
    mutating func moveAll(into array: inout [IOBuffer]) {
        guard let base, count > 0 else { return }
        array.append(contentsOf: UnsafeMutableBufferPointer(start: base, count: count))
        base.deinitialize(count: count)
        count = 0
        if capacity > Self.keptCapacity { free() }
    }

    /// Releases the storage (and any buffers still queued).
    mutating func free() {
        guard let base else { return }
        base.deinitialize(count: count)
        base.deallocate()
        self.base = nil
        count = 0
        capacity = 0
    }
}
