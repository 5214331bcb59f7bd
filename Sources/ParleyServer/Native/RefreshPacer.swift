import ParleyIO

/// Reads from the stores that one session makes again on events it does not control: its
/// unread count after each of its user's own receipts, its live inbox's conversation after
/// each action on the newest message. Each key (a room) has at most one such read out and
/// starts at most one every ``intervalMillis``; asks that come meanwhile are merged into one
/// read after it. So a flood of receipts or reactions costs the store a bounded number of
/// reads per session and room, whatever the events' rate, and the last read still follows
/// the last ask. Loop-confined, like the session that owns it.
struct RefreshPacer<Key: Hashable> {
    let intervalMillis: Int64
    /// Keys with a read out.
    private var out: Set<Key> = []
    /// Keys asked for again while a read was out or too soon after the last: one more read.
    private var again: Set<Key> = []
    /// When each key's last read started.
    private var started: [Key: Int64] = [:]

    init(intervalMillis: Int64) { self.intervalMillis = intervalMillis }

    enum Decision: Equatable {
        /// Read now (and call ``ended(_:now:)`` when the read is done).
        case start
        /// Merged into a read that is out or already waiting: nothing to do.
        case merged
        /// Too soon: ask ``due(_:now:)`` after this long.
        case wait(millis: Int64)
    }

    /// An ask for `key` at `now`.
    mutating func ask(_ key: Key, now: Int64) -> Decision {
        if out.contains(key) {
            again.insert(key)
            return .merged
        }
        if let last = started[key], now - last < intervalMillis {
            guard again.insert(key).inserted else { return .merged }
            return .wait(millis: intervalMillis - (now - last))
        }
        out.insert(key)
        started[key] = now
        return .start
    }

    /// `key`'s read is done: `.wait` when it was asked for again meanwhile (one more read,
    /// when the interval allows), else `.merged` (nothing to do).
    mutating func ended(_ key: Key, now: Int64) -> Decision {
        out.remove(key)
        guard again.contains(key) else { return .merged }
        return .wait(millis: max(0, intervalMillis - (now - (started[key] ?? now))))
    }

    /// The wait of ``ask(_:now:)`` or ``ended(_:now:)`` is over: `.start` the merged read
    /// (`.merged` when it was dropped meanwhile, or a read is already out).
    mutating func due(_ key: Key, now: Int64) -> Decision {
        guard !out.contains(key), again.remove(key) != nil else { return .merged }
        out.insert(key)
        started[key] = now
        return .start
    }

    /// The key is no longer followed: whatever was asked for it is dropped.
    mutating func forget(_ key: Key) {
        out.remove(key)
        again.remove(key)
        started[key] = nil
    }
}

extension RefreshPacer.Decision {
    /// Carries the decision out on `loop`: `.start` runs `start` now, `.wait` runs `due` on
    /// the loop once the wait is over (it asks the pacer's ``RefreshPacer/due(_:now:)`` and
    /// carries that out), `.merged` does nothing.
    func carryOut(on loop: EventLoop, start: () -> Void, due: @escaping () -> Void) {
        switch self {
        case .start: start()
        case .merged: break
        case .wait(let millis): loop.schedule(after: UInt64(millis), due)
        }
    }
}
