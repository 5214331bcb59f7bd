import Foundation
import ParleyCore
import Testing
@testable import ParleyServer

@Suite struct SocketIOPacketTests {
    @Test func decodesEveryShape() throws {
        #expect(try SocketIOPacket.decode("0") == SocketIOPacket(kind: .connect))
        #expect(try SocketIOPacket.decode("0{\"token\":\"x\"}") == SocketIOPacket(kind: .connect, data: ["token": "x"]))
        #expect(try SocketIOPacket.decode("0/,") == SocketIOPacket(kind: .connect))
        #expect(try SocketIOPacket.decode("0/admin,") == SocketIOPacket(kind: .connect, namespace: "/admin"))
        #expect(try SocketIOPacket.decode("0/admin?token=1") == SocketIOPacket(kind: .connect, namespace: "/admin"))
        #expect(try SocketIOPacket.decode("1") == SocketIOPacket(kind: .disconnect))
        #expect(try SocketIOPacket.decode("2[\"chatMessage\",\"bob\",\"hi\"]")
                == SocketIOPacket(kind: .event, data: ["chatMessage", "bob", "hi"]))
        #expect(try SocketIOPacket.decode("212[\"connectUser\",\"bob\"]")
                == SocketIOPacket(kind: .event, id: 12, data: ["connectUser", "bob"]))
        #expect(try SocketIOPacket.decode("2/chat,7[\"a\"]") == SocketIOPacket(kind: .event, namespace: "/chat", id: 7, data: ["a"]))
        #expect(try SocketIOPacket.decode("30[]") == SocketIOPacket(kind: .ack, id: 0, data: []))
        #expect(try SocketIOPacket.decode("4{\"message\":\"no\"}") == SocketIOPacket(kind: .connectError, data: ["message": "no"]))
        #expect(try SocketIOPacket.decode("4\"no\"") == SocketIOPacket(kind: .connectError, data: "no"))
        #expect(try SocketIOPacket.decode("51-[\"up\",{\"_placeholder\":true,\"num\":0}]")
                == SocketIOPacket(kind: .binaryEvent, data: ["up", ["_placeholder": true, "num": 0]], attachments: 1))
        #expect(try SocketIOPacket.decode("61-3[{\"_placeholder\":true,\"num\":0}]").id == 3)
    }

    @Test func encodesLikeTheReferenceParser() throws {
        #expect(SocketIOPacket(kind: .connect, data: ["sid": "abc"]).encoded == "0{\"sid\":\"abc\"}")
        #expect(SocketIOPacket.event("newChatMessage", ["bob", "hi", "d"]).encoded == "2[\"newChatMessage\",\"bob\",\"hi\",\"d\"]")
        #expect(SocketIOPacket(kind: .ack, id: 5, data: []).encoded == "35[]")
        #expect(SocketIOPacket(kind: .connectError, namespace: "/x", data: ["message": "Invalid namespace"]).encoded
                == "4/x,{\"message\":\"Invalid namespace\"}")
        #expect(SocketIOPacket(kind: .binaryEvent, data: ["a"], attachments: 2).encoded == "52-[\"a\"]")
        for packet in [SocketIOPacket(kind: .event, namespace: "/n", id: 9, data: ["x", 1]), SocketIOPacket(kind: .disconnect)] {
            #expect(try SocketIOPacket.decode(packet.encoded) == packet)
        }
    }

    @Test func strictParsingRefusesGarbage() {
        for wire in ["", "7", "x", "2", "2{}", "2[]", "2[1.5e3", "2[true]", "2\"a\"", "1{}", "0[]", "3[]", "31{}",
                     "4", "4[]", "5[\"a\"]", "5x-[\"a\"]", "512", "21234567890123[\"a\"]", "2[\"a\"]trailing",
                     "2[\"a\"] [1]", "0{\"a\":"] {
            #expect(throws: SocketIOError.self, "\(wire.debugDescription)") { try SocketIOPacket.decode(wire) }
        }
    }

    @Test func binaryEventReassembledAcrossMessages() throws {
        var assembler = SocketIOBinaryAssembler()
        #expect(try assembler.feed(text: "52-[\"up\",{\"_placeholder\":true,\"num\":1},{\"k\":[{\"_placeholder\":true,\"num\":0}]}]") == .needMore)
        #expect(assembler.isWaiting)
        #expect(try assembler.feed(binary: [1, 2]) == .needMore)
        let done = try assembler.feed(binary: [3])
        #expect(done == .packet(SocketIOPacket(kind: .event, data: ["up", "Aw==", ["k": ["AQI="]]])))
        #expect(!assembler.isWaiting)
        // A plain packet passes straight through; BINARY_ACK becomes ACK.
        #expect(try assembler.feed(text: "2[\"a\"]") == .packet(SocketIOPacket(kind: .event, data: ["a"])))
        #expect(try assembler.feed(text: "61-4[{\"_placeholder\":true,\"num\":0}]") == .needMore)
        #expect(try assembler.feed(binary: []) == .packet(SocketIOPacket(kind: .ack, id: 4, data: [""])))
    }

    @Test func binaryAssemblerErrors() throws {
        var assembler = SocketIOBinaryAssembler(maxAttachments: 2)
        #expect(throws: SocketIOError.self) { try assembler.feed(binary: [1]) }
        #expect(throws: SocketIOError.self) { try assembler.feed(text: "53-[\"a\"]") }
        // A placeholder that names no attachment is refused with its header.
        #expect(throws: SocketIOError.self) { try assembler.feed(text: "51-[\"a\",{\"_placeholder\":true,\"num\":5}]") }
        #expect(throws: SocketIOError.self) { try assembler.feed(text: "51-[\"a\",{\"_placeholder\":true,\"num\":\"0\"}]") }
        #expect(!assembler.isWaiting)
        #expect(try assembler.feed(text: "51-[\"a\"]") == .needMore)
        // A text packet while attachments are due is an error, and the state resets.
        #expect(throws: SocketIOError.self) { try assembler.feed(text: "2[\"b\"]") }
        #expect(try assembler.feed(text: "2[\"b\"]") == .packet(SocketIOPacket(kind: .event, data: ["b"])))
    }

    /// Feeds a header and its attachments one Engine.IO message at a time, as a connection
    /// does; the first refusal, at whichever message, is thrown.
    private func assemble(_ assembler: inout SocketIOBinaryAssembler, _ header: String,
                          _ attachments: [[UInt8]]) throws -> SocketIOBinaryAssembler.Output {
        var output = try assembler.feed(text: header)
        for attachment in attachments { output = try assembler.feed(binary: attachment) }
        return output
    }

    private static func placeholders(_ nums: [Int]) -> String {
        nums.map { "{\"_placeholder\":true,\"num\":\($0)}" }.joined(separator: ",")
    }

    /// One attachment named by many placeholders was turned into base64 once per placeholder:
    /// 190 KB grew the server by 255 MB. A number may be named once; naming it again is an
    /// invalid packet, however deep it sits, whichever way the attachments are handed on.
    @Test func aPlaceholderNamesItsAttachmentOnlyOnce() throws {
        let attack = "51-[\"up\"," + Self.placeholders(Array(repeating: 0, count: 2_000)) + "]"
        let shapes: [(String, [[UInt8]])] = [
            ("51-[\"up\"," + Self.placeholders([0, 0]) + "]", [[1, 2, 3]]),
            ("52-[\"up\",{\"a\":[" + Self.placeholders([1]) + "]}," + Self.placeholders([0, 1]) + "]", [[1], [2]]),
            ("61-3[" + Self.placeholders([0]) + ",[" + Self.placeholders([0]) + "]]", [[9]]),
            (attack, [Array(repeating: 7, count: 1_000)]),
        ]
        for keepsAttachments in [false, true] {
            for (header, attachments) in shapes {
                var assembler = SocketIOBinaryAssembler(keepsAttachments: keepsAttachments)
                #expect(throws: SocketIOError.self, "\(header.prefix(80))") { try assemble(&assembler, header, attachments) }
                // The refusal leaves nothing waiting.
                #expect(try assembler.feed(text: "2[\"b\"]") == .packet(SocketIOPacket(kind: .event, data: ["b"])))
            }
        }
        // Each number once, in any order, is fine; an attachment no placeholder names is kept.
        var assembler = SocketIOBinaryAssembler()
        #expect(try assemble(&assembler, "53-[\"up\"," + Self.placeholders([2, 0]) + "]", [[1], [2], [3]])
                == .packet(SocketIOPacket(kind: .event, data: ["up", "Aw==", "AQ=="])))
    }

    /// A packet with its attachments may take at most `maxPayload` bytes in its base64 form
    /// (the form polling carries them in, and the one an application may ask for), counted
    /// as the attachments arrive, so nothing more is held once it is over.
    @Test func aBinaryPacketIsBoundedByMaxPayloadInItsBase64Form() throws {
        let header = "51-[\"up\"," + Self.placeholders([0]) + "]"
        // 750,000 bytes are 1,000,000 characters of base64: with the header, over the default.
        for keepsAttachments in [false, true] {
            var assembler = SocketIOBinaryAssembler(keepsAttachments: keepsAttachments)
            #expect(throws: SocketIOError.self) { try assemble(&assembler, header, [Array(repeating: 1, count: 750_000)]) }
            #expect(!assembler.isWaiting)
            // Ten attachments that are each well under the limit but not together.
            let ten = "510-[\"up\"," + Self.placeholders(Array(0..<10)) + "]"
            #expect(throws: SocketIOError.self) { try assemble(&assembler, ten, Array(repeating: Array(repeating: 1, count: 80_000), count: 10)) }
            #expect(!assembler.isWaiting)
        }
        // Exactly at the limit is fine (a smaller limit, to keep the test small).
        var small = SocketIOBinaryAssembler(maxPayload: header.utf8.count + 8)
        #expect(try assemble(&small, header, [[1, 2, 3, 4, 5, 6]]) == .packet(SocketIOPacket(kind: .event, data: ["up", "AQIDBAUG"])))
        #expect(throws: SocketIOError.self) { try assemble(&small, header, [[1, 2, 3, 4, 5, 6, 7]]) }
    }

    @Test func socketChatCommands() throws {
        #expect(try SocketChatCommand.parse(["connectUser", "bob"]).get() == .connectUser(nickname: "bob"))
        #expect(try SocketChatCommand.parse(["chatMessage", "bob", "hi"]).get() == .chatMessage(nickname: "bob", text: "hi"))
        #expect(try SocketChatCommand.parse(["chatMessage", "bob", ["a": 1]]).get() == .chatMessage(nickname: "bob", text: "{\"a\":1}"))
        #expect(try SocketChatCommand.parse(["startType", "bob"]).get() == .typing(nickname: "bob", true))
        #expect(try SocketChatCommand.parse(["stopType"]).get() == .typing(nickname: nil, false))
        #expect(try SocketChatCommand.parse(["exitUser", "bob"]).get() == .exitUser(nickname: "bob"))
        for bad: JSONValue in [["connectUser"], ["connectUser", ""], ["connectUser", 5], ["connectUser", "a\nb"],
                               ["chatMessage", "bob"], ["chatMessage", "bob", ""], ["nope"], [1], []] {
            #expect(throws: SocketIOError.self, "\(bad)") { try SocketChatCommand.parse(bad).get() }
        }
    }

    @Test func roomEventsBecomeSocketChatEvents() throws {
        let lobby = RoomKey(channel: "demo", room: "observable-room")
        let alice = Member(id: "n1", clientData: ["name": "alice"])
        let users = [SocketChatUser(id: "n1", nickname: "alice", isConnected: true), SocketChatUser(id: "s1", nickname: "bob", isConnected: false)]
        let message = Message(id: "m", offset: 1, timestampMillis: 0, room: lobby, sender: alice, body: "hi")
        #expect(SocketChatEncoding.packets(for: .message(message), users: users, typing: [])
                == ["42[\"userTypingUpdate\",{}]", "42[\"newChatMessage\",\"alice\",\"hi\",\"Thu, 01 Jan 1970 00:00:00 GMT\"]"])
        let typing = Message(id: "t", offset: 0, timestampMillis: 0, room: lobby, sender: alice, body: ["typing": true])
        #expect(SocketChatEncoding.packets(for: .message(typing), users: users, typing: [alice]) == ["42[\"userTypingUpdate\",{\"alice\":1}]"])
        let list = "42[\"userList\",[{\"id\":\"n1\",\"nickname\":\"alice\",\"isConnected\":true},{\"id\":\"s1\",\"nickname\":\"bob\",\"isConnected\":false}]]"
        #expect(SocketChatEncoding.packets(for: .memberJoined(alice), users: users, typing: [])
                == [list, "42[\"userConnectUpdate\",{\"id\":\"n1\",\"nickname\":\"alice\",\"isConnected\":true}]"])
        #expect(SocketChatEncoding.packets(for: .memberLeft(alice), users: users, typing: [])
                == [list, "42[\"userExitUpdate\",\"alice\"]", "42[\"userTypingUpdate\",{}]"])
        let frame = try #require(SocketChatEncoding.frame(["42[1]", "42[2]"], as: .socketIOPolling))
        #expect(frame.bytes == Array("42[1]\u{1e}42[2]".utf8))
        let frames = try #require(SocketChatEncoding.frame(["42[1]"], as: .socketIO))
        #expect(frames.bytes == [0x81, 5] + Array("42[1]".utf8))
        // A REST message (no sender) and a non-string body still make three strings.
        let rest = Message(id: "r", offset: 2, timestampMillis: 0, room: lobby, sender: nil, body: ["x": 1])
        #expect(SocketChatEncoding.packets(for: .message(rest), users: [], typing: []).last?.hasPrefix("42[\"newChatMessage\",\"parley\",\"{\\\"x\\\":1}\",") == true)
    }
}
