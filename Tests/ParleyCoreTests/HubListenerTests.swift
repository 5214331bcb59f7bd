import Testing
@testable import ParleyCore

private let lobby = RoomKey(channel: "demo", room: "observable-room")
private let alice = Member(id: "a1", clientData: ["name": "alice"])
private let bob = Member(id: "b2", clientData: ["name": "bob"])

/// Listeners (``Hub/listen(_:to:inbox:)``): the room's events without being a member.
@Suite struct HubListenerTests {
    @Test func aListenerHearsTheRoomAndNobodyHearsIt() throws {
        let hub = Hub()
        let member = RecordingInbox(), listener = RecordingInbox()
        try hub.subscribe(1, as: alice, to: lobby, inbox: member)
        try hub.listen(2, to: lobby, inbox: listener)
        #expect(listener.snapshots.last?.members == [alice])
        #expect(hub.members(of: lobby) == [alice])
        #expect(member.events.isEmpty)
        try hub.subscribe(3, as: bob, to: lobby, inbox: member)
        try hub.publishNow("hi", to: lobby, from: alice)
        #expect(listener.events.count == 2)
        #expect(listener.events.first == .memberJoined(bob))
        guard case .message(let message)? = listener.events.last else { Issue.record("no message"); return }
        #expect(message.body == "hi")
        member.clear()
        #expect(hub.unsubscribe(2, from: lobby))
        #expect(member.events.isEmpty)
        #expect(hub.members(of: lobby) == [alice, bob])
    }

    @Test func aListenerFirstInTheRoomSeesWhatFollows() throws {
        let hub = Hub()
        let listener = RecordingInbox(), member = RecordingInbox()
        try hub.listen(1, to: lobby, inbox: listener)
        #expect(listener.snapshots.count == 1)
        #expect(listener.snapshots.first?.members == [])
        try hub.subscribe(2, as: alice, to: lobby, inbox: member)
        try hub.publishNow("first", to: lobby, from: alice)
        #expect(listener.events.first == .memberJoined(alice))
        #expect(listener.events.count == 2)
        #expect(hub.members(of: lobby) == [alice])
    }

    @Test func listenersTakeNoPlaceInAFullRoom() throws {
        var configuration = HubConfiguration()
        configuration.maxMembersPerRoom = 1
        let hub = Hub(configuration: configuration)
        let inbox = RecordingInbox()
        try hub.subscribe(1, as: alice, to: lobby, inbox: inbox)
        try hub.listen(2, to: lobby, inbox: inbox)
        try hub.listen(3, to: lobby, inbox: inbox)
        #expect(throws: ParleyError.self) { try hub.subscribe(4, as: bob, to: lobby, inbox: inbox) }
    }
}
