import Testing
import ParleyCore
import ParleyRedis

/// Every presence store implementation, run through one contract.
enum PresenceKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case memory, redis, redisCluster
    var description: String { rawValue }

    func make() throws -> any PresenceStore {
        switch self {
        case .memory:
            return MemoryPresenceStore()
        case .redis, .redisCluster:
            let deployment = try RedisDeployment.shared(self == .redis ? .single : .cluster)
            return RedisPresenceStore(redis: deployment.client, keyspace: RedisDeployment.freshKeyspace())
        }
    }
}

private let alice = Member(id: "a1", clientData: ["name": "alice"])
private let bob = Member(id: "b2", clientData: ["name": "bob"])
private let carol = Member(id: "c3")

@Suite struct PresenceContractTests {
    @Test(arguments: PresenceKind.allCases)
    func membersAreListedInJoinOrderAndAddIsIdempotent(kind: PresenceKind) async throws {
        let presence = try kind.make()
        let room = RoomKey(channel: "demo", room: "p1")
        #expect(try await presence.add(alice, to: room))
        #expect(try await presence.add(bob, to: room))
        #expect(try await presence.add(carol, to: room))
        let renamed = Member(id: "a1", clientData: ["name": "alice2"])
        #expect(try await !presence.add(renamed, to: room))
        let listed = try await presence.members(of: room)
        #expect(listed.members == [renamed, bob, carol])
        #expect(listed.total == 3)
        #expect(try await presence.members(of: room, limit: 2).members == [renamed, bob])
        #expect(try await presence.members(of: room, limit: 2).total == 3)
        #expect(try await presence.remove(bob, from: room))
        #expect(try await !presence.remove(bob, from: room))
        #expect(try await presence.members(of: room).members == [renamed, carol])
    }

    @Test(arguments: PresenceKind.allCases)
    func occupiedRoomsAreSortedPagedAndForgetEmptyOnes(kind: PresenceKind) async throws {
        let presence = try kind.make()
        for name in ["c", "a", "b", "d"] { _ = try await presence.add(alice, to: RoomKey(channel: "ch", room: name)) }
        _ = try await presence.add(bob, to: RoomKey(channel: "other", room: "z"))
        #expect(try await presence.rooms(in: "ch") == ["a", "b", "c", "d"])
        #expect(try await presence.rooms(in: "ch", limit: 2) == ["a", "b"])
        #expect(try await presence.rooms(in: "ch", after: "b", limit: 2) == ["c", "d"])
        _ = try await presence.remove(alice, from: RoomKey(channel: "ch", room: "b"))
        #expect(try await presence.rooms(in: "ch") == ["a", "c", "d"])
        #expect(try await presence.rooms(in: "none").isEmpty)
        #expect(try await presence.members(of: RoomKey(channel: "ch", room: "b")).total == 0)
    }
}
