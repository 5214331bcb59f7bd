import Testing
import ParleyCore
@testable import ParleyRedis

/// How the Redis backends name keys and write records: pure functions, no server.
@Suite struct RedisBackendEncodingTests {
    @Test func everyKeyOfARoomSharesOneSlotWhateverItsName() throws {
        let keyspace = try RedisKeyspace(prefix: "parley")
        for name in ["lobby", "a}b", "{x}", "%7D", "}{", "room with spaces", "ünïcode", "{", "}"] {
            let room = RoomKey(channel: "ch{1}", room: name)
            let keys = keyspace.room(room)
            let all = [keys.offset, keys.stream, keys.clientIDs, keys.clientIDTimes, keys.channel, keys.joinSequence,
                       keys.memberOrder, keys.memberData, keys.nodeMembersPrefix + "node.x"]
            let slots = Set(all.map { RedisKeySlot.slot(for: $0) })
            #expect(slots.count == 1, "\(name): \(all)")
            // The slot is the one of the whole encoded name: the tag is not cut short.
            #expect(slots.first == RedisKeySlot.slot(for: RedisKeyspace.tag(room)))
            #expect(!RedisKeyspace.tag(room).contains("}") && !RedisKeyspace.tag(room).contains("{"))
        }
        // Distinct rooms never share keys, even when their names look alike once encoded.
        let a = keyspace.room(RoomKey(channel: "c", room: "%7D")), b = keyspace.room(RoomKey(channel: "c", room: "}"))
        #expect(a.offset != b.offset)
        #expect(RedisKeyspace.tag(RoomKey(channel: "c", room: "a/b")) != RedisKeyspace.tag(RoomKey(channel: "c/a", room: "b")))
    }

    @Test func crossRoomNamesReadBack() {
        for room in [RoomKey(channel: "c", room: "a/b"), RoomKey(channel: "c/a", room: "b"), RoomKey(channel: "50%", room: "{x}"),
                     RoomKey(channel: "%2F", room: "%")] {
            #expect(RedisKeyspace.room(named: RedisKeyspace.roomName(room)) == room)
        }
    }

    @Test func prefixesAreChecked() {
        #expect(throws: RedisError.self) { try RedisKeyspace(prefix: "") }
        #expect(throws: RedisError.self) { try RedisKeyspace(prefix: "a{b}") }
        #expect(throws: RedisError.self) { try RedisKeyspace(prefix: "has space") }
        #expect((try? RedisKeyspace(prefix: "prod:parley-2.eu_1")) != nil)
    }

    @Test func messagesAndEventsRoundTripThroughTheChannelFormat() throws {
        let room = RoomKey(channel: "demo", room: "r")
        let sender = Member(id: "u1", clientData: ["name": "ann", "n": .number(JSONNumber(text: "1.50")!)], authData: ["role": "admin"])
        let body: JSONValue = ["z": 1, "a": [true, nil, "x"], "text": "héllo \"quoted\""]
        let message = Message(id: "k-1", offset: 42, timestampMillis: 1_700_000_000_123, room: room, sender: sender, body: body)
        let payload = Array("m42 ".utf8) + RedisRecords.record(message)
        #expect(RedisRecords.channelMessage(payload, room: room) == .stored(message))
        let anonymous = Message(id: "k-2", offset: 0, timestampMillis: 5, room: room, sender: nil, body: "plain")
        #expect(RedisRecords.channelMessage(Array("m7 ".utf8) + RedisRecords.record(anonymous), room: room)
                == .stored(Message(id: "k-2", offset: 7, timestampMillis: 5, room: room, sender: nil, body: "plain")))
        let typing = Message(id: "t", offset: 0, timestampMillis: 9, room: room, sender: sender, body: ["typing": true])
        for event in [RoomEvent.message(typing), .memberJoined(sender), .memberLeft(Member(id: "bare"))] {
            #expect(RedisRecords.channelMessage(RedisRecords.channelPayload(event), room: room) == .event(event))
        }
        // Key order and number literals survive (clients get back exactly what they sent).
        guard case .stored(let decoded)? = RedisRecords.channelMessage(payload, room: room) else { return }
        #expect(decoded.body.jsonString == body.jsonString)
        #expect(decoded.sender?.clientData?.jsonString == #"{"name":"ann","n":1.50}"#)
    }

    @Test func malformedChannelMessagesAreDropped() {
        let room = RoomKey(channel: "demo", room: "r")
        for text in ["", "m", "m1", "m {}", "mx {\"i\":\"a\",\"t\":1,\"b\":1}", "m0 {\"i\":\"a\",\"t\":1,\"b\":1}",
                     "m1 {\"i\":\"a\",\"t\":1}", "m1 not json", "j {\"c\":1}", "x {}", "e  {}", "l [1]",
                     "m99999999999999999999 {\"i\":\"a\",\"t\":1,\"b\":1}"] {
            #expect(RedisRecords.channelMessage(Array(text.utf8), room: room) == nil, "\(text)")
        }
    }

    @Test func rememberedClientMessageIDsKeepIDsWithSpaces() {
        let room = RoomKey(channel: "demo", room: "r")
        #expect(RedisMessageStore.remembered("12 1700000000000 an id with spaces", clientMessageID: "c", room: room)
                == RememberedPublish(room: room, clientMessageID: "c", id: "an id with spaces", offset: 12, timestampMillis: 1_700_000_000_000))
        #expect(RedisMessageStore.remembered("12 -5 x", clientMessageID: "c", room: room)?.timestampMillis == -5)
        #expect(RedisMessageStore.remembered("twelve 1 x", clientMessageID: "c", room: room) == nil)
    }
}
