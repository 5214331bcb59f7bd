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
        #expect(try assembler.feed(text: "51-[\"a\",{\"_placeholder\":true,\"num\":5}]") == .needMore)
        #expect(throws: SocketIOError.self) { try assembler.feed(binary: [1]) }
        #expect(try assembler.feed(text: "51-[\"a\"]") == .needMore)
        // A text packet while attachments are due is an error, and the state resets.
        #expect(throws: SocketIOError.self) { try assembler.feed(text: "2[\"b\"]") }
        #expect(try assembler.feed(text: "2[\"b\"]") == .packet(SocketIOPacket(kind: .event, data: ["b"])))
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
