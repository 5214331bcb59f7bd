import ParleyCore
import Synchronization

/// Admission at accept time: the total and per-IP connection limits. Shared by all doors and
/// loops; touched once per admission and once per release.
final class ConnectionGate: Sendable {
    private let perIP = Mutex<[String: Int]>([:])
    /// Connections (and Socket.IO sessions) admitted and not yet released, across all doors.
    let open = Atomic<Int>(0)
    let maxConnections: Int
    let maxConnectionsPerIP: Int

    init(maxConnections: Int, maxConnectionsPerIP: Int) {
        self.maxConnections = maxConnections
        self.maxConnectionsPerIP = maxConnectionsPerIP
    }

    /// Why a connection was refused, as a sentence for the peer.
    enum Refusal: Error, Sendable, Equatable {
        case full(Int)
        case tooManyFromIP(Int)

        var message: String {
            switch self {
            case .full(let limit): "server is full (limit \(limit) connections); try again later"
            case .tooManyFromIP(let limit): "too many connections from your address (limit \(limit))"
            }
        }

        var limit: Limit {
            switch self {
            case .full: .maxConnections
            case .tooManyFromIP: .maxConnectionsPerIP
            }
        }
    }

    /// Counts one connection from `ip` in and returns its ticket, or says why not (then
    /// nothing is counted). Per IP, addresses count under their ``IPAddress/limitKey`` (an
    /// IPv6 client's /64). A nil `ip` (a trusted proxy's connection, whose client is not
    /// known yet) counts only in the total; ``AdmissionTicket/claim(ip:)`` counts its client
    /// once known.
    func admit(ip: String?) -> Result<AdmissionTicket, Refusal> {
        let total = open.add(1, ordering: .relaxed).newValue
        if total > maxConnections {
            open.subtract(1, ordering: .relaxed)
            return .failure(.full(maxConnections))
        }
        guard let ip else { return .success(AdmissionTicket(gate: self, key: nil)) }
        let key = IPAddress.limitKey(ip)
        guard countIn(key) else {
            open.subtract(1, ordering: .relaxed)
            return .failure(.tooManyFromIP(maxConnectionsPerIP))
        }
        return .success(AdmissionTicket(gate: self, key: key))
    }

    fileprivate func countIn(_ key: String) -> Bool {
        perIP.withLock { counts -> Bool in
            let current = counts[key, default: 0]
            guard current < maxConnectionsPerIP else { return false }
            counts[key] = current + 1
            return true
        }
    }

    /// Gives back the place of one connection admitted under `key` (called by its ticket).
    fileprivate func release(key: String?) {
        if let key {
            perIP.withLock { counts in
                let current = counts[key, default: 0]
                if current <= 1 { counts.removeValue(forKey: key) } else { counts[key] = current - 1 }
            }
        }
        if open.subtract(1, ordering: .relaxed).newValue == 0 { notifyEmpty() }
    }

    /// Who waits for the last connection to go (a shutdown).
    private let emptyWaiter = Mutex<(@Sendable () -> Void)?>(nil)

    /// Calls `body` once, from any thread, when no connection is open: at once when that is
    /// already so, else when the last one is released.
    func whenEmpty(_ body: @escaping @Sendable () -> Void) {
        emptyWaiter.withLock { $0 = body }
        if open.load(ordering: .relaxed) <= 0 { notifyEmpty() }
    }

    private func notifyEmpty() {
        let waiter = emptyWaiter.withLock { waiter -> (@Sendable () -> Void)? in
            defer { waiter = nil }
            return waiter
        }
        waiter?()
    }
}

/// One admitted connection's place at the gate. It is released exactly once: explicitly when
/// the connection ends, or at the latest when the ticket is dropped, so no door can leak a
/// place (an upgraded connection hands its ticket on to the session that takes it over).
final class AdmissionTicket: Sendable {
    private let gate: ConnectionGate
    /// The per-IP key this place counts under; nil while it counts only in the total.
    private let key: Mutex<String?>
    private let released = Atomic<Bool>(false)

    fileprivate init(gate: ConnectionGate, key: String?) {
        self.gate = gate
        self.key = Mutex(key)
    }

    /// The per-IP key this place counts under (nil: a proxy's connection, client unknown).
    var ip: String? { key.withLock { $0 } }

    /// A trusted proxy's connection now knows its client: count it under the client's key,
    /// or say why not (the caller refuses the connection). A ticket already counted under a
    /// key keeps it.
    func claim(ip: String) -> ConnectionGate.Refusal? {
        let newKey = IPAddress.limitKey(ip)
        return key.withLock { key -> ConnectionGate.Refusal? in
            guard key == nil, !released.load(ordering: .relaxed) else { return nil }
            guard gate.countIn(newKey) else { return .tooManyFromIP(gate.maxConnectionsPerIP) }
            key = newKey
            return nil
        }
    }

    /// Gives the place back. Idempotent.
    func release() {
        guard !released.exchange(true, ordering: .relaxed) else { return }
        gate.release(key: key.withLock { $0 })
    }

    deinit { release() }
}
