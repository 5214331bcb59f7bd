import Foundation
import Observation
import ParleyCore

/// A user's conversations, newest activity first: the state an inbox screen shows, kept from
/// an inbox page and its live updates. Pure, so every rule is tested without a server.
public struct InboxState: Sendable, Hashable {
    public private(set) var conversations: [ChatConversation] = []
    public private(set) var hasMore = false

    public init() {}

    /// Replaces everything with a page.
    public mutating func load(_ page: InboxPage) {
        conversations = page.conversations
        hasMore = page.hasMore
        sort()
    }

    /// One conversation changed (or joined): it takes its place by activity.
    public mutating func apply(_ conversation: ChatConversation) {
        conversations.removeAll { $0.room == conversation.room }
        conversations.append(conversation)
        sort()
    }

    /// Unread messages over every conversation (an app badge).
    public var totalUnread: Int { conversations.reduce(0) { $0 + $1.unread.unread } }

    private mutating func sort() {
        conversations.sort { $0.activity != $1.activity ? $0.activity > $1.activity : $0.room < $1.room }
    }
}

/// An observable inbox for SwiftUI (and terminal UIs): the user's rooms and direct rooms with
/// unread badges, updated live. Made from a connected ``ParleyClient`` (``ChatRoomModel/makeInbox()``).
@MainActor @Observable
public final class InboxModel {
    public private(set) var state = InboxState()
    /// The last error worth showing, or nil.
    public private(set) var lastError: ParleyClientError?
    @ObservationIgnored private let client: ParleyClient
    @ObservationIgnored private var task: Task<Void, Never>?

    public init(client: ParleyClient) {
        self.client = client
    }

    public var conversations: [ChatConversation] { state.conversations }
    public var totalUnread: Int { state.totalUnread }

    /// Loads the inbox and follows it until ``stop()``.
    public func start(limit: Int = 20) async throws(ParleyClientError) {
        stop()
        do {
            let (page, updates) = try await client.watchInbox(limit: limit)
            state.load(page)
            task = Task { [weak self] in
                for await update in updates {
                    guard let self else { return }
                    self.state.apply(update)
                }
            }
        } catch {
            lastError = error
            throw error
        }
    }

    public func stop() {
        task?.cancel()
        task = nil
    }

    /// Opens (or finds) the direct room with `users` and returns its name.
    public func openDirectRoom(with users: [String]) async throws(ParleyClientError) -> String {
        do {
            return try await client.openDirectRoom(with: users)
        } catch {
            lastError = error
            throw error
        }
    }
}
