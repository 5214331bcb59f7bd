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
    /// nothing is counted).
    func admit(ip: String) -> Result<AdmissionTicket, Refusal> {
        let total = open.add(1, ordering: .relaxed).newValue
        if total > maxConnections {
            open.subtract(1, ordering: .relaxed)
            return .failure(.full(maxConnections))
        }
        let admitted = perIP.withLock { counts -> Bool in
            let current = counts[ip, default: 0]
            guard current < maxConnectionsPerIP else { return false }
            counts[ip] = current + 1
            return true
        }
        guard admitted else {
            open.subtract(1, ordering: .relaxed)
            return .failure(.tooManyFromIP(maxConnectionsPerIP))
        }
        return .success(AdmissionTicket(gate: self, ip: ip))
    }

    /// Gives back the place of one connection admitted for `ip` (called by its ticket).
    fileprivate func release(ip: String) {
        perIP.withLock { counts in
            let current = counts[ip, default: 0]
            if current <= 1 { counts.removeValue(forKey: ip) } else { counts[ip] = current - 1 }
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
    let ip: String
    private let released = Atomic<Bool>(false)

    fileprivate init(gate: ConnectionGate, ip: String) {
        self.gate = gate
        self.ip = ip
    }

    /// Gives the place back. Idempotent.
    func release() {
        guard !released.exchange(true, ordering: .relaxed) else { return }
        gate.release(ip: ip)
    }

    deinit { release() }
}
