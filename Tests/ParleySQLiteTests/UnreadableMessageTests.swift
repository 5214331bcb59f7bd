import Foundation
import Synchronization
import Testing
import ParleyCore
@testable import ParleySQLite
import ParleyTestSupport

/// A stored message whose JSON no longer parses is never handed out as `null`: reads skip
/// it (the gap in offsets shows), count it and report it.
@Suite struct UnreadableMessageTests {
    @Test func aDamagedMessageIsSkippedCountedAndReported() async throws {
        let path = temporaryDatabase()
        var options = SQLiteStoreOptions()
        options.synchronousFull = false
        let store = try SQLiteMessageStore(path: path, options: options)
        defer { store.close() }
        let room = RoomKey(channel: "demo", room: "damaged")
        for offset in Int64(1)...3 {
            try await store.append(Message(id: "m\(offset)", offset: offset, timestampMillis: 1, room: room,
                                           sender: Member(id: "a", clientData: ["name": "alice"]), body: .string("text \(offset)")))
        }
        let reported = Mutex<[(RoomKey, Int64)]>([])
        store.onUnreadableMessage = { room, offset in reported.withLock { $0.append((room, offset)) } }
        // Damage message 2's body and message 3's clientData behind the store's back.
        let raw = try SQLiteConnection(path: path)
        try raw.exec("UPDATE messages SET body = '{\"broken' WHERE offset = 2")
        try raw.exec("UPDATE messages SET client_data = 'nope' WHERE offset = 3")
        raw.close()
        let read = try await store.messages(in: room, after: 0, limit: 10)
        #expect(read.map(\.offset) == [1])
        #expect(read.first?.body == "text 1")
        #expect(store.unreadableMessages == 2)
        #expect(reported.withLock { $0.map(\.1) } == [2, 3])
        let page = try await store.messages(in: room, before: nil, limit: 10)
        #expect(page.messages.map(\.offset) == [1])
        #expect(store.unreadableMessages == 4)
    }
}

/// The store's queues have bounds: past them a request fails at once, clearly, instead of
/// queueing without limit.
@Suite struct StoreQueueBoundTests {
    @Test func appendsPastTheWriteQueueBoundFailAtOnce() async throws {
        let path = temporaryDatabase()
        var options = SQLiteStoreOptions()
        options.synchronousFull = false
        options.maxQueuedWrites = 10
        let store = try SQLiteMessageStore(path: path, options: options)
        defer { store.close() }
        let room = RoomKey(channel: "demo", room: "bounded")
        // Another connection holds the write lock, so the writer waits in its first commit.
        let blocker = try SQLiteConnection(path: path)
        try blocker.exec("BEGIN EXCLUSIVE")
        let outcomes = Mutex<[Int64: Result<Void, ParleyError>]>([:])
        let message = { (offset: Int64) in
            Message(id: "m\(offset)", offset: offset, timestampMillis: 1, room: room, sender: nil, body: "x")
        }
        store.append(message(1), clientMessageID: nil) { result in outcomes.withLock { $0[1] = result } }
        try await eventually("the writer took the first append") { store.writeQueueDepth == 0 }
        for offset in Int64(2)...30 {
            store.append(message(offset), clientMessageID: nil) { result in outcomes.withLock { $0[offset] = result } }
        }
        let refused = outcomes.withLock { $0 }.filter { if case .failure(let e) = $0.value { e.message.contains("overloaded") } else { false } }
        #expect(refused.count == 19)
        #expect(store.writeQueueDepth == 10)
        try blocker.exec("ROLLBACK")
        blocker.close()
        try await eventually("the queued appends are stored", timeout: 10) { outcomes.withLock { $0.count } == 30 }
        let stored = outcomes.withLock { $0 }.filter { if case .success = $0.value { true } else { false } }.keys.sorted()
        #expect(stored == Array(1...11))
    }
}
