import CLibUV
import Glibc
import Synchronization

/// A listening TCP socket. One loop accepts; each new connection is handed to the next loop of
/// the group (round robin), where it lives for life.
public final class TCPListener: Sendable {
    /// The address it is bound to.
    public let host: String
    /// The bound port (the real one when 0 was asked for).
    public let port: Int
    private let acceptLoop: EventLoop
    private let acceptor: Acceptor.Reference

    /// Binds and starts accepting. `onAccept` runs on the connection's loop; it should set the
    /// connection's handler (a connection left without one is closed).
    public static func bind(host: String, port: Int, group: EventLoopGroup, backlog: Int32 = 1024,
                            onAccept: @escaping @Sendable (TCPConnection) -> Void) throws(IOError) -> TCPListener {
        var address = try SocketAddress.make(host: host, port: port)
        let fd = socket(Int32(address.ss_family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw IOError(code: parley_errno(), message: "socket(): errno \(parley_errno())") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let addressLength = SocketAddress.length(of: address)
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, addressLength) }
        }
        guard bound == 0 else {
            let err = parley_errno()
            Glibc.close(fd)
            throw IOError(code: err, message: "cannot bind \(host):\(port): \(String(cString: strerror(err)))")
        }
        guard listen(fd, backlog) == 0 else {
            let err = parley_errno()
            Glibc.close(fd)
            throw IOError(code: err, message: "cannot listen on \(host):\(port): \(String(cString: strerror(err)))")
        }
        var actual = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let (_, boundPort) = SocketAddress.describe(actual)
        let loop = group.loops[0]
        let reference = Acceptor.Reference()
        loop.execute {
            let acceptor = Acceptor(fd: fd, loop: loop, group: group, onAccept: onAccept)
            reference.set(acceptor)
        }
        return TCPListener(host: host, port: boundPort, acceptLoop: loop, acceptor: reference)
    }

    private init(host: String, port: Int, acceptLoop: EventLoop, acceptor: Acceptor.Reference) {
        self.host = host
        self.port = port
        self.acceptLoop = acceptLoop
        self.acceptor = acceptor
    }

    /// Stops accepting and closes the listening socket. Open connections stay open.
    public func close() {
        let reference = acceptor
        acceptLoop.execute { reference.take()?.stop() }
    }
}

/// Accept-side state, confined to the accepting loop.
final class Acceptor {
    /// Hands the loop-confined acceptor from the binding thread to its loop.
    final class Reference: @unchecked Sendable {
        // Safe: `acceptor` is set and taken only inside tasks run on the accept loop (via
        // `execute`), so it is only ever touched from that one thread.
        private var acceptor: Acceptor?
        func set(_ value: Acceptor) { acceptor = value }
        func take() -> Acceptor? { defer { acceptor = nil }; return acceptor }
    }

    let fd: Int32
    let loop: EventLoop
    let group: EventLoopGroup
    let onAccept: @Sendable (TCPConnection) -> Void
    private let poll: UnsafeMutablePointer<uv_poll_t>
    private var pausedTimer: LoopTimer?
    private var selfReference: Acceptor?

    init(fd: Int32, loop: EventLoop, group: EventLoopGroup,
         onAccept: @escaping @Sendable (TCPConnection) -> Void) {
        self.fd = fd
        self.loop = loop
        self.group = group
        self.onAccept = onAccept
        poll = .allocate(capacity: 1)
        uv_poll_init_socket(loop.uvLoop, poll, fd)
        poll.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        selfReference = self
        startPolling()
    }

    private func startPolling() {
        uv_poll_start(poll, Int32(UV_READABLE.rawValue)) { handle, status, _ in
            let acceptor = Unmanaged<Acceptor>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            if status >= 0 { acceptor.acceptAll() }
        }
    }

    private func acceptAll() {
        // Bounded per wake-up so one busy listener cannot starve the loop's own connections.
        for _ in 0..<256 {
            let client = parley_accept(fd)
            if client < 0 {
                let err = parley_errno()
                if err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM {
                    // Out of descriptors: stop polling for a moment instead of spinning.
                    pause(milliseconds: 100)
                }
                return
            }
            let target = group.next()
            let onAccept = self.onAccept
            if target === loop {
                Acceptor.adopt(fd: client, on: target, onAccept: onAccept)
            } else {
                target.execute { Acceptor.adopt(fd: client, on: target, onAccept: onAccept) }
            }
        }
    }

    private func pause(milliseconds: UInt64) {
        uv_poll_stop(poll)
        let timer = pausedTimer ?? LoopTimer(loop: loop)
        pausedTimer = timer
        timer.start(after: milliseconds) { [weak self] in self?.startPolling() }
    }

    static func adopt(fd: Int32, on loop: EventLoop, onAccept: @Sendable (TCPConnection) -> Void) {
        guard !loop.isStopping else { Glibc.close(fd); return }
        let handle = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(loop.uvLoop, handle)
        guard uv_tcp_open(handle, fd) == 0 else {
            Glibc.close(fd)
            uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { $0!.deallocate() }
            return
        }
        uv_tcp_nodelay(handle, 1)
        let connection = TCPConnection(loop: loop, handle: handle)
        onAccept(connection)
        if connection.handler == nil {
            connection.close(flush: false)
        } else {
            connection.startReading()
        }
    }

    func stop() {
        uv_poll_stop(poll)
        pausedTimer = nil
        uv_close(UnsafeMutableRawPointer(poll).assumingMemoryBound(to: uv_handle_t.self)) { handle in
            let acceptor = Unmanaged<Acceptor>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            Glibc.close(acceptor.fd)
            handle!.deallocate()
            acceptor.selfReference = nil
        }
    }
}
