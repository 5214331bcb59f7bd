import CLibUV

/// A timer on one event loop. Use it only on that loop's thread.
///
/// A timer stops when it is deallocated, unless it was started with `keepAlive`, in which
/// case it keeps itself alive until it has fired (one-shot) or is stopped.
public final class LoopTimer {
    public let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_timer_t>
    private var callback: (() -> Void)?
    private var selfReference: LoopTimer?
    private var repeats = false

    /// Creates a stopped timer on `loop`. Loop thread only.
    public init(loop: EventLoop) {
        loop.assertInEventLoop()
        self.loop = loop
        handle = .allocate(capacity: 1)
        uv_timer_init(loop.uvLoop, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    /// Starts (or restarts) the timer: `body` runs after `milliseconds`, then every
    /// `repeatMilliseconds` when that is non-zero.
    public func start(after milliseconds: UInt64, repeating repeatMilliseconds: UInt64 = 0,
                      keepAlive: Bool = false, _ body: @escaping () -> Void) {
        guard !loop.isStopping else { return }
        callback = body
        repeats = repeatMilliseconds > 0
        selfReference = keepAlive ? self : nil
        uv_timer_start(handle, { handle in
            let timer = Unmanaged<LoopTimer>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            timer.fire()
        }, milliseconds, repeatMilliseconds)
    }

    /// Restarts the timer with its current callback and timeout.
    public func restart(after milliseconds: UInt64) {
        guard !loop.isStopping, callback != nil else { return }
        uv_timer_start(handle, { handle in
            let timer = Unmanaged<LoopTimer>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            timer.fire()
        }, milliseconds, 0)
    }

    private func fire() {
        let body = callback
        if !repeats {
            // Release the keep-alive after running, so `self` survives the call.
            defer { selfReference = nil }
            body?()
        } else {
            body?()
        }
    }

    /// Stops the timer.
    public func stop() {
        selfReference = nil
        guard !loop.isStopping else { return }
        uv_timer_stop(handle)
    }

    deinit {
        guard !loop.isStopping else { return }
        let raw = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)
        uv_timer_stop(handle)
        uv_close(raw) { $0!.deallocate() }
    }
}

extension EventLoop {
    /// Runs `body` once after `milliseconds`. Loop thread only.
    public func schedule(after milliseconds: UInt64, _ body: @escaping () -> Void) {
        LoopTimer(loop: self).start(after: milliseconds, keepAlive: true, body)
    }
}
