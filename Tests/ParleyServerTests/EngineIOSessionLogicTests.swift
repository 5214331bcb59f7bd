import Foundation
import ParleyCore
import ParleyIO
import Testing
@testable import ParleyServer

/// The Engine.IO session's logic without sockets: heartbeats, the polling outbox, frames.
@Suite struct EngineIOHeartbeatTests {
    @Test func engineIO4ServerPingsAndWaitsForThePong() {
        var heartbeat = EngineIOHeartbeat(version: .v4, intervalMillis: 25_000, timeoutMillis: 20_000)
        #expect(heartbeat.pingPeriodMillis == 25_000)
        #expect(heartbeat.start().isEmpty)
        #expect(heartbeat.pingDue() == [.sendPing, .armTimeout(afterMillis: 20_000)])
        // No second ping while the first is unanswered; other packets do not count as a pong.
        #expect(heartbeat.pingDue().isEmpty)
        #expect(heartbeat.received(.message).isEmpty)
        #expect(heartbeat.received(.ping).isEmpty)
        #expect(heartbeat.awaitingPong)
        #expect(heartbeat.received(.pong) == [.disarmTimeout])
        #expect(!heartbeat.awaitingPong)
        #expect(heartbeat.pingDue() == [.sendPing, .armTimeout(afterMillis: 20_000)])
    }

    @Test func engineIO3WaitsForClientPingsAndAnyPacketCounts() {
        var heartbeat = EngineIOHeartbeat(version: .v3, intervalMillis: 300, timeoutMillis: 200)
        #expect(heartbeat.pingPeriodMillis == nil)
        #expect(heartbeat.start() == [.armTimeout(afterMillis: 500)])
        #expect(heartbeat.pingDue().isEmpty)
        for kind in [EngineIOPacket.Kind.ping, .message, .pong, .noop] {
            #expect(heartbeat.received(kind) == [.armTimeout(afterMillis: 500)])
        }
    }
}

@Suite struct EngineIOOutboxTests {
    @Test func countsBytesAndDrainsAsOnePayload() {
        var outbox = EngineIOOutbox()
        #expect(outbox.isEmpty)
        outbox.append([EngineIOPacket(.message, "2[\"é\"]"), EngineIOPacket(binary: [1, 2, 3])])
        outbox.append([EngineIOPacket(.noop)])
        #expect(outbox.bytes == 7 + 3)
        #expect(outbox.packets.count == 3)
        var v3 = outbox
        #expect(String(decoding: outbox.takePayload(version: .v4), as: UTF8.self) == "42[\"é\"]\u{1e}bAQID\u{1e}6")
        #expect(outbox.isEmpty && outbox.bytes == 0)
        #expect(String(decoding: v3.takePayload(version: .v3), as: UTF8.self) == "7:42[\"é\"]6:b4AQID1:6")
    }
}

@Suite struct EngineIOFramesTests {
    @Test func preEncodedFramesPerTransport() throws {
        let texts = ["42[\"a\"]", "42[\"b\"]"]
        #expect(EngineIOFrames.preEncoded([], for: .webSocket) == nil)
        let polling = try #require(EngineIOFrames.preEncoded(texts, for: .polling))
        #expect(polling.bytes == Array("42[\"a\"]\u{1e}42[\"b\"]".utf8))
        #expect(EngineIOFrames.packets(inPolling: polling).packets == [EngineIOPacket(.message, "2[\"a\"]"), EngineIOPacket(.message, "2[\"b\"]")])
        #expect(EngineIOFrames.packets(inPolling: polling).failures == 0)
        // A part that is no packet is not sent, and is counted (the session logs it).
        let broken = EngineIOFrames.packets(inPolling: IOBuffer(Array("42[1]\u{1e}x\u{1e}42[2]".utf8)))
        #expect(broken.packets == [EngineIOPacket(.message, "2[1]"), EngineIOPacket(.message, "2[2]")])
        #expect(broken.failures == 1)
        let webSocket = try #require(EngineIOFrames.preEncoded(texts, for: .webSocket))
        #expect(webSocket.bytes == [0x81, 7] + Array("42[\"a\"]".utf8) + [0x81, 7] + Array("42[\"b\"]".utf8))
    }

    @Test func webSocketFramesOfTextAndBinaryPackets() {
        let packets = [EngineIOPacket(.ping), EngineIOPacket(binary: [9, 8])]
        #expect(EngineIOFrames.webSocket(packets, version: .v4).bytes == [0x81, 1, 0x32, 0x82, 2, 9, 8])
        #expect(EngineIOFrames.webSocket(packets, version: .v3).bytes == [0x81, 1, 0x32, 0x82, 3, 4, 9, 8])
    }
}

@Suite struct SocketChatUserListPacerTests {
    @Test func oneListPerWindowInThePlaceOfTheFirstAndNothingReordered() {
        var pacer = SocketChatUserListPacer()
        let a = IOBuffer(Array("a".utf8)), b = IOBuffer(Array("b".utf8)), c = IOBuffer(Array("c".utf8))
        // The first list goes at once; so do events while nothing is held.
        let step1 = pacer.userListDue(at: 1000)
        #expect(step1)
        pacer.sent(at: 1000)
        let step2 = pacer.frame(a, .webSocket)
        #expect(step2)
        // Within the window: the list waits, and so does everything after it.
        let step3 = pacer.userListDue(at: 1010)
        #expect(!step3)
        let step4 = pacer.frame(b, .webSocket)
        #expect(!step4)
        let step5 = pacer.userListDue(at: 1020)
        #expect(!step5)
        let step6 = pacer.frame(c, .polling)
        #expect(!step6)
        #expect(pacer.flushDueMillis == 1050)
        let held = pacer.takeHeld()
        #expect(held.count == 3)
        // The second list merged into the first, which stays ahead of b (b may be the update
        // that list leads, e.g. the userExitUpdate of a leave).
        if case .userList = held[0] {} else { Issue.record("the one list, before b: \(held[0])") }
        if case .frame(let frame, .webSocket) = held[1] { #expect(frame.bytes == b.bytes) } else { Issue.record("\(held[1])") }
        if case .frame(let frame, .polling) = held[2] { #expect(frame.bytes == c.bytes) } else { Issue.record("\(held[2])") }
        pacer.sent(at: 1050)
        #expect(!pacer.isHolding)
        let step7 = pacer.userListDue(at: 1099)
        #expect(!step7)
        _ = pacer.takeHeld()
        let step8 = pacer.userListDue(at: 1200)
        #expect(step8)
    }

    @Test func aLeaveHeldForTheRosterReadOutwaitsThePacingWindowButNotItsOwnLimit() {
        var pacer = SocketChatUserListPacer()
        let b = IOBuffer(Array("b".utf8)), c = IOBuffer(Array("c".utf8))
        pacer.sent(at: 1000)
        // A join within the window: held, due at the window's end.
        let joinList = pacer.userListDue(at: 1010)
        let joinUpdate = pacer.frame(b, .webSocket)
        #expect(!joinList && !joinUpdate)
        #expect(pacer.flushDueMillis == 1050)
        #expect(pacer.heldDelay(at: 1010, rosterPending: false) == 40)
        // Then a leave while the cluster's roster is being read: its update waits with the list.
        pacer.holdForRoster(at: 1020, waitMillis: 500)
        let leaveUpdate = pacer.frame(c, .webSocket)
        #expect(!leaveUpdate)
        // At the window's end the read is still out: the held items wait for it...
        #expect(pacer.heldDelay(at: 1050, rosterPending: true) == 470)
        // ...not once it is back, nor past the limit, nor for a read nobody held for.
        #expect(pacer.heldDelay(at: 1050, rosterPending: false) == 0)
        #expect(pacer.heldDelay(at: 1520, rosterPending: true) == 0)
        // Later holds in the same run do not push the limit out (else a stream of joins and
        // leaves with a slow roster would hold everything for as long as it lasts).
        pacer.holdForRoster(at: 1400, waitMillis: 500)
        #expect(pacer.heldDelay(at: 1500, rosterPending: true) == 20)
        #expect(pacer.heldDelay(at: 1520, rosterPending: true) == 0)
        let held = pacer.takeHeld()
        #expect(held.count == 3)
        if case .userList = held[0] {} else { Issue.record("one list, first: \(held[0])") }
        #expect(pacer.heldDelay(at: 1100, rosterPending: true) == 0)
    }
}
