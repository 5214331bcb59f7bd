/// Orders each room's events and carries them to every node that has subscribers in the
/// room: the seam between one node and a cluster (centrifuge's Broker). ``SingleNodeBroker`` is
/// the single-node default (offsets assigned in process, messages kept by a
/// ``MessageStore``); ParleyRedis has the cluster sibling. The same contract tests run
/// against both.
///
/// Contract:
/// - ``publish(_:clientMessageID:completion:)`` stores a message as the next of its room and
///   completes once it is durable, with the message carrying its offset (1, 2, 3, … per
///   room, no gap even after a failure). A retry with the same client message id within the
///   idempotency window is neither stored nor delivered again: it completes with the original.
/// - Every node subscribed to a room gets, through its ``BrokerDelivery``, the room's events
///   in one order that every node agrees on: stored messages in offset order with no gap and
///   no duplicate, and ``broadcast(_:in:)`` events (typing, joins, leaves) in the order they
///   were broadcast relative to the publishes around them. A message is delivered only once
///   it is stored.
/// - A node's ``subscribe(_:completion:)`` completes with the room's ``RoomPosition`` at the
///   point from which every later event reaches that node: every message stored after
///   `stored` is delivered to it.
public protocol Broker: AnyObject, Sendable {
    /// Where this node's events go. Set once, before the first subscribe.
    func setDelivery(_ delivery: any BrokerDelivery)

    /// Stores `message` (its offset is assigned here; any offset it carries is ignored) and
    /// delivers it to every subscribed node. Throws when the broker refuses at once (e.g. a
    /// bounded queue is full); otherwise `completion` runs exactly once, on any thread.
    func publish(_ message: Message, clientMessageID: String?,
                 completion: @escaping @Sendable (Result<Message, ParleyError>) -> Void) throws(ParleyError)

    /// Delivers an event that is never stored to every subscribed node, in order with the
    /// room's other events. Best effort: lost when the broker cannot reach the other nodes.
    func broadcast(_ event: RoomEvent, in room: RoomKey)

    /// Starts delivering `room`'s events to this node. Subscriptions are counted: each
    /// successful subscribe is balanced by one ``unsubscribe(_:)``.
    func subscribe(_ room: RoomKey, completion: @escaping @Sendable (Result<RoomPosition, ParleyError>) -> Void)

    /// Balances one ``subscribe(_:completion:)``; the last one stops the deliveries.
    func unsubscribe(_ room: RoomKey)

    /// Where the rooms' stored messages can be read (history, resume).
    var store: any MessageStore { get }

    /// Forgets per-room state of rooms unused for `idleMillis` (nothing in flight, no
    /// subscription); returns how many. The hub calls it every few seconds.
    @discardableResult
    func evictIdle(nowMillis: Int64, idleMillis: Int64) -> Int
}

/// Receives the events a ``Broker`` delivers to this node. Calls for one room never overlap
/// and come in the room's order.
public protocol BrokerDelivery: AnyObject, Sendable {
    /// One event of a room this node is subscribed to.
    func broker(deliver event: RoomEvent, in room: RoomKey)
    /// The broker may have lost events of `room` it cannot recover in order (e.g. presence
    /// changes while the connection to the other nodes was down): the node must rebuild its
    /// view of the room (members) from the ``PresenceStore``.
    func broker(resynchronize room: RoomKey)
}

/// Where a room stood when a node subscribed to it.
public struct RoomPosition: Sendable, Equatable {
    /// The newest stored offset: every later message is delivered to the node.
    public var stored: Int64
    /// The newest offset given out, counting publishes still on their way to the store
    /// (equal to `stored` where a publish is stored as it is ordered): a session that
    /// subscribed at this point starts after it.
    public var published: Int64
    public init(stored: Int64, published: Int64) {
        self.stored = stored
        self.published = published
    }
}
