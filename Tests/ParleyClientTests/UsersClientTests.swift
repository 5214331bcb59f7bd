import Foundation
import ParleyClient
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

private func client(_ port: Int, user: String, name: String) -> ParleyClient {
    ParleyClient(url: nativeURL(port: port), channel: "demo", clientData: ["name": .string(name)],
                 reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(50), maxDelay: .milliseconds(400)), userID: user)
}

/// Users through the SDK against a real in-process server: receipts and unread counts as room
/// events, direct rooms, and the live inbox through ``InboxState``.
@Suite(.serialized) struct UsersClientTests {
    @Test func receiptsUnreadCountsDirectRoomsAndTheLiveInbox() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let alice = client(server.httpPort, user: "alice", name: "Alice"), bob = client(server.httpPort, user: "bob", name: "Bob")
        try await alice.connect()
        try await bob.connect()
        #expect(await alice.userID == "alice", "the server confirms the user")
        let (page, updates) = try await bob.watchInbox()
        #expect(page.conversations.isEmpty)
        var inbox = InboxState()
        inbox.load(page)
        let inboxUpdates = Task { () -> [ChatConversation] in
            var seen: [ChatConversation] = []
            for await update in updates {
                seen.append(update)
                if update.room == "dm+alice+bob", update.unread.unread == 1 { break }
            }
            return seen
        }

        let aliceRoom = try await alice.subscribe("team", receipts: true, unread: true)
        let bobRoom = try await bob.subscribe("team", receipts: true, unread: true)
        let aliceLog = EventLog(aliceRoom), bobLog = EventLog(bobRoom)
        let hello = try await aliceRoom.publish(text: "hello @bob")
        try await bobLog.waitFor("Bob's count") { if case .unread(let u) = $0 { u.unread == 1 && u.mentions == 1 } else { false } }
        #expect(try await bob.markRead("team", upTo: hello.offset) == hello.offset)
        try await aliceLog.waitFor("Bob's receipt") { if case .read(let r) = $0 { r.user == "bob" && r.name == "Bob" } else { false } }
        try await bobLog.waitFor("Bob's count after reading") {
            if case .unread(let u) = $0 { u.unread == 0 && u.readOffset == hello.offset } else { false }
        }
        var state = ChatRoomState()
        for event in await aliceLog.events { state.apply(event) }
        #expect(state.seenByLine(me: "alice") == "Seen by Bob")
        #expect(state.seenBy(hello.offset + 1, me: "alice").isEmpty)

        let direct = try await alice.openDirectRoom(with: ["bob"])
        #expect(direct == "dm+alice+bob" && directRoomName(of: ["bob", "alice"]) == direct)
        let dm = try await alice.subscribe(direct)
        _ = try await dm.publish(text: "just us")
        let seen = try await within(5, "Bob's inbox to show the direct room") { await inboxUpdates.value }
        for update in seen { inbox.apply(update) }
        #expect(inbox.conversations.first?.room == direct, "newest first: \(inbox.conversations.map(\.room))")
        #expect(inbox.conversations.first?.title(me: "bob") == "alice")
        #expect(inbox.conversations.first?.lastSenderName == "Alice" && inbox.conversations.first?.last?.text == "just us")
        #expect(inbox.conversations.first?.unread.badge == "1")
        #expect(inbox.totalUnread == 1)
        let listed = try await bob.inbox()
        #expect(listed.conversations.map(\.room) == [direct, "team"])
        do {
            _ = try await alice.openDirectRoom(with: [])
            Issue.record("a direct room of one user")
        } catch {
            #expect(error.code == .server)
        }
        await alice.disconnect()
        await bob.disconnect()
    }

    @Test func badgesSayHowManyUpToNinetyNine() {
        #expect(UnreadInfo(readOffset: 0, unread: 0, mentions: 0).badge == nil)
        #expect(UnreadInfo(readOffset: 0, unread: 7, mentions: 0).badge == "7")
        #expect(UnreadInfo(readOffset: 0, unread: 150, mentions: 0).badge == "99+")
        #expect(UnreadInfo(readOffset: 0, unread: 12, mentions: 0, capped: true).badge == "12+")
    }
}

/// The models with users: a room model marks what it shows as read and says who has seen
/// this client's message; an inbox model follows the conversations.
@Suite(.serialized) struct UsersModelTests {
    @MainActor @Test func aShownMessageIsMarkedReadAndTheSenderSeesWhoSawIt() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let url = nativeURL(port: server.httpPort)
        let alice = ChatRoomModel(url: url, room: "models", name: "Alice", userID: "alice")
        let bob = ChatRoomModel(url: url, room: "models", name: "Bob", userID: "bob")
        try await alice.start()
        try await bob.start()
        let inbox = try #require(bob.makeInbox())
        try await inbox.start()
        try await alice.send("are you there?")
        // Bob's model shows it, marks it read: his count goes back to 0 and Alice learns he saw it.
        try await eventually("Bob has read it") { await MainActor.run { bob.unread?.readOffset == 1 && bob.unread?.unread == 0 } }
        try await eventually("Alice sees who saw it") { await MainActor.run { alice.seenByLine == "Seen by Bob" } }
        try await eventually("Bob's inbox has the room, read") {
            await MainActor.run { inbox.conversations.first?.room == "models" && inbox.conversations.first?.unread.readOffset == 1 }
        }
        #expect(inbox.totalUnread == 0)
        inbox.stop()
        await alice.stop()
        await bob.stop()
    }
}

/// The SDK's push registration against a real server with Web Push on.
@Suite(.serialized) struct PushClientTests {
    /// A key pair from `parley vapid-keys` (its public half, its private half).
    static func vapidKeys() throws -> (String, String) {
        let lines = try VapidKeysCommand.run().split(separator: "\n")
        func value(_ name: String) -> String { lines.first { $0.hasPrefix(name + "=") }.map { String($0.dropFirst(name.count + 1)) } ?? "" }
        return (value("PARLEY_VAPID_PUBLIC_KEY"), value("PARLEY_VAPID_PRIVATE_KEY"))
    }

    @Test func devicesAreRegisteredForTheUserAndCheckedByTheServer() async throws {
        let (publicKey, privateKey) = try Self.vapidKeys()
        let server = try startClientTestServer { configuration in
            configuration.vapidPublicKey = publicKey
            configuration.vapidPrivateKey = privateKey
            configuration.webPushEndpoints = ["https://push.example/"]
        }
        defer { server.shutdown(timeout: .seconds(1)) }
        let bob = client(server.httpPort, user: "bob", name: "Bob")
        try await bob.connect()
        #expect(await bob.vapidPublicKey == publicKey)
        let browser = PushRegistration.webPush(endpoint: "https://push.example/send/1", p256dh: try Self.vapidKeys().0,
                                               auth: Base64URL.encode([UInt8](repeating: 9, count: 16)))
        try await bob.registerDevice(browser)
        try await bob.mute("team", until: Date().addingTimeInterval(3600))
        try await bob.unregisterDevice(browser)
        // Another push service, or APNs on a server without its key: refused, saying why.
        do {
            try await bob.registerDevice(.webPush(endpoint: "https://elsewhere.example/x", p256dh: "BAAA", auth: "AAAA"))
            Issue.record("a push service the server does not send to")
        } catch {
            #expect(error.code == .server)
        }
        do {
            try await bob.registerDevice(.apns(deviceToken: Data([0xA1, 0xB2] + [UInt8](repeating: 0, count: 30)), topic: "com.example.chat", sandbox: true))
            Issue.record("APNs without a key")
        } catch {
            #expect(error.message.contains("APNs is not configured"), "\(error.message)")
        }
        do {
            try await bob.registerDevice(.fcm(token: "dGVzdA:APA91bH" + String(repeating: "x", count: 40)))
            Issue.record("FCM without a service account")
        } catch {
            #expect(error.message.contains("FCM is not configured"), "\(error.message)")
        }
        #expect(PushRegistration.hex(Data([0x00, 0xAB, 0x0F])) == "00ab0f")
        // A connection without a user has no devices.
        let guest = ParleyClient(url: nativeURL(port: server.httpPort), channel: "demo")
        try await guest.connect()
        do {
            try await guest.registerDevice(browser)
            Issue.record("a device without a user")
        } catch {
            #expect(error.message.contains("user"))
        }
        await bob.disconnect()
        await guest.disconnect()
    }
}
