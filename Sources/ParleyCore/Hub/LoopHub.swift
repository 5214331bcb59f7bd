/// Identifies how a door encodes room events, so a room event is encoded once per format and
/// the same bytes go to every subscriber using that format.
public struct WireFormat: Hashable, Sendable {
    public let rawValue: Int
    public init(_ rawValue: Int) { self.rawValue = rawValue }
}

/// A session as the loop hub sees it: one connection on this loop.
public protocol RoomSubscriber<Frame>: AnyObject {
    associatedtype Frame
    var sessionID: SessionID { get }
    var wireFormat: WireFormat { get }
    /// A room event; `frame` is the event encoded for this subscriber's format (nil when the
    /// format does not show this event).
    func receive(_ event: RoomEvent, in room: RoomKey, frame: Frame?)
    /// The subscription is in place.
    func didSubscribe(_ snapshot: SubscribeSnapshot)
    /// The session left the room.
    func didUnsubscribe(from room: RoomKey)
    /// The next page of a long replay (see ``SubscribeSnapshot/replayComplete``).
    func didReplay(_ messages: [Message], in room: RoomKey, complete: Bool)
    /// Whether this session takes runs now (``receive(run:in:frames:)``); false when each
    /// message needs a look of its own.
    var takesRuns: Bool { get }
    /// Several message events of one room in a row (`events`, each `.message`), `frames` the
    /// subscriber's format's frames of all of them back to back: one write instead of one
    /// per message. Called only while ``takesRuns``.
    func receive(run events: ArraySlice<RoomEvent>, in room: RoomKey, frames: Frame)
}

extension RoomSubscriber {
    /// Sessions that never ask for `since` get no replay pages.
    public func didReplay(_ messages: [Message], in room: RoomKey, complete: Bool) {}
    /// By default every message is handed over on its own.
    public var takesRuns: Bool { false }
    public func receive(run events: ArraySlice<RoomEvent>, in room: RoomKey, frames: Frame) {}
}

/// The sessions of one event loop and their rooms: the hub's deliveries for this loop land
/// here and fan out to its subscribers. Not thread-safe: one per loop, used on it.
///
/// The delivery path (`handle`, `fanOut`) is `@inlinable` so the server's module specializes
/// it for its concrete `Frame`: unspecialized, every delivery paid for generic metadata
/// lookups (about half of the server's instructions in a 1×200 fan-out profile).
public final class LoopHub<Frame> {
    public typealias Encoder = (WireFormat, RoomKey, RoomEvent) -> Frame?
    /// Frames back to back as one (for runs of messages: `handle(_ deliveries:)`).
    public typealias Joiner = ([Frame]) -> Frame
    @usableFromInline let encode: Encoder
    @usableFromInline let join: Joiner?
    @usableFromInline var sessions: [SessionID: any RoomSubscriber<Frame>] = [:]
    @usableFromInline var rooms: [RoomKey: [any RoomSubscriber<Frame>]] = [:]
    @usableFromInline var sessionRooms: [SessionID: Set<RoomKey>] = [:]
    @usableFromInline var encodings = 0
    /// Number of encodings performed; tests use it to prove encode-once fan-out.
    public var encodeCount: Int { encodings }

    /// `join`: when given, a run of messages of one room handled together reaches each
    /// subscriber that takes runs as one frame (``RoomSubscriber/receive(run:in:frames:)``).
    public init(encode: @escaping Encoder, join: Joiner? = nil) {
        self.encode = encode
        self.join = join
    }

    /// Makes a session reachable for deliveries.
    public func register(_ session: any RoomSubscriber<Frame>) {
        sessions[session.sessionID] = session
    }

    /// Forgets a session and drops it from every room of this loop at once.
    public func unregister(_ id: SessionID) {
        sessions.removeValue(forKey: id)
        for key in sessionRooms.removeValue(forKey: id) ?? [] { removeFromRoom(id, key) }
    }

    /// Local subscribers of a room.
    public func subscribers(of key: RoomKey) -> [any RoomSubscriber<Frame>] { rooms[key] ?? [] }

    @inlinable
    public func handle(_ delivery: Delivery) {
        switch delivery {
        case .event(let key, let event):
            guard let list = rooms[key] else { return }
            fanOut(event, in: key, to: list)
        case .subscribed(let id, let snapshot):
            guard let session = sessions[id] else { return }
            if snapshot.replayComplete, snapshot.failure == nil, sessionRooms[id, default: []].insert(snapshot.room).inserted {
                rooms[snapshot.room, default: []].append(session)
            }
            session.didSubscribe(snapshot)
        case .replay(let id, let key, let messages, let complete):
            guard let session = sessions[id] else { return }
            if complete, sessionRooms[id, default: []].insert(key).inserted {
                rooms[key, default: []].append(session)
            }
            session.didReplay(messages, in: key, complete: complete)
        case .unsubscribed(let id, let key):
            guard let session = sessions[id] else { return }
            sessionRooms[id]?.remove(key)
            removeFromRoom(id, key)
            session.didUnsubscribe(from: key)
        case .perform(let work):
            work()
        }
    }

    /// Handles deliveries in order, as handling them one by one would, except that
    /// consecutive messages of one room (a group commit's worth, in a busy room) are encoded
    /// as before and then joined, so each subscriber taking runs gets them in one write.
    @inlinable
    public func handle(_ deliveries: [Delivery]) {
        guard join != nil else {
            for delivery in deliveries { handle(delivery) }
            return
        }
        var index = deliveries.startIndex
        while index < deliveries.endIndex {
            guard case .event(let key, .message) = deliveries[index] else {
                handle(deliveries[index])
                index += 1
                continue
            }
            var end = index + 1
            while end < deliveries.endIndex, case .event(let next, .message) = deliveries[end], next == key { end += 1 }
            if end - index == 1 {
                handle(deliveries[index])
            } else if let list = rooms[key] {
                var events: [RoomEvent] = []
                events.reserveCapacity(end - index)
                for delivery in deliveries[index..<end] {
                    if case .event(_, let event) = delivery { events.append(event) }
                }
                fanOut(run: events, in: key, to: list)
            }
            index = end
        }
    }

    /// A run of messages of one room. The encoder and the subscribers that take the messages
    /// one by one see them exactly as handling the deliveries one by one would: each event
    /// for every format present, in the subscribers' order, before the next event (encoders
    /// may keep state across formats and events: SocketChat's caches the last event for its
    /// two transports). A subscriber that takes runs gets its format's frames joined, once
    /// per format, when the format shows every message of the run.
    @inlinable
    func fanOut(run events: [RoomEvent], in key: RoomKey, to list: [any RoomSubscriber<Frame>]) {
        var formats: [WireFormat] = []
        for subscriber in list where !formats.contains(subscriber.wireFormat) { formats.append(subscriber.wireFormat) }
        var frames = [[Frame?]](repeating: [], count: formats.count)
        for slot in frames.indices { frames[slot].reserveCapacity(events.count) }
        for event in events {
            for (slot, format) in formats.enumerated() {
                frames[slot].append(encode(format, key, event))
                encodings += 1
            }
        }
        // Per format, once: joined only if it shows every message of the run, and only once a
        // subscriber takes it (a format whose sessions all take messages one by one is not).
        let whole = frames.map { $0.allSatisfy { $0 != nil } }
        var joined = [Frame?](repeating: nil, count: formats.count)
        var oneByOne: [(subscriber: any RoomSubscriber<Frame>, slot: Int)] = []
        for subscriber in list {
            let slot = formats.firstIndex(of: subscriber.wireFormat)!
            guard subscriber.takesRuns, whole[slot] else {
                oneByOne.append((subscriber, slot))
                continue
            }
            if joined[slot] == nil { joined[slot] = join!(frames[slot].map { $0! }) }
            subscriber.receive(run: events[...], in: key, frames: joined[slot]!)
        }
        for (index, event) in events.enumerated() {
            for (subscriber, slot) in oneByOne { subscriber.receive(event, in: key, frame: frames[slot][index]) }
        }
    }

    @usableFromInline
    func removeFromRoom(_ id: SessionID, _ key: RoomKey) {
        guard var list = rooms[key], let index = list.firstIndex(where: { $0.sessionID == id }) else { return }
        list.remove(at: index)
        rooms[key] = list.isEmpty ? nil : list
    }

    /// Encodes `event` once per wire format present and hands the same frame to each subscriber.
    /// Rooms usually hold one format, so the last one used is checked first, without a closure.
    @inlinable
    func fanOut(_ event: RoomEvent, in key: RoomKey, to list: [any RoomSubscriber<Frame>]) {
        var lastFormat: WireFormat?
        var lastFrame: Frame?
        var others: [(format: WireFormat, frame: Frame?)] = []
        for subscriber in list {
            let format = subscriber.wireFormat
            if format != lastFormat {
                if let lastFormat { others.append((lastFormat, lastFrame)) }
                if let index = others.firstIndex(where: { $0.format == format }) {
                    lastFrame = others.remove(at: index).frame
                } else {
                    lastFrame = encode(format, key, event)
                    encodings += 1
                }
                lastFormat = format
            }
            subscriber.receive(event, in: key, frame: lastFrame)
        }
    }
}
