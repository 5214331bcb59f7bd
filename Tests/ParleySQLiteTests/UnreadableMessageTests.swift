import Foundation
import Synchronization
import Testing
import ParleyCore
@testable import ParleySQLite

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
