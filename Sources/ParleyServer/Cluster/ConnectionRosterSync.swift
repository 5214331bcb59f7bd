import ParleyCore
import Synchronization

/// This node's part of the cluster's connection roster (cluster mode): every second it
/// publishes its connections (the first ``ConnectionRosterLimits/maxListed`` by age, all
/// counted) when they changed, or at least every ``refreshMillis``, and carries out the
/// disconnect requests other nodes' admin APIs left for it. The admin API of any node lists
/// every node's connections from the roster and asks the owner to disconnect one.
final class ConnectionRosterSync: Sendable {
    static let pollMillis = 1_000
    /// An entry is refreshed at least this often even when nothing changed...
    static let refreshMillis: Int64 = 2_000
    /// ...and forgotten this long after its last refresh (a node that died).
    static let lifetimeMillis: Int64 = 6_000

    let roster: any ConnectionRoster
    let node: String
    private let clock: any WallClock
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(roster: any ConnectionRoster, node: String, clock: any WallClock) {
        self.roster = roster
        self.node = node
        self.clock = clock
    }

    /// This node's connections as the roster lists them: oldest first, bounded.
    static func listed(_ directory: SessionDirectory) -> [ConnectionSummary] {
        directory.all.sorted { ($0.connectedAtMillis, $0.id) < ($1.connectedAtMillis, $1.id) }
            .prefix(ConnectionRosterLimits.maxListed).map(\.summary)
    }

    /// Publishes this node's entry if it changed or is due, then takes its requests. One round.
    func tick(directory: SessionDirectory, last: inout (clients: [ConnectionSummary], count: Int, millis: Int64)?) async throws(ParleyError) {
        let now = clock.nowMillis()
        let clients = Self.listed(directory), count = directory.count
        if last == nil || last!.clients != clients || last!.count != count || now - last!.millis >= Self.refreshMillis {
            try await roster.publish(node: node, count: count, clients: clients, nowMillis: now,
                                     expiresMillis: now + Self.lifetimeMillis)
            last = (clients, count, now)
        }
        for request in try await roster.takeRequests(node: node) {
            directory.client(request.id)?.control.run { $0.disconnect(byAdministrator: request.reason) }
        }
    }

    func start(directory: SessionDirectory, onError: @escaping @Sendable (ParleyError) -> Void) {
        let started = Task.detached { [self] in
            var last: (clients: [ConnectionSummary], count: Int, millis: Int64)?
            while !Task.isCancelled {
                do throws(ParleyError) {
                    try await tick(directory: directory, last: &last)
                } catch {
                    last = nil
                    onError(error)
                }
                try? await Task.sleep(for: .milliseconds(Self.pollMillis))
            }
        }
        task.withLock { $0 = started }
    }

    /// Stops publishing. The entry then expires within ``lifetimeMillis`` (a node that is
    /// killed cannot withdraw it either, so the others never depend on a goodbye).
    func stop() {
        task.withLock { $0?.cancel(); $0 = nil }
    }
}
