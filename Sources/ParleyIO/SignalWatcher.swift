import CLibUV

/// Watches a POSIX signal on a loop. Use it only on that loop's thread.
public final class SignalWatcher {
    private let handle: UnsafeMutablePointer<uv_signal_t>
    private let loop: EventLoop
    private let body: (Int32) -> Void

    /// Starts watching `signal` (e.g. `SIGINT`); `body` runs on the loop.
    public init(loop: EventLoop, signal: Int32, _ body: @escaping (Int32) -> Void) {
        loop.assertInEventLoop()
        self.loop = loop
        self.body = body
        // A parent may have started us with the signal blocked (some process spawners do);
        // this thread, at least, must be able to take it.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        handle = .allocate(capacity: 1)
        uv_signal_init(loop.uvLoop, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_signal_start(handle, { handle, signum in
            Unmanaged<SignalWatcher>.fromOpaque(handle!.pointee.data).takeUnretainedValue().body(signum)
        }, signal)
    }

    deinit {
        guard !loop.isStopping else { return }
        uv_signal_stop(handle)
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { $0!.deallocate() }
    }
}
