import ParleyCore

/// A subscribed room: its events and what a member can do in it.
public final class Room: Sendable {
    /// The room's name.
    public let name: String
    /// Everything that happens in the room, in order. Iterate it from one task; it finishes
    /// when the room is left or the client disconnects for good.
    public let events: AsyncStream<RoomEvent>
    /// The client this room belongs to.
    public let client: ParleyClient

    init(name: String, events: AsyncStream<RoomEvent>, client: ParleyClient) {
        self.name = name
        self.events = events
        self.client = client
    }

    /// Publishes any JSON and returns the receipt; see ``ParleyClient/publish(_:to:)``.
    @discardableResult
    public func publish(_ message: JSONValue) async throws(ParleyClientError) -> PublishAck {
        try await client.publish(message, to: name)
    }

    /// Publishes chat text (a plain JSON string, as the Scaledrone chat apps do).
    @discardableResult
    public func publish(text: String) async throws(ParleyClientError) -> PublishAck {
        try await client.publish(.string(text), to: name)
    }

    /// Publishes chat text as a reply to the message with id `target`; see
    /// ``ParleyClient/reply(to:with:in:timeout:)``.
    @discardableResult
    public func reply(to target: String, text: String) async throws(ParleyClientError) -> PublishAck {
        try await client.reply(to: target, with: .string(text), in: name)
    }

    /// Publishes any JSON as a reply to the message with id `target`.
    @discardableResult
    public func reply(to target: String, with message: JSONValue) async throws(ParleyClientError) -> PublishAck {
        try await client.reply(to: target, with: message, in: name)
    }

    /// Replaces the text of this client's message `target`; see ``ParleyClient/edit(_:to:in:)``.
    @discardableResult
    public func edit(_ target: String, text: String) async throws(ParleyClientError) -> ActionAck {
        try await client.edit(target, to: .string(text), in: name)
    }

    /// Replaces the body of this client's message `target` with any JSON.
    @discardableResult
    public func edit(_ target: String, to message: JSONValue) async throws(ParleyClientError) -> ActionAck {
        try await client.edit(target, to: message, in: name)
    }

    /// Deletes message `target`; see ``ParleyClient/delete(_:in:)``.
    @discardableResult
    public func delete(_ target: String) async throws(ParleyClientError) -> ActionAck {
        try await client.delete(target, in: name)
    }

    /// Adds `emoji` to message `target`; see ``ParleyClient/react(_:to:in:)``.
    @discardableResult
    public func react(_ emoji: String, to target: String) async throws(ParleyClientError) -> ActionAck {
        try await client.react(emoji, to: target, in: name)
    }

    /// Takes back this client's `emoji` on message `target`; see ``ParleyClient/unreact(_:from:in:)``.
    @discardableResult
    public func unreact(_ emoji: String, from target: String) async throws(ParleyClientError) -> ActionAck {
        try await client.unreact(emoji, from: target, in: name)
    }

    /// Says whether this client is typing (debounced, stops by itself); see
    /// ``ParleyClient/setTyping(_:in:)``.
    public func setTyping(_ typing: Bool) async {
        await client.setTyping(typing, in: name)
    }

    /// A page of stored messages older than `before`; see ``ParleyClient/history(of:before:limit:)``.
    public func history(before: Int? = nil, limit: Int = 50) async throws(ParleyClientError) -> HistoryPage {
        try await client.history(of: name, before: before, limit: limit)
    }

    /// The members now (observable rooms), as last reported by the server.
    public var members: [ChatMember] {
        get async { await client.members(of: name) }
    }

    /// Leaves the room; ``events`` finishes.
    public func leave() async {
        await client.unsubscribe(name)
    }
}
