/// Who is in which room, across every node: the authoritative member lists (centrifuge's
/// PresenceManager). ``MemoryPresenceStore`` is the single-node default; ParleyRedis has the
/// cluster sibling, with node leases so a dead node's members leave everywhere. Joins and
/// leaves reach the other nodes as events through the ``Broker``; this store answers "who is
/// here now". The same contract tests run against both.
///
/// Contract: a member is keyed by its id (unique across the cluster); adding a member that
/// is present replaces its data and keeps its place; lists are in join order.
public protocol PresenceStore: AnyObject, Sendable {
    /// Adds (or refreshes) `member` in `room`. `completion` says whether it is new.
    func add(_ member: Member, to room: RoomKey, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void)

    /// Removes `member` from `room`. `completion` says whether it was there.
    func remove(_ member: Member, from room: RoomKey, completion: @escaping @Sendable (Result<Bool, ParleyError>) -> Void)

    /// The members of `room` in join order (at most `limit`), and how many there are.
    func members(of room: RoomKey, limit: Int,
                 completion: @escaping @Sendable (Result<(members: [Member], total: Int), ParleyError>) -> Void)

    /// The rooms of `channel` that have members, sorted by name, from after `cursor` (nil:
    /// from the start), at most `limit`.
    func rooms(in channel: String, after cursor: String?, limit: Int,
               completion: @escaping @Sendable (Result<[String], ParleyError>) -> Void)
}
