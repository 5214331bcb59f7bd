import Testing
@testable import ParleyCore

@Suite struct SocketChatTests {
    let lobby = RoomKey(channel: "demo", room: "observable-room")
    let alice = Member(id: "n1", clientData: ["name": "alice"])
    let bob = Member(id: "s1", clientData: ["name": "bob"])

    @Test func rosterKeepsDisconnectedUsersUntilTheyReturnOrExit() {
        let roster = SocketChatRoster()
        #expect(roster.users(connected: [alice, bob]) == [SocketChatUser(id: "n1", nickname: "alice", isConnected: true),
                                                        SocketChatUser(id: "s1", nickname: "bob", isConnected: true)])
        roster.disconnected(id: "s1", nickname: "bob")
        #expect(roster.users(connected: [alice]) == [SocketChatUser(id: "n1", nickname: "alice", isConnected: true),
                                                   SocketChatUser(id: "s1", nickname: "bob", isConnected: false)])
        // Connected again under a new socket: listed once, connected.
        let bob2 = Member(id: "s2", clientData: ["name": "bob"])
        #expect(roster.users(connected: [alice, bob2]).map(\.isConnected) == [true, true])
        roster.connected(nickname: "bob")
        roster.disconnected(id: "s2", nickname: "bob")
        roster.disconnected(id: "s2", nickname: "bob")
        #expect(roster.users(connected: []) == [SocketChatUser(id: "s2", nickname: "bob", isConnected: false)])
        roster.exited(nickname: "bob")
        #expect(roster.users(connected: []) == [])
    }

    @Test func departedUsersExpireAfterTheirLifetimeAndAreBounded() {
        let clock = ManualClock()
        let roster = SocketChatRoster(departedLifetimeMillis: 60_000, maxDeparted: 3, clock: clock)
        roster.disconnected(id: "s1", nickname: "bob")
        clock.advance(millis: 30_000)
        roster.disconnected(id: "s2", nickname: "carl")
        #expect(roster.users(connected: []).map(\.nickname) == ["bob", "carl"])
        clock.advance(millis: 30_000)
        #expect(roster.users(connected: []).map(\.nickname) == ["carl"], "bob left a minute ago")
        clock.advance(millis: 30_000)
        #expect(roster.users(connected: []).isEmpty)
        // At most maxDeparted are kept: the oldest departures go first.
        for n in 1...5 { roster.disconnected(id: "x\(n)", nickname: "user\(n)") }
        #expect(roster.departedCount == 3)
        #expect(roster.users(connected: []).map(\.nickname) == ["user3", "user4", "user5"])
        #expect(SocketChatRoster().departedLifetimeMillis == 3_600_000)
        #expect(SocketChatRoster().maxDeparted == 1_000)
    }

    @Test func userListHasOneEntryPerNickname() {
        let twin = Member(id: "l1", clientData: ["name": "alice"])
        let anonymous = Member(id: "x9")
        #expect(SocketChatRoster.users(connected: [alice, twin, anonymous], departed: []).map(\.nickname) == ["alice", "x9"])
    }

    @Test func typingMapAndNicknames() {
        #expect(SocketChatRoster.typingMap([alice, bob]) == ["alice": 1, "bob": 1])
        #expect(SocketChatRoster.typingMap([]) == .object([:]))
        #expect(SocketChatRoster.isValidNickname("Luke"))
        #expect(!SocketChatRoster.isValidNickname(""))
        #expect(!SocketChatRoster.isValidNickname("a\u{7}"))
        #expect(!SocketChatRoster.isValidNickname(String(repeating: "a", count: 65)))
    }

    @Test func mirrorFollowsTheEventStreamByTheHubsRules() {
        var mirror = RoomMirror(members: [alice])
        mirror.apply(.memberJoined(bob))
        mirror.apply(.memberJoined(bob))
        #expect(mirror.members == [alice, bob])
        func message(_ body: JSONValue, from sender: Member?) -> RoomEvent {
            .message(Message(id: "m", offset: 0, timestampMillis: 0, room: lobby, sender: sender, body: body))
        }
        mirror.apply(message(["typing": true], from: bob))
        mirror.apply(message(["typing": true], from: alice))
        mirror.apply(message(["typing": true], from: bob))
        #expect(mirror.typing == [bob, alice])
        mirror.apply(message("hi", from: bob))
        #expect(mirror.typing == [alice])
        mirror.apply(message("server", from: nil))
        mirror.apply(message(["typing": false], from: alice))
        #expect(mirror.typing == [])
        mirror.apply(message(["typing": true], from: bob))
        mirror.apply(.memberLeft(bob))
        #expect(mirror == RoomMirror(members: [alice], typing: []))
    }
}
