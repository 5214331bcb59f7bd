@testable import ParleyCore
import ParleyIO
import ParleyWebSocket
import Testing
@testable import ParleyServer

private func parse(_ text: String) -> Result<NativeCommand, NativeCommand.Failure> {
    NativeCommand.parse(Array(text.utf8))
}

private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

@Suite struct NativeCommandTests {
    @Test func parsesEveryCommand() {
        #expect(parse(#"{"type":"handshake","channel":"c","callback":1,"client_data":{"name":"a"},"version":2}"#)
            == .success(.handshake(channel: "c", clientData: ["name": "a"], callback: 1)))
        #expect(parse(#"{"type":"subscribe","room":"r","callback":0,"history_count":0,"history":0}"#)
            == .success(.subscribe(room: "r", historyCount: 0, callback: 0)))
        #expect(parse(#"{"type":"subscribe","room":"r","callback":2,"history":5}"#)
            == .success(.subscribe(room: "r", historyCount: 5, callback: 2)))
        #expect(parse(#"{"type":"unsubscribe","room":"r"}"#) == .success(.unsubscribe(room: "r", callback: nil)))
        #expect(parse(#"{"type":"publish","room":"r","message":null}"#)
            == .success(.publish(room: "r", message: .null, callback: nil)))
        #expect(parse(#"{"type":"authenticate","token":"t","callback":3}"#) == .success(.authenticate(token: "t", callback: 3)))
    }

    @Test func refusesBadInputWithTheCallbackWhenReadable() {
        if case .failure(let failure) = parse("{") {
            #expect(failure.callback == nil && failure.message.hasPrefix("invalid JSON"))
        } else {
            Issue.record("invalid JSON parsed")
        }
        #expect(parse("3") == .failure(.init(callback: nil, isHandshake: false, message: "expected a JSON object")))
        #expect(parse(#"{"type":"x","callback":"1"}"#) == .failure(.init(callback: nil, isHandshake: false, message: "callback must be an integer")))
        #expect(parse(#"{"callback":4}"#) == .failure(.init(callback: 4, isHandshake: false, message: "missing or non-string type")))
        #expect(parse(#"{"type":"handshake","callback":5}"#) == .failure(.init(callback: 5, isHandshake: true, message: "missing channel")))
        #expect(parse(#"{"type":"handshake","channel":"a/b","callback":5}"#) == .failure(.init(callback: 5, isHandshake: true, message: "invalid channel name")))
        #expect(parse(#"{"type":"subscribe","room":"r","history_count":-1,"callback":6}"#)
            == .failure(.init(callback: 6, isHandshake: false, message: "history_count must be a non-negative integer")))
        #expect(parse(#"{"type":"publish","room":"r","callback":7}"#) == .failure(.init(callback: 7, isHandshake: false, message: "missing message")))
        #expect(parse(#"{"type":"publish","room":"","message":1}"#).isFailure)
    }
}

extension Result {
    var isFailure: Bool { if case .failure = self { true } else { false } }
}

@Suite struct NativeEncodingTests {
    let room = RoomKey(channel: "demo", room: "observable-room")
    let alice = Member(id: "a1", clientData: ["name": "alice", "color": "#FF0000"])

    @Test func publishCarriesEveryField() throws {
        let message = Message(id: "m-1", offset: 3, timestampMillis: 1_700_000_000_999, room: room, sender: alice, body: "hi")
        let json = try #require(NativeEncoding.eventJSON(.message(message), in: room))
        #expect(text(json) == #"{"type":"publish","room":"observable-room","message":"hi","id":"m-1","timestamp":1700000000,"client_id":"a1","offset":3}"#)
        let anonymousTyping = Message(id: "m-2", offset: 0, timestampMillis: 0, room: room, sender: nil, body: ["typing": true])
        #expect(text(NativeEncoding.eventJSON(.message(anonymousTyping), in: room)!)
            == #"{"type":"publish","room":"observable-room","message":{"typing":true},"id":"m-2","timestamp":0}"#)
        #expect(text(NativeEncoding.historyMessage(message, index: 0))
            == #"{"type":"history_message","room":"observable-room","message":"hi","id":"m-1","timestamp":1700000000,"client_id":"a1","offset":3,"index":0}"#)
    }

    @Test func parsesMessageActions() {
        #expect(parse(#"{"type":"reply","room":"r","message":"me too","reply_to":"m1","callback":1,"message_id":"c1"}"#)
            == .success(.act(room: "r", .reply(to: "m1", body: "me too", messageID: "c1"), callback: 1)))
        #expect(parse(#"{"type":"publish","room":"r","message":"me too","reply_to":"m1"}"#)
            == .success(.act(room: "r", .reply(to: "m1", body: "me too", messageID: nil), callback: nil)), "a publish with reply_to")
        #expect(parse(#"{"type":"publish","room":"r","message":"x","reply_to":null}"#)
            == .success(.publish(room: "r", message: "x", callback: nil)))
        #expect(parse(#"{"type":"edit","room":"r","target":"m1","message":{"text":"v2"},"callback":2}"#)
            == .success(.act(room: "r", .edit("m1", body: ["text": "v2"]), callback: 2)))
        #expect(parse(#"{"type":"delete","room":"r","target":"m1"}"#) == .success(.act(room: "r", .delete("m1"), callback: nil)))
        #expect(parse(#"{"type":"react","room":"r","target":"m1","emoji":"👍"}"#)
            == .success(.act(room: "r", .react("m1", emoji: "👍"), callback: nil)))
        #expect(parse(#"{"type":"unreact","room":"r","target":"m1","emoji":"👍","callback":0}"#)
            == .success(.act(room: "r", .unreact("m1", emoji: "👍"), callback: 0)))

        #expect(parse(#"{"type":"reply","room":"r","message":"x","callback":3}"#)
            == .failure(.init(callback: 3, isHandshake: false, message: "missing reply_to")))
        #expect(parse(#"{"type":"reply","room":"r","message":"x","reply_to":7,"callback":3}"#)
            == .failure(.init(callback: 3, isHandshake: false, message: "reply_to must be a string (a message id)")))
        #expect(parse(#"{"type":"edit","room":"r","target":"m1","callback":4}"#)
            == .failure(.init(callback: 4, isHandshake: false, message: "missing message")))
        #expect(parse(#"{"type":"delete","room":"r","callback":5}"#)
            == .failure(.init(callback: 5, isHandshake: false, message: "missing or non-string target (a message id)")))
        #expect(parse(#"{"type":"react","room":"r","target":"m1","emoji":1,"callback":6}"#)
            == .failure(.init(callback: 6, isHandshake: false, message: "missing or non-string emoji")))
        #expect(parse(#"{"type":"unreact","target":"m1","emoji":"x","callback":7}"#)
            == .failure(.init(callback: 7, isHandshake: false, message: "missing room")))
    }

    @Test func actionEventsAndCurrentStateCarryEveryField() throws {
        let target = MessageReference(id: "m-1", offset: 3)
        let edit = Message(id: "a-1", offset: 4, timestampMillis: 1_700_000_001_000, room: room, sender: alice, body: "hello",
                           action: MessageAction(.edit, target: target))
        #expect(text(try #require(NativeEncoding.eventJSON(.message(edit), in: room)))
            == #"{"type":"edit","room":"observable-room","id":"a-1","target":"m-1","message":"hello","timestamp":1700000001,"client_id":"a1","offset":4}"#)
        #expect(text(NativeEncoding.replayMessage(edit.tombstone))
            == #"{"type":"edit","room":"observable-room","id":"a-1","target":"m-1","message":null,"deleted":true,"timestamp":1700000001,"client_id":"a1","offset":4}"#)
        let react = Message(id: "a-2", offset: 5, timestampMillis: 1_700_000_002_000, room: room, sender: nil, body: .null,
                            action: MessageAction(.react, target: target, emoji: "👍"))
        #expect(text(try #require(NativeEncoding.eventJSON(.message(react), in: room)))
            == #"{"type":"react","room":"observable-room","id":"a-2","target":"m-1","emoji":"👍","timestamp":1700000002,"offset":5}"#)
        let delete = Message(id: "a-3", offset: 6, timestampMillis: 1_700_000_003_000, room: room, sender: alice, body: .null,
                             action: MessageAction(.delete, target: target))
        #expect(text(NativeEncoding.replayMessage(delete))
            == #"{"type":"delete","room":"observable-room","id":"a-3","target":"m-1","timestamp":1700000003,"client_id":"a1","offset":6}"#)

        let reactors = (1...12).map { Reactor(id: "r\($0)", name: "n\($0)") }
        let current = Message(id: "m-2", offset: 7, timestampMillis: 1_700_000_000_000, room: room, sender: alice, body: "v2",
                              replyTo: target, editedMillis: 1_700_000_009_500, editCount: 1,
                              reactions: [Reaction(emoji: "👍", reactors: reactors)])
        let names = (1...10).map { "\"n\($0)\"" }.joined(separator: ",")
        #expect(text(NativeEncoding.historyMessage(current, index: 0))
            == #"{"type":"history_message","room":"observable-room","message":"v2","id":"m-2","timestamp":1700000000,"client_id":"a1","offset":7,"index":0,"reply_to":"m-1","edited":1700000009,"reactions":[{"emoji":"👍","count":12,"names":["#
               + names + "]}]}")
    }

    @Test func membershipOnlyForObservableRooms() {
        #expect(text(NativeEncoding.eventJSON(.memberLeft(alice), in: room)!)
            == ##"{"type":"observable_member_leave","room":"observable-room","data":{"id":"a1","clientData":{"name":"alice","color":"#FF0000"}}}"##)
        #expect(NativeEncoding.eventJSON(.memberJoined(alice), in: RoomKey(channel: "demo", room: "plain")) == nil)
        #expect(text(NativeEncoding.observableMembers(room: room, members: [Member(id: "b")]).json)
            == #"{"type":"observable_members","room":"observable-room","data":[{"id":"b"}]}"#)
    }

    @Test func replies() {
        #expect(text(NativeEncoding.reply(callback: 0)) == #"{"callback":0}"#)
        #expect(text(NativeEncoding.reply(callback: nil, error: "bad")) == #"{"error":"bad"}"#)
        #expect(text(NativeEncoding.reply(callback: 1, error: "no", clientID: "x")) == #"{"callback":1,"client_id":"x","error":"no"}"#)
    }

    @Test func sharedFramePayloadRoundTrips() {
        for size in [0, 10, 125, 126, 65535, 65536, 70000] {
            let payload = [UInt8](repeating: 0x61, count: size)
            let frame = IOBuffer(WebSocketProtocolMachine.serverTextFrame(payload))
            #expect(NativeEncoding.payload(ofServerFrame: frame) == payload)
        }
    }
}

/// Fan-out encodes a native event once per loop and hands every subscriber the same bytes.
@Suite struct NativeFanOutTests {
    final class Subscriber: RoomSubscriber {
        let sessionID: SessionID
        let wireFormat = WireFormat.native
        var frames: [IOBuffer] = []
        init(_ id: SessionID) { sessionID = id }
        func receive(_ event: RoomEvent, in room: RoomKey, frame: IOBuffer?) { if let frame { frames.append(frame) } }
        func didSubscribe(_ snapshot: SubscribeSnapshot) {}
        func didUnsubscribe(from room: RoomKey) {}
    }

    @Test func encodesOnce() {
        let room = RoomKey(channel: "c", room: "r")
        let context = LoopContext(encoders: LoopEncoders(socketChat: SocketChatFanOut(hub: Hub(), lobby: room, roster: SocketChatRoster()), line: LineTranscript()))
        let subscribers = (1...3).map { Subscriber(SessionID($0)) }
        for s in subscribers {
            context.loopHub.register(s)
            context.loopHub.handle(.subscribed(s.sessionID, SubscribeSnapshot(room: room, members: [], history: [], lastOffset: 0)))
        }
        let message = Message(id: "m", offset: 1, timestampMillis: 0, room: room, sender: nil, body: "x")
        context.loopHub.handle(.event(room, .message(message)))
        #expect(context.loopHub.encodeCount == 1)
        #expect(subscribers.allSatisfy { $0.frames.count == 1 && $0.frames[0] === subscribers[0].frames[0] })
        // Joins in a plain room encode to nothing for the native door.
        context.loopHub.handle(.event(room, .memberJoined(Member(id: "z"))))
        #expect(subscribers.allSatisfy { $0.frames.count == 1 })
    }
}

@Suite struct NativeConfigurationTests {
    @Test func nativeLimitsHaveFlags() throws {
        let parsed = try #require(try ServerConfiguration.parse(
            arguments: ["--max-rooms", "3", "--publish-rate", "10", "--max-message-size", "2048", "--http-port", "0"],
            environment: [:]))
        #expect(parsed.nativeMaxRooms == 3)
        #expect(parsed.nativeRatePerSecond == 10 && parsed.nativeBurst == 20)
        #expect(parsed.webSocketMaxMessageSize == 2048)
        #expect(parsed.httpPort == 0)
        #expect(throws: ServerConfiguration.UsageError.self) {
            try ServerConfiguration.parse(arguments: ["--max-rooms", "0"], environment: [:])
        }
    }
}
