import Testing
import ParleyCore
import ParleyRedis

/// Every connection roster, run through one contract (``ConnectionRoster``).
enum ConnectionRosterKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case memory, redis, redisCluster
    var description: String { rawValue }

    func make() throws -> any ConnectionRoster {
        switch self {
        case .memory:
            return InMemoryConnectionRoster()
        case .redis, .redisCluster:
            let deployment = try RedisDeployment.shared(self == .redis ? .single : .cluster)
            return RedisConnectionRoster(redis: deployment.client, keyspace: RedisDeployment.freshKeyspace())
        }
    }
}

private func client(_ id: String, name: String? = nil, at: Int64 = 1) -> ConnectionSummary {
    ConnectionSummary(id: id, door: "line", channel: "demo", name: name, ip: "203.0.113.\(at)", connectedAtMillis: at)
}

@Suite struct ConnectionRosterContractTests {
    @Test(arguments: ConnectionRosterKind.allCases)
    func eachNodesEntryIsReplacedByItsNextAndExpires(kind: ConnectionRosterKind) async throws {
        let roster = try kind.make()
        try await roster.publish(node: "a", count: 3, clients: [client("a1", name: "ann"), client("a2")], nowMillis: 100, expiresMillis: 1_100)
        try await roster.publish(node: "b", count: 1, clients: [client("b1", name: "bob ✓", at: 7)], nowMillis: 200, expiresMillis: 5_000)
        var nodes = try await roster.nodes(nowMillis: 300)
        #expect(nodes.map(\.node) == ["a", "b"])
        #expect(nodes[0].count == 3 && nodes[0].clients == [client("a1", name: "ann"), client("a2")] && nodes[0].publishedMillis == 100)
        #expect(nodes[1].clients == [client("b1", name: "bob ✓", at: 7)])
        try await roster.publish(node: "a", count: 0, clients: [], nowMillis: 400, expiresMillis: 1_400)
        nodes = try await roster.nodes(nowMillis: 500)
        #expect(nodes.first { $0.node == "a" }?.clients == [] && nodes.first { $0.node == "a" }?.count == 0)
        // a was not refreshed: past its expiry it is gone; b stays until it is withdrawn.
        #expect(try await roster.nodes(nowMillis: 1_400).map(\.node) == ["b"])
        try await roster.withdraw(node: "b")
        #expect(try await roster.nodes(nowMillis: 1_500).isEmpty)
    }

    @Test(arguments: ConnectionRosterKind.allCases)
    func requestsWaitForTheirNodeInOrderOnceAndBounded(kind: ConnectionRosterKind) async throws {
        let roster = try kind.make()
        #expect(try await roster.takeRequests(node: "a").isEmpty)
        try await roster.requestDisconnect(DisconnectRequest(id: "a1", reason: "spam \"quoted\""), node: "a")
        try await roster.requestDisconnect(DisconnectRequest(id: "b1", reason: "x"), node: "b")
        try await roster.requestDisconnect(DisconnectRequest(id: "a2", reason: ""), node: "a")
        #expect(try await roster.takeRequests(node: "a") == [DisconnectRequest(id: "a1", reason: "spam \"quoted\""),
                                                          DisconnectRequest(id: "a2", reason: "")])
        #expect(try await roster.takeRequests(node: "a").isEmpty, "taken once")
        #expect(try await roster.takeRequests(node: "b").map(\.id) == ["b1"])
        for n in 0..<(ConnectionRosterLimits.maxPendingRequests + 5) {
            try await roster.requestDisconnect(DisconnectRequest(id: "c\(n)", reason: ""), node: "c")
        }
        let waiting = try await roster.takeRequests(node: "c")
        #expect(waiting.count == ConnectionRosterLimits.maxPendingRequests && waiting.first?.id == "c5", "the oldest went")
    }
}
