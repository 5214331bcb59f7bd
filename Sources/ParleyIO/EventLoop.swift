import CLibUV
import Foundation
import Synchronization

/// One libuv loop running on its own thread.
///
/// Everything that touches a loop's handles (connections, timers, listeners) runs on that
/// loop's thread. Other threads talk to a loop only through ``execute(_:)``.
public final class EventLoop: @unchecked Sendable {
    // Why `@unchecked Sendable` is safe here: the state below that is not itself Sendable
    // (`uvLoop`, the handle pointers, `connections`, `writeState`, `readBuffer`,
    // `nextID`) is only read or written on the loop's own thread — every method that touches
    // it is documented "loop thread only" and checks `assertInEventLoop()` in debug builds. The only members
    // used from other threads are `execute` (its queue is a `Mutex`, and `uv_async_send` is
    // documented thread-safe by libuv), `inEventLoop` (an `Atomic`) and `index` (a `let`).

    /// Position of this loop in its group.
    public let index: Int
    let uvLoop: UnsafeMutablePointer<uv_loop_t>
    private let wakeup: UnsafeMutablePointer<uv_async_t>
    private let prepareHandle: UnsafeMutablePointer<uv_prepare_t>
    private let checkHandle: UnsafeMutablePointer<uv_check_t>
    private let threadID = Atomic<UInt>(0)

    private struct Inbox {
        var tasks: [@Sendable () -> Void] = []
        var closed = false
    }
    private let inbox = Mutex(Inbox())

    /// Size of the per-loop read buffer; a read callback sees at most this many bytes.
    static let readBufferSize = 64 * 1024
    let readBuffer: UnsafeMutableRawPointer

    /// Bytes this loop's sockets have read and written (on the wire: TLS records included).
    public let statistics = LoopIOStatistics()

    // Loop-thread state.
    var connections: [UInt64: TCPConnection] = [:]
    /// Connections with queued writes, and finished write requests kept for reuse, behind a
    /// pointer so the per-delivery path pays no dynamic exclusivity checks.
    struct LoopWriteState {
        var dirty: [TCPConnection] = []
        var flushing: [TCPConnection] = []
        var spare: [WriteRequest] = []
        /// The iovecs of one `uv_try_write`, reused.
        var scratch: [uv_buf_t] = []
        /// The task buffer ``drainInbox()`` swaps with the queue's (emptied, keeping capacity).
        var spareTasks: [@Sendable () -> Void] = []
    }
    let writeState: UnsafeMutablePointer<LoopWriteState>
    private var nextID: UInt64 = 0
    private(set) var isStopping = false
    var loopLocals: [ObjectIdentifier: AnyObject] = [:]

    init(index: Int) {
        self.index = index
        uvLoop = .allocate(capacity: 1)
        precondition(uv_loop_init(uvLoop) == 0, "uv_loop_init failed")
        wakeup = .allocate(capacity: 1)
        prepareHandle = .allocate(capacity: 1)
        checkHandle = .allocate(capacity: 1)
        readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
        writeState = .allocate(capacity: 1)
        writeState.initialize(to: LoopWriteState())

        uv_async_init(uvLoop, wakeup) { handle in
            EventLoop.from(handle!.pointee.loop).drainInbox()
        }
        uv_prepare_init(uvLoop, prepareHandle)
        uv_check_init(uvLoop, checkHandle)
        // Writes queued during this turn go out in one writev per connection, right after the
        // I/O callbacks (check) and before the loop sleeps again (prepare, after timers).
        uv_prepare_start(prepareHandle) { handle in EventLoop.from(handle!.pointee.loop).flushDirty() }
        uv_check_start(checkHandle) { handle in EventLoop.from(handle!.pointee.loop).flushDirty() }
        uv_unref(UnsafeMutableRawPointer(prepareHandle).assumingMemoryBound(to: uv_handle_t.self))
        uv_unref(UnsafeMutableRawPointer(checkHandle).assumingMemoryBound(to: uv_handle_t.self))
        uvLoop.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    static func from(_ loop: UnsafeMutablePointer<uv_loop_t>!) -> EventLoop {
        Unmanaged<EventLoop>.fromOpaque(loop.pointee.data).takeUnretainedValue()
    }

    /// True when called on this loop's thread.
    public var inEventLoop: Bool {
        threadID.load(ordering: .relaxed) == UInt(bitPattern: Int(bitPattern: UInt(pthread_self())))
    }

    /// Traps in debug builds when not on the loop's thread.
    @inline(__always) public func assertInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inEventLoop, "must run on event loop \(index)", file: file, line: line)
    }

    /// Runs `task` on this loop's thread, in submission order. Callable from any thread.
    /// Tasks submitted after the loop has stopped are dropped.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        let shouldWake = inbox.withLock { inbox -> Bool in
            if inbox.closed { return false }
            inbox.tasks.append(task)
            return inbox.tasks.count == 1
        }
        if shouldWake { uv_async_send(wakeup) }
    }

    /// Like ``execute(_:)``, but says whether the task was taken: false once the loop has
    /// stopped taking tasks (a task taken is run, if only while the loop stops).
    public func tryExecute(_ task: @escaping @Sendable () -> Void) -> Bool {
        let (taken, shouldWake) = inbox.withLock { inbox -> (Bool, Bool) in
            if inbox.closed { return (false, false) }
            inbox.tasks.append(task)
            return (true, inbox.tasks.count == 1)
        }
        if shouldWake { uv_async_send(wakeup) }
        return taken
    }

    /// Tasks waiting for this loop now (a gauge for `/metrics`). The queue itself takes what
    /// it is given: what feeds it is bounded at the source (room deliveries by publisher
    /// back-pressure, store answers by the store's queues, requests by connection limits).
    public var queuedTasks: Int { inbox.withLock { $0.tasks.count } }

    /// Runs `task` now when already on this loop, otherwise like ``execute(_:)``.
    public func executeNowOrSoon(_ task: @escaping @Sendable () -> Void) {
        if inEventLoop { task() } else { execute(task) }
    }

    private func drainInbox() {
        // Two buffers, swapped under the lock: the queue takes the emptied one, so a drain
        // allocates nothing. (Copying the queue out and emptying it "keeping capacity" made a
        // new buffer of the old one's size on every wake-up: after a burst, hundreds of KiB
        // mapped, zeroed and freed per turn, 5-6 % of a loop in the chat-like bench.)
        var tasks = writeState.pointee.spareTasks
        writeState.pointee.spareTasks = []
        inbox.withLock { inbox in swap(&tasks, &inbox.tasks) }
        for task in tasks { task() }
        tasks.removeAll(keepingCapacity: tasks.capacity <= Self.spareTasksCapacity)
        writeState.pointee.spareTasks = tasks
    }

    /// Most tasks a drained buffer keeps room for (a bigger one, after a burst, is freed).
    static let spareTasksCapacity = 16_384

    func makeConnectionID() -> UInt64 {
        nextID += 1
        return (UInt64(index) << 48) | nextID
    }

    func markDirty(_ connection: TCPConnection) {
        writeState.pointee.dirty.append(connection)
    }

    private func flushDirty() {
        guard !writeState.pointee.dirty.isEmpty else { return }
        // Swap the lists instead of copying: both keep their capacity, so a turn allocates nothing.
        swap(&writeState.pointee.dirty, &writeState.pointee.flushing)
        var index = 0
        while index < writeState.pointee.flushing.count {
            let connection = writeState.pointee.flushing[index]
            connection.flush()
            index += 1
        }
        writeState.pointee.flushing.removeAll(keepingCapacity: true)
    }

    /// Loop-local storage keyed by type: one instance of `T` per loop, created on first use.
    /// Loop thread only. For tools that own their loops (the bench client); the server keeps
    /// its per-loop state in ``LoopLocal``s owned by the node and the doors, so that two
    /// servers in one process never share it.
    public func local<T: AnyObject>(_ type: T.Type, make: () -> T) -> T {
        assertInEventLoop()
        let key = ObjectIdentifier(type)
        if let existing = loopLocals[key] { return unsafeDowncast(existing, to: T.self) }
        let value = make()
        loopLocals[key] = value
        return value
    }

    /// Number of open connections on this loop. Loop thread only.
    public var connectionCount: Int { connections.count }

    /// Calls `body` for every open connection on this loop. Loop thread only.
    public func forEachConnection(_ body: (TCPConnection) -> Void) {
        for connection in Array(connections.values) { body(connection) }
    }

    // MARK: running

    func run() {
        threadID.store(UInt(bitPattern: Int(bitPattern: UInt(pthread_self()))), ordering: .relaxed)
        uv_run(uvLoop, UV_RUN_DEFAULT)
        drainInbox()
        uv_loop_close(uvLoop)
    }

    /// Closes every handle so `uv_run` returns. Loop thread only.
    func beginStop() {
        assertInEventLoop()
        guard !isStopping else { return }
        isStopping = true
        for connection in Array(connections.values) { connection.close(flush: false, reason: .shutdown) }
        inbox.withLock { $0.closed = true }
        drainInbox()
        uv_walk(uvLoop, { handle, _ in
            if uv_is_closing(handle) == 0 { uv_close(handle, nil) }
        }, nil)
    }
}

/// Byte counts of one loop: written by the loop alone (a plain load and store, no
/// read-modify-write), read from any thread (`/metrics`).
public final class LoopIOStatistics: Sendable {
    private let read = Atomic<Int>(0)
    private let written = Atomic<Int>(0)

    @inline(__always) func didRead(_ count: Int) { read.store(read.load(ordering: .relaxed) &+ count, ordering: .relaxed) }
    @inline(__always) func didWrite(_ count: Int) { written.store(written.load(ordering: .relaxed) &+ count, ordering: .relaxed) }

    public var bytesRead: Int { read.load(ordering: .relaxed) }
    public var bytesWritten: Int { written.load(ordering: .relaxed) }
}

extension EventLoopGroup {
    /// The libuv library's version (`uv_version_string`).
    public static var libuvVersion: String { String(cString: uv_version_string()) }
}
