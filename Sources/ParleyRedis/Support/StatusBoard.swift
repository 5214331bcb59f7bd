import Synchronization

/// The last known state of each of a client's connections, readable from any thread (for
/// `/metrics` and `/readyz`); connections report to it from their loops.
final class StatusBoard: Sendable {
    private struct Slot {
        var state: RedisStatus.State = .connecting
        var message: String?
        var reconnects = 0
    }
    private struct Board {
        var slots: [String: Slot] = [:]
        var closed = false
    }
    private let board = Mutex(Board())

    /// Starts tracking a connection as connecting.
    func add(_ key: String) {
        board.withLock { if $0.slots[key] == nil { $0.slots[key] = Slot() } }
    }

    /// Stops tracking a connection (closed on purpose).
    func remove(_ key: String) {
        _ = board.withLock { $0.slots.removeValue(forKey: key) }
    }

    func update(_ key: String, _ event: RedisConnectionEvent) {
        board.withLock { board in
            var slot = board.slots[key] ?? Slot()
            switch event {
            case .connecting:
                // A retry while down stays "down" (with its reason) until it succeeds.
                if slot.state != .down { slot.state = .connecting }
            case .ready(let reconnected):
                slot.state = .ready
                slot.message = nil
                if reconnected { slot.reconnects += 1 }
            case .down(let error):
                slot.state = .down
                slot.message = error.message
            }
            board.slots[key] = slot
        }
    }

    func markClosed() {
        board.withLock { $0.closed = true }
    }

    var status: RedisStatus {
        board.withLock { board in
            if board.closed {
                return RedisStatus(state: .closed, connections: 0, readyConnections: 0,
                                   reconnects: board.slots.values.reduce(0) { $0 + $1.reconnects })
            }
            return RedisStatus.combined(board.slots.keys.sorted().map { key in
                let slot = board.slots[key]!
                return RedisStatus(state: slot.state, message: slot.message, connections: 1,
                                   readyConnections: slot.state == .ready ? 1 : 0, reconnects: slot.reconnects)
            })
        }
    }
}
