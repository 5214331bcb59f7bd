import Testing
@testable import ParleyCore

@Suite struct PushRulesTests {
    let room = RoomKey(channel: "c", room: "team")
    let alice = Member(id: "a1", clientData: ["name": "Alice"], userID: "alice")

    func message(_ body: JSONValue, in room: RoomKey? = nil, offset: Int64 = 5, action: MessageAction? = nil) -> Message {
        Message(id: "m\(offset)", offset: offset, timestampMillis: 1, room: room ?? self.room, sender: alice, body: body, action: action)
    }

    @Test func awayUsersWithoutAMuteGetOneSenderAndConnectedUsersNone() {
        let users = ["alice", "bob", "carol", "dave", "erin", "bob"]
        let mutes: [String: [PushMute]] = ["dave": [PushMute(room: "team", untilMillis: 100)], "erin": [PushMute(room: nil, untilMillis: 5)]]
        let got = PushRules.recipients(of: message("hi"), users: users, connected: ["carol"], mutes: mutes, nowMillis: 10,
                                       mentionsOverrideMutes: true)
        #expect(got == ["bob", "erin"], "alice sent it, carol is here, dave muted the room; erin's mute ended; bob once")
        // A mention reaches a muted user when the setting says so; a direct room always counts as one.
        #expect(PushRules.recipients(of: message("@dave look"), users: ["dave"], connected: [], mutes: mutes, nowMillis: 10,
                                     mentionsOverrideMutes: true) == ["dave"])
        #expect(PushRules.recipients(of: message("@dave look"), users: ["dave"], connected: [], mutes: mutes, nowMillis: 10,
                                     mentionsOverrideMutes: false).isEmpty)
        let direct = RoomKey(channel: "c", room: "dm+alice+dave")
        let all: [String: [PushMute]] = ["dave": [PushMute(room: nil, untilMillis: 100)]]
        #expect(PushRules.recipients(of: message("psst", in: direct), users: ["alice", "dave"], connected: [], mutes: all, nowMillis: 10,
                                     mentionsOverrideMutes: true) == ["dave"])
        // Actions, typing and unstored messages are never pushed.
        let react = MessageAction(.react, target: MessageReference(id: "m1", offset: 1), emoji: "👍")
        #expect(PushRules.recipients(of: message(.null, action: react), users: ["bob"], connected: [], mutes: [:], nowMillis: 0,
                                     mentionsOverrideMutes: true).isEmpty)
        #expect(PushRules.recipients(of: message(["typing": true], offset: 0), users: ["bob"], connected: [], mutes: [:], nowMillis: 0,
                                     mentionsOverrideMutes: true).isEmpty)
    }

    @Test func aPushSaysWhoAndWhatOrOnlyThatThereIsSomething() {
        let one = PushRules.content(last: message("hello\nthere"), count: 1, badge: 4, preview: true)
        #expect(one.title == "#team" && one.body == "Alice: hello there" && one.badge == 4 && one.thread == "team")
        #expect(one.offset == 5 && one.messageID == "m5" && one.room == "team" && one.channel == "c")
        let burst = PushRules.content(last: message("last one"), count: 50, badge: 50, preview: true)
        #expect(burst.body == "50 new messages · Alice: last one")
        let hidden = PushRules.content(last: message("secret"), count: 2, badge: 2, preview: false)
        #expect(hidden.body == "2 new messages" && !hidden.body.contains("secret"))
        let direct = PushRules.content(last: message("psst", in: RoomKey(channel: "c", room: "dm+alice+bob")), count: 1, badge: 1, preview: true)
        #expect(direct.title == "Alice" && direct.body == "psst")
        let long = PushRules.content(last: message(.string(String(repeating: "x", count: 500))), count: 1, badge: 1, preview: true)
        #expect(long.body.count <= PushRules.maxPreview + "Alice: …".count)
        #expect(PushRules.content(last: message("\u{1B}]0;pwned\u{07}ok"), count: 1, badge: 1, preview: true).body.contains("\u{1B}") == false)
    }

    @Test func editsAndDeletesBeforeDeliveryChangeOrWithdrawThePush() {
        let one = message("one", offset: 1), two = message("two (edited)", offset: 3)
        let edit = message("two (edited)", offset: 2, action: MessageAction(.edit, target: MessageReference(id: "m3", offset: 3)))
        // Nothing deleted: the newest as it is now, and the count queued.
        #expect(PushRules.pending([one, edit, two], count: 2, for: "bob").map { [$0.last.id, "\($0.count)"] } == ["m3", "2"])
        // The newest deleted: the one before it, one fewer.
        let gone = two.tombstone
        #expect(PushRules.pending([one, gone], count: 2, for: "bob").map { [$0.last.id, "\($0.count)"] } == ["m1", "1"])
        // Everything deleted: no push at all.
        #expect(PushRules.pending([one.tombstone, gone], count: 2, for: "bob") == nil)
        #expect(PushRules.pending([], count: 1, for: "bob") == nil)
        // The user's own messages (sent through another door meanwhile) are not news to them.
        #expect(PushRules.pending([one], count: 1, for: "alice") == nil)
        // A burst longer than what was read back keeps its count.
        #expect(PushRules.pending([one, two], count: 80, for: "bob")?.count == 80)
    }

    @Test func devicesAreCheckedBeforeTheyAreStored() {
        let web = PushDevice(channel: "c", user: "u", platform: .webpush, token: "https://push.example/x",
                             p256dh: [4] + [UInt8](repeating: 1, count: 64), auth: [UInt8](repeating: 2, count: 16), registeredMillis: 0)
        #expect(web.problem == nil)
        #expect(PushDevice(channel: "c", user: "u", platform: .webpush, token: "https://push.example/x", registeredMillis: 0).problem != nil)
        #expect(PushDevice(channel: "c", user: "u", platform: .webpush, token: "ftp://x", p256dh: web.p256dh, auth: web.auth,
                           registeredMillis: 0).problem != nil)
        #expect(PushDevice(channel: "c", user: "u", platform: .apns, token: "zz", topic: "app", registeredMillis: 0).problem != nil)
        #expect(PushDevice(channel: "c", user: "u", platform: .apns, token: String(repeating: "ab", count: 32), topic: "com.example.app",
                           registeredMillis: 0).problem == nil)
        #expect(PushDevice(channel: "c", user: "u", platform: .fcm, token: "with space", registeredMillis: 0).problem != nil)
    }
}
