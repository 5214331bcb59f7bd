import Foundation
import Observation
import ParleyCore

/// An observable chat room for SwiftUI (and terminal UIs on Linux): connect, show the
/// transcript with "mine" vs "theirs", members with their colors, who is typing, and send.
///
/// ```swift
/// @State var chat = ChatRoomModel(url: URL(string: "ws://HOST:8080/v3/websocket")!)
/// ...
/// .task { try? await chat.start() }
/// ```
@MainActor @Observable
public final class ChatRoomModel {
    /// The transcript, members and typing state.
    public private(set) var state = ChatRoomState()
    /// The connection state.
    public private(set) var connection: ConnectionState = .disconnected(.notStarted)
    /// The room shown.
    public private(set) var roomName: String
    /// This client's name.
    public private(set) var name: String
    /// This client's color, `#RRGGBB`.
    public private(set) var color: String
    /// The last error worth showing (a failed send, a rejected connect), or nil.
    public private(set) var lastError: ParleyClientError?
    /// The file being uploaded and how far it is, or nil.
    public private(set) var upload: (name: String, progress: UploadProgress)?

    /// The server's native door.
    public let url: URL
    /// The channel.
    public let channel: String
    /// Messages shown on join.
    public let historyCount: Int
    /// The user this client is (docs/protocols.md, "Users"), or nil for a connection of its own.
    public let userID: String?
    /// Whether the model marks the room read as messages arrive (a screen that shows them).
    public var marksReadAutomatically = true
    @ObservationIgnored private var marking = false
    @ObservationIgnored private var markedOffset = 0
    @ObservationIgnored private let token: String?
    @ObservationIgnored private let transport: (any ParleyTransport)?
    @ObservationIgnored private let reconnectPolicy: ReconnectPolicy
    @ObservationIgnored private let uploader: FileUploader
    @ObservationIgnored private var client: ParleyClient?
    @ObservationIgnored private var room: Room?
    @ObservationIgnored private var tasks: [Task<Void, Never>] = []
    /// Typing on/off in input order: one consumer, so a quick "on, off" never arrives reversed.
    @ObservationIgnored private var typingIntents: AsyncStream<Bool>.Continuation?

    /// A model for `room` on `channel`, with the given identity or a random one
    /// (an adjective+noun name like "hiddensun" and a random color).
    public init(url: URL, channel: String = "demo", room: String = "observable-room",
                name: String? = nil, color: String? = nil, token: String? = nil, historyCount: Int = 20,
                transport: (any ParleyTransport)? = nil, reconnectPolicy: ReconnectPolicy = ReconnectPolicy(),
                uploader: FileUploader = FileUploader(), userID: String? = nil) {
        self.userID = userID
        self.url = url
        self.channel = channel
        self.roomName = room
        self.name = name ?? RandomIdentity.name()
        self.color = color.flatMap { RandomIdentity.isHexColor($0) ? $0 : nil } ?? RandomIdentity.color()
        self.token = token
        self.historyCount = historyCount
        self.transport = transport
        self.reconnectPolicy = reconnectPolicy
        self.uploader = uploader
    }

    /// The transcript, oldest first.
    public var lines: [ChatLine] { state.lines }
    /// Who is online in the room.
    public var members: [ChatMember] { state.members }
    /// `"alice is typing"`, `"alice, bob are typing"`, or empty.
    public var typingText: String { state.typingText }
    /// This user's unread count in the room.
    public var unread: UnreadInfo? { state.unread }
    /// "Seen by Bob, Carol" under this client's newest message, or nil.
    public var seenByLine: String? { state.seenByLine(me: userID) }

    /// A page of the user's conversations, newest first.
    public func inbox(limit: Int = 20) async throws(ParleyClientError) -> InboxPage {
        guard let client else { throw ParleyClientError(.notConnected, "call start() first") }
        return try await recording { () throws(ParleyClientError) in try await client.inbox(limit: limit) }
    }

    /// Opens the direct room with `users` and switches to it.
    public func openDirectRoom(with users: [String]) async throws(ParleyClientError) {
        guard let client else { throw ParleyClientError(.notConnected, "call start() first") }
        let room = try await recording { () throws(ParleyClientError) in try await client.openDirectRoom(with: users) }
        try await switchRoom(to: room)
    }

    /// The user's inbox over this model's connection (nil before ``start()``).
    public func makeInbox() -> InboxModel? { client.map(InboxModel.init(client:)) }

    /// Connects and joins the room. Throws when the first connect fails.
    public func start() async throws(ParleyClientError) {
        await stop()
        lastError = nil
        let client = ParleyClient(url: url, channel: channel,
                                  clientData: ["name": .string(name), "color": .string(color)],
                                  token: token, transport: transport, reconnectPolicy: reconnectPolicy, uploader: uploader,
                                  userID: userID)
        self.client = client
        let states = await client.stateUpdates()
        tasks.append(Task { [weak self] in
            for await state in states {
                guard let self else { return }
                self.connectionChanged(state)
            }
        })
        do {
            try await client.connect()
            try await join(roomName, on: client)
        } catch {
            lastError = error
            throw error
        }
    }

    /// Leaves and disconnects.
    public func stop() async {
        for task in tasks { task.cancel() }
        tasks = []
        typingIntents?.finish()
        typingIntents = nil
        room = nil
        if let client { await client.disconnect() }
        client = nil
    }

    private func connectionChanged(_ new: ConnectionState) {
        let old = connection
        connection = new
        switch (old, new) {
        case (.connected, .reconnecting): state.notice("connection lost, reconnecting…")
        case (.reconnecting, .connected): state.notice("reconnected")
        case (_, .disconnected(.rejected(let why))): state.notice("rejected by the server: \(why)")
        default: break
        }
    }

    private func join(_ name: String, on client: ParleyClient) async throws(ParleyClientError) {
        let room = try await client.subscribe(name, historyCount: historyCount, receipts: true, unread: true)
        self.room = room
        roomName = name
        state = ChatRoomState()
        markedOffset = 0
        typingIntents?.finish()
        let (intents, sink) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingNewest(8))
        typingIntents = sink
        tasks.append(Task {
            for await typing in intents { await room.setTyping(typing) }
        })
        let events = room.events
        tasks.append(Task { [weak self] in
            for await event in events {
                guard let self, self.room === room else { return }
                self.state.apply(event)
                if self.marksReadAutomatically, case .message = event { self.markRead() }
                if self.marksReadAutomatically, case .unread(let count) = event, count.unread > 0 { self.markRead() }
            }
        })
    }

    /// Sends chat text; returns the receipt. Empty text is ignored.
    @discardableResult
    public func send(_ text: String) async throws(ParleyClientError) -> PublishAck? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, let room else { return nil }
        do {
            return try await room.publish(text: trimmed)
        } catch {
            lastError = error
            throw error
        }
    }

    /// Sends chat text as a reply to the message with id `target`. Empty text is ignored.
    @discardableResult
    public func reply(to target: String, _ text: String) async throws(ParleyClientError) -> PublishAck? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, let room else { return nil }
        return try await recording { () throws(ParleyClientError) in try await room.reply(to: target, text: trimmed) }
    }

    /// Replaces the text of this client's message `target`. Empty text is ignored.
    @discardableResult
    public func edit(_ target: String, to text: String) async throws(ParleyClientError) -> ActionAck? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, let room else { return nil }
        return try await recording { () throws(ParleyClientError) in try await room.edit(target, text: trimmed) }
    }

    /// Deletes message `target` (this client's own; any with a `moderate` token).
    @discardableResult
    public func delete(_ target: String) async throws(ParleyClientError) -> ActionAck? {
        guard let room else { return nil }
        return try await recording { () throws(ParleyClientError) in try await room.delete(target) }
    }

    /// Adds `emoji` to message `target`.
    @discardableResult
    public func react(_ emoji: String, to target: String) async throws(ParleyClientError) -> ActionAck? {
        guard let room else { return nil }
        return try await recording { () throws(ParleyClientError) in try await room.react(emoji, to: target) }
    }

    /// Takes back this client's `emoji` on message `target`.
    @discardableResult
    public func unreact(_ emoji: String, from target: String) async throws(ParleyClientError) -> ActionAck? {
        guard let room else { return nil }
        return try await recording { () throws(ParleyClientError) in try await room.unreact(emoji, from: target) }
    }

    /// Adds `emoji` to `target`, or takes it back when this client's reaction is already
    /// shown there (a chip's tap).
    @discardableResult
    public func toggleReaction(_ emoji: String, on target: String) async throws(ParleyClientError) -> ActionAck? {
        let mine = state.message(target)?.reactions.contains { $0.emoji == emoji && $0.isMine } ?? false
        return mine ? try await unreact(emoji, from: target) : try await react(emoji, to: target)
    }

    private func recording<T>(_ body: () async throws(ParleyClientError) -> T) async throws(ParleyClientError) -> T {
        do {
            return try await body()
        } catch {
            lastError = error
            throw error
        }
    }

    /// Uploads a file and sends it, with an optional caption; ``upload`` shows the progress
    /// meanwhile. Returns the receipt.
    @discardableResult
    public func send(file: URL, caption: String? = nil) async throws(ParleyClientError) -> PublishAck? {
        try await send(.file(file), name: file.lastPathComponent, caption: caption)
    }

    /// Sends bytes as a file named `name` (e.g. a photo from the library).
    @discardableResult
    public func send(file: Data, name: String, caption: String? = nil) async throws(ParleyClientError) -> PublishAck? {
        try await send(.data(file), name: name, caption: caption)
    }

    private func send(_ source: UploadSource, name: String, caption: String?) async throws(ParleyClientError) -> PublishAck? {
        guard let room else { return nil }
        let trimmed = caption?.trimmingCharacters(in: .whitespacesAndNewlines)
        let publish = room.startPublishing(source, name: name, caption: trimmed?.isEmpty == false ? trimmed : nil)
        upload = (name, UploadProgress(sentBytes: 0, totalBytes: 0))
        let progress = Task { [weak self] in
            for await step in publish.progress { self?.upload = (name, step) }
        }
        defer {
            progress.cancel()
            upload = nil
        }
        do {
            return try await publish.value
        } catch {
            lastError = error
            throw error
        }
    }

    /// Call on every edit of the input field: non-empty text means typing (debounced by the
    /// client), empty text stops it.
    public func inputChanged(_ text: String) {
        typingIntents?.yield(!text.isEmpty)
    }

    /// Marks the room read up to its newest message shown (one mark in flight at a time; the
    /// newest wins).
    public func markRead() {
        guard let client, let offset = state.newestOffset, offset > markedOffset, !marking else { return }
        marking = true
        let room = roomName
        Task { [weak self] in
            let stored = try? await client.markRead(room, upTo: offset)
            guard let self else { return }
            self.marking = false
            if let stored { self.markedOffset = max(self.markedOffset, stored) }
            if let newest = self.state.newestOffset, newest > self.markedOffset, stored != nil, self.roomName == room { self.markRead() }
        }
    }

    /// Adds a local notice line to the transcript (e.g. the answer to a command).
    public func note(_ text: String) {
        state.notice(text)
    }

    /// Switches to another room on the same connection.
    public func switchRoom(to name: String) async throws(ParleyClientError) {
        guard let client, name != roomName else { return }
        if let room { await room.leave() }
        room = nil
        try await join(name, on: client)
    }

    /// Changes this client's name (the server learns names at handshake: this reconnects).
    public func rename(to newName: String) async throws(ParleyClientError) {
        let trimmed = newName.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed != name else { return }
        name = trimmed
        try await start()
    }
}
