import Foundation
import Synchronization
import Testing
@testable import ParleyCore
import ParleySQLite
import ParleyTestSupport

/// Records every delivery, in order.
final class RecordingInbox: Inbox {
    let log = Mutex<[Delivery]>([])
    func post(_ delivery: Delivery) { log.withLock { $0.append(delivery) } }
    var messages: [Message] {
        log.withLock { $0 }.flatMap { delivery -> [Message] in
            switch delivery {
            case .event(_, .message(let message)): [message]
            case .subscribed(_, let snapshot): snapshot.replay
            default: []
            }
        }
    }
    var subscribed: Bool { log.withLock { $0 }.contains { if case .subscribed = $0 { true } else { false } } }
}

private let room = RoomKey(channel: "demo", room: "disk")

func publishAndWait(_ hub: Hub, _ body: JSONValue, messageID: String? = nil) -> Result<Message, ParleyError> {
    let result = Mutex<Result<Message, ParleyError>?>(nil)
    let done = DispatchSemaphore(value: 0)
    do {
        try hub.publish(body, to: room, from: nil, messageID: messageID) { outcome in
            result.withLock { $0 = outcome }
            done.signal()
        }
    } catch {
        return .failure(error)
    }
    done.wait()
    return result.withLock { $0! }
}

/// The room's last stored offset, read from the store (tests only: it blocks).
func lastOffsetNow(_ hub: Hub, _ key: RoomKey = room) -> Int64 {
    let result = Mutex<Int64>(-1)
    let done = DispatchSemaphore(value: 0)
    hub.lastOffset(of: key) { outcome in
        result.withLock { $0 = (try? outcome.get()) ?? -1 }
        done.signal()
    }
    done.wait()
    return result.withLock { $0 }
}

@Suite struct HubDurabilityTests {
    /// SQLite's max_page_count stands in for a full disk (no tmpfs mount in the test run).
    @Test func fullDiskTurnsPublishesIntoErrorsAndRecovers() throws {
        var options = SQLiteStoreOptions()
        options.synchronousFull = false
        options.maxPageCount = 64
        let store = try SQLiteMessageStore(path: temporaryDatabase(), options: options)
        defer { store.close() }
        let hub = Hub(store: store)
        let watcher = RecordingInbox()
        try hub.subscribe(1, as: Member(id: "w"), to: room, inbox: watcher)
        let big = JSONValue.string(String(repeating: "x", count: 2_000))
        var stored: [Message] = [], failure: ParleyError?
        // Many in flight at once, so a whole group commit fails and later ones must rewind.
        while failure == nil {
            let results = Mutex<[Result<Message, ParleyError>]>([])
            let group = DispatchGroup()
            for _ in 0..<20 {
                group.enter()
                try hub.publish(big, to: room, from: nil) { result in results.withLock { $0.append(result) }; group.leave() }
            }
            group.wait()
            for result in results.withLock({ $0 }) {
                switch result {
                case .success(let message): stored.append(message)
                case .failure(let error): failure = error
                }
            }
            #expect(stored.count < 10_000)
        }
        #expect(failure?.code == .unavailable)
        #expect(lastOffsetNow(hub) == Int64(stored.count))
        // Subscribers saw exactly what was stored, in order.
        #expect(watcher.messages.map(\.offset) == Array(1...Int64(stored.count)))
        let raised = DispatchSemaphore(value: 0)
        store.setMaxPageCount(1 << 20) { _ in raised.signal() }
        raised.wait()
        let next = try publishAndWait(hub, "space is back").get()
        #expect(next.offset == Int64(stored.count) + 1)
        #expect(watcher.messages.last == next)
    }

    @Test func subscribeAfterRestartReadsHistoryAndReplayFromTheStore() async throws {
        let path = temporaryDatabase()
        var options = SQLiteStoreOptions()
        options.synchronousFull = false
        do {
            let store = try SQLiteMessageStore(path: path, options: options)
            let hub = Hub(store: store)
            for n in 1...50 { _ = try publishAndWait(hub, .number(JSONNumber(n)), messageID: n == 7 ? "seven" : nil).get() }
            store.close()
        }
        let store = try SQLiteMessageStore(path: path, options: options)
        defer { store.close() }
        var configuration = HubConfiguration()
        configuration.historyCapacity = 10
        let hub = Hub(configuration: configuration, store: store)
        #expect(try await hub.lastOffset(of: room) == 50)
        #expect(try publishAndWait(hub, "again", messageID: "seven").get().offset == 7)
        let inbox = RecordingInbox()
        try hub.subscribe(1, as: Member(id: "r"), to: room, inbox: inbox, historyCount: 3, since: 20)
        // Published while the store is being read: must follow the replay, once.
        for n in 51...80 { try hub.publish(.number(JSONNumber(n)), to: room, from: nil, whenStored: { _ in }) }
        try await eventually("offset 80 delivered", timeout: 10) { inbox.messages.last?.offset == 80 }
        #expect(inbox.messages.map(\.offset) == Array(21...80))
        let snapshot = inbox.log.withLock { $0 }.compactMap { if case .subscribed(_, let s) = $0 { s } else { nil } }.first
        #expect(snapshot?.history.map(\.offset) == [48, 49, 50])
    }
}

@Suite struct HubSeamTests {
    private let key = RoomKey(channel: "demo", room: "seam")

    @Test func nothingIsDeliveredBeforeItIsStoredAndSubscribeSeesEarlierPublishes() throws {
        let store = GatedStore()
        let hub = Hub(store: store)
        let early = RecordingInbox()
        try hub.subscribe(1, as: Member(id: "early"), to: key, inbox: early)
        try hub.publish("one", to: key, from: nil)
        try hub.publish("two", to: key, from: nil)
        #expect(early.messages.isEmpty)
        // Subscribes while both are in flight: it waits for them (read-your-writes)…
        let late = RecordingInbox()
        try hub.subscribe(2, as: Member(id: "late"), to: key, inbox: late, historyCount: 5)
        #expect(!late.subscribed)
        try hub.publish("three", to: key, from: nil)
        store.release(2)
        #expect(early.messages.map(\.offset) == [1, 2])
        // …and gets them as history; "three", published after it subscribed, arrives live.
        #expect(late.subscribed)
        let snapshot = late.log.withLock { $0 }.compactMap { if case .subscribed(_, let s) = $0 { s } else { nil } }.first
        #expect(snapshot?.history.map(\.offset) == [1, 2])
        store.release()
        #expect(late.messages.map(\.offset) == [3])
        #expect(early.messages.map(\.offset) == [1, 2, 3])
    }

    @Test func aPublishStoredWhileASubscribeWaitsIsNotSkipped() throws {
        let store = GatedStore()
        let hub = Hub(store: store)
        try hub.publish("one", to: key, from: nil)
        let inbox = RecordingInbox()
        try hub.subscribe(1, as: Member(id: "s"), to: key, inbox: inbox)
        try hub.publish("two", to: key, from: nil)
        try hub.publish("three", to: key, from: nil)
        store.release()
        #expect(inbox.messages.map(\.offset) == [2, 3])
    }

    @Test func retriesWaitForTheOriginalAndGetItsReceipt() throws {
        let store = GatedStore()
        let hub = Hub(store: store)
        let receipts = Mutex<[Message]>([])
        for _ in 0..<3 {
            try hub.publish("once", to: key, from: nil, messageID: "x") { result in
                if case .success(let message) = result { receipts.withLock { $0.append(message) } }
            }
        }
        #expect(receipts.withLock { $0 }.isEmpty)
        store.release()
        let got = receipts.withLock { $0 }
        #expect(got.count == 3)
        #expect(Set(got.map(\.id)).count == 1)
        #expect(got.map(\.offset) == [1, 1, 1])
        #expect(try store.inner.recover(clientMessageIDsSince: 0).lastOffsets[key] == 1)
    }
}

func temporaryDatabase() -> String {
    let directory = NSTemporaryDirectory() + "parley-store-\(UUID().uuidString)"
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    return directory + "/parley.sqlite3"
}
