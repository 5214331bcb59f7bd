import Synchronization

/// One room as this node serves it: its local sessions and their inboxes, and its view of
/// the room (members, typists, the recent messages, the newest offset delivered here), kept
/// current by the events the broker delivers, in the room's order.
final class NodeRoom: Sendable {
    /// Where a local session's subscribe stands.
    enum Stage: Equatable {
        /// The node is still subscribing to the room.
        case awaitingRoom
        /// Its join was announced; it completes when the join comes back through the
        /// broker, which puts it after everything published before the subscribe.
        case awaitingJoin
        /// Its history or replay is being read from the store.
        case reading
        /// Its long replay is being sent page by page; the last one sent ended at `after`,
        /// and `requested` says whether the session asked for the next.
        case replaying(after: Int64, requested: Bool)
        /// Subscribed: its inbox gets the room's events.
        case live
    }

    struct Session {
        let member: Member
        /// A listener (``Hub/listen(_:to:inbox:)``): it gets the room's events but is no
        /// member, so it is never announced, counted against the room's size, or left.
        var listensOnly = false
        let inbox: any Inbox
        var stage: Stage
        /// Identifies this subscribe among later ones of the same session.
        let token: UInt64
        let historyCount: Int
        /// Replay what is stored after this offset (the client's `since`).
        let since: Int64?
        /// Without `since`: where the session starts, when that is before its completion
        /// (it subscribed while the node was subscribing); nil starts at the completion.
        var start: Int64?
        /// Publishes the session made while its join was on its way, in order: they go out
        /// once the join is back (nil), or fail with the subscribe (the error).
        var held: [@Sendable (ParleyError?) -> Void] = []
    }

    enum Phase {
        /// Waiting for the broker subscription and the presence snapshot; events are buffered.
        case subscribing
        case live
    }

    struct State {
        var phase = Phase.subscribing
        /// Events that came while subscribing, applied once the snapshot is in.
        var buffered: [RoomEvent] = []
        /// Members and typists, by the rules every mirror of a room follows.
        var presence: RoomPresence
        var history: MessageHistory
        /// The newest offset delivered here; local subscribers have seen exactly up to it.
        var deliveredOffset: Int64 = 0
        var sessions: [SessionID: Session] = [:]
        /// Inbox → how many of the room's live sessions it serves.
        var inboxes: [ObjectIdentifier: (inbox: any Inbox, count: Int)] = [:]
        var lastActivityMillis: Int64

        mutating func addInbox(_ inbox: any Inbox) {
            inboxes[ObjectIdentifier(inbox), default: (inbox, 0)].count += 1
        }

        mutating func removeInbox(_ inbox: any Inbox) {
            let id = ObjectIdentifier(inbox)
            guard let entry = inboxes[id] else { return }
            if entry.count <= 1 { inboxes.removeValue(forKey: id) } else { inboxes[id]!.count -= 1 }
        }

        func post(_ delivery: Delivery) {
            for target in inboxes.values { target.inbox.post(delivery) }
        }

        /// Posts a room event to every inbox, counted in the room's backlog until handled.
        func post(_ delivery: Delivery, counting backlog: RoomBacklog) {
            backlog.add(inboxes.count)
            for target in inboxes.values { target.inbox.post(delivery, completing: backlog) }
        }

        /// Whether memory holds the `historyCount` messages up to `historyEnd` and every
        /// delivered message after `offset`.
        /// (Actions are log entries but not history messages: with some kept, the
        /// `historyCount` messages may span more offsets.)
        func covers(historyCount: Int, endingAt historyEnd: Int64, after offset: Int64) -> Bool {
            let first = history.first?.offset ?? (deliveredOffset + 1)
            let wanted = min(Int64(historyCount), historyEnd)
            return first <= offset + 1 && (wanted == 0 || history.holds(Int(wanted), messagesThrough: historyEnd))
        }

        func tail(after offset: Int64) -> [Message] { offset >= deliveredOffset ? [] : history.after(offset) }
    }

    let key: RoomKey
    let lock: Mutex<State>
    /// Deliveries and publishes of this room not finished yet, for publisher back-pressure.
    let backlog: RoomBacklog

    init(key: RoomKey, configuration: HubConfiguration, budget: HistoryBudget?, nowMillis: Int64) {
        self.key = key
        backlog = RoomBacklog(highMark: configuration.backlogHighMark, lowMark: configuration.backlogHighMark / 2)
        lock = Mutex(State(presence: RoomPresence(typingTimeoutMillis: configuration.typingTimeoutMillis),
                           history: MessageHistory(capacity: configuration.historyCapacity,
                                                   maxBytes: configuration.historyBytesPerRoom, budget: budget),
                           lastActivityMillis: nowMillis))
    }
}
