import Testing
import ParleyCore

/// A message's body is encoded once and the bytes are shared: by the store, by every loop's
/// encoder, and by the placed copy the broker makes.
@Suite struct MessageBodyEncodingTests {
    let room = RoomKey(channel: "c", room: "r")

    @Test func bodyJSONIsTheCompactSerializationOfTheBody() throws {
        let body = try JSONParser.parse(#"{ "text" : "h\u00e9llo \"you\"", "n": 1.50, "list": [true, null] }"#)
        let message = Message(id: "m1", offset: 0, timestampMillis: 1, room: room, sender: nil, body: body)
        #expect(message.bodyJSON == body.serialized())
        #expect(String(decoding: message.bodyJSON, as: UTF8.self) == #"{"text":"héllo \"you\"","n":1.50,"list":[true,null]}"#)
        // Asked again (and from the placed copy), the same bytes.
        #expect(message.bodyJSON == body.serialized())
        let placed = message.placed(offset: 7)
        #expect(placed.offset == 7 && placed.bodyJSON == body.serialized())
    }

    @Test func aTombstoneEncodesNull() throws {
        let message = Message(id: "m1", offset: 3, timestampMillis: 1, room: room, sender: nil, body: .string("secret"))
        _ = message.bodyJSON
        #expect(String(decoding: message.tombstone.bodyJSON, as: UTF8.self) == "null")
        #expect(String(decoding: message.tombstone.placed(offset: 3).bodyJSON, as: UTF8.self) == "null")
    }

    @Test func concurrentReadersGetOneEncoding() async throws {
        let message = Message(id: "m1", offset: 1, timestampMillis: 1, room: room, sender: nil,
                              body: .object(JSONObject([("text", .string(String(repeating: "x", count: 10_000)))])))
        let encodings = await withTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<8 { group.addTask { message.bodyJSON } }
            var all: [[UInt8]] = []
            for await bytes in group { all.append(bytes) }
            return all
        }
        #expect(encodings.count == 8 && Set(encodings).count == 1)
        #expect(encodings.first == message.body.serialized())
    }
}
