import Dispatch
import Foundation
import ParleyIO
import ParleyCore
import ParleyTestSupport
import Testing
@testable import ParleyServer

/// The Socket.IO layer between a fake Engine.IO session and a recording application.
@Suite struct SocketIOConnectionTests {
    @Test func connectWithAuthIsDecidedByTheApplicationAndAnsweredBeforeItsEmits() throws {
        let harness = try SocketIOHarness()
        defer { harness.shutdown() }
        try harness.onLoop { $0.recording.onConnected = { $0.emit("hello", ["you"]) } }
        #expect(try harness.open().isEmpty, "Engine.IO 4: the client connects")
        let sent = try harness.receive("0/custom,{\"token\":\"t\"}")
        #expect(sent.count == 2)
        #expect(sent[0].hasPrefix("0/custom,{\"sid\":\""))
        #expect(sent[1] == "2/custom,[\"hello\",\"you\"]")
        let log = try harness.onLoop { $0.recording.log }
        #expect(log == ["connect /custom auth={\"token\":\"t\"} implicit=false", "connected /custom"])
        // The socket id is stable for the namespace, and not the one of another namespace.
        let again = try harness.receive("0/custom,")
        #expect(again.first == sent[0])
        let root = try harness.receive("0")
        #expect(root.first?.hasPrefix("0{\"sid\":\"") == true)
        #expect(root.first?.dropFirst(9) != sent[0].dropFirst(17))
    }

    @Test func acceptDataJoinsTheSidInTheReply() throws {
        let harness = try SocketIOHarness()
        defer { harness.shutdown() }
        try harness.onLoop { $0.recording.decide = { _ in .accept(data: ["pid": "p1"]) } }
        let reply = try #require(try harness.receive("0").first)
        #expect(reply.hasPrefix("0{\"sid\":\"") && reply.hasSuffix("\",\"pid\":\"p1\"}"))
    }

    @Test func refusalsAndUnknownNamespacesKeepTheConnection() throws {
        let harness = try SocketIOHarness()
        defer { harness.shutdown() }
        try harness.onLoop { $0.recording.decide = { $0.auth == nil ? .refuse("no token") : .accept() } }
        #expect(try harness.receive("0") == ["4{\"message\":\"no token\"}"])
        #expect(try harness.receive("0/admin,") == ["4/admin,{\"message\":\"Invalid namespace\"}"])
        #expect(try harness.receive("0/random") == ["4/random,{\"message\":\"Invalid namespace\"}"])
        #expect(try harness.receive("0{\"token\":1}").first?.hasPrefix("0{\"sid\":") == true)
        #expect(try harness.receive("2[\"a\",1]").isEmpty)
        #expect(try harness.onLoop { $0.recording.log.last } == "event / a [1]")
        #expect(try harness.onLoop { !$0.channel.isClosed })
    }

    /// "If the server does not receive a CONNECT packet first, then it MUST close the
    /// connection"; the same for an event on a namespace nobody serves. A CONNECT_ERROR says
    /// why first.
    @Test func eventsBeforeConnectCloseTheConnection() throws {
        for (packet, error) in [("2[\"a\"]", "4{\"message\":\"not connected: send CONNECT (40) before events\"}"),
                                ("2/admin,[\"a\"]", "4/admin,{\"message\":\"Invalid namespace\"}")] {
            let harness = try SocketIOHarness()
            defer { harness.shutdown() }
            #expect(try harness.receive(packet) == [error])
            #expect(try harness.onLoop { $0.channel.closeReason } == "parse error")
            #expect(try harness.onLoop { $0.recording.events.isEmpty })
        }
    }

    /// The protocol closes the connection on an invalid packet (unknown type, a payload of the
    /// wrong shape, a bad ack id), after a CONNECT_ERROR saying why.
    @Test func invalidPacketsCloseTheConnection() throws {
        for garbage in ["abc", "2{}", "2abc[\"message-with-ack\"]", "9", "", "5x-[\"a\"]"] {
            let harness = try SocketIOHarness()
            defer { harness.shutdown() }
            try harness.receive("0")
            let sent = try harness.receive(garbage)
            #expect(sent.count == 1 && sent[0].hasPrefix("4{\"message\":\"invalid packet: "), "\(garbage.debugDescription) -> \(sent)")
            #expect(try harness.onLoop { $0.channel.closeReason } == "parse error", "\(garbage.debugDescription)")
        }
    }

    @Test func aConnectionThatConnectsNoNamespaceIsClosedAfterTheTimeout() throws {
        let quiet = try SocketIOHarness(connectTimeoutMillis: 100)
        defer { quiet.shutdown() }
        #expect(try quiet.open().isEmpty)
        try eventuallyBlocking("the silent connection closed") { try quiet.onLoop { $0.channel.isClosed } }
        #expect(try quiet.onLoop { $0.channel.closeReason }?.contains("no namespace connected") == true)
        // One that connects in time stays.
        let prompt = try SocketIOHarness(connectTimeoutMillis: 100)
        defer { prompt.shutdown() }
        _ = try prompt.open()
        try prompt.receive("0/custom,")
        let closed = Locked(false)
        let done = DispatchSemaphore(value: 0)
        prompt.loop.execute {
            let timer = LoopTimer(loop: prompt.loop)
            timer.start(after: 300) {
                closed.withLock { $0 = prompt.channel.isClosed }
                _ = timer
                done.signal()
            }
        }
        #expect(done.wait(timeout: .now() + 5) == .success)
        #expect(!closed.value, "a connected client is not timed out")
        // Engine.IO 3 connects `/` at once: no timeout.
        let v3 = try SocketIOHarness(version: .v3, connectTimeoutMillis: 100)
        defer { v3.shutdown() }
        #expect(try v3.open() == ["0"])
    }

    @Test func engineIO3ConnectsSlashAtOnceAndErrorsAreStrings() throws {
        let harness = try SocketIOHarness(version: .v3)
        defer { harness.shutdown() }
        #expect(try harness.open() == ["0"])
        #expect(try harness.onLoop { $0.recording.log } == ["connect / auth=nil implicit=true", "connected /"])
        // A repeated CONNECT is asked about but not answered again.
        #expect(try harness.receive("0").isEmpty)
        #expect(try harness.receive("0/custom,") == ["0/custom,"])
        #expect(try harness.receive("0/nope,") == ["4/nope,\"Invalid namespace\""])
    }

    @Test func anAckAnsweredLaterFromAnotherThreadHopsToTheLoopOnce() throws {
        let harness = try SocketIOHarness()
        defer { harness.shutdown() }
        try harness.receive("0/custom,")
        #expect(try harness.receive("2/custom,7[\"save\",{\"x\":1}]").isEmpty, "nothing is answered for the application")
        let ack = try #require(try harness.onLoop { $0.recording.events.last?.ack })
        #expect(ack.id == 7)
        let answered = BackgroundThread { ack.send(["stored"]) }
        #expect(try answered.result(timeout: 5))
        #expect(try harness.waitForSent() == ["3/custom,7[\"stored\"]"])
        #expect(ack.isAnswered)
        #expect(!ack.send(["again"]), "an ack is answered once")
        // An ack for an event on a socket that has left since is dropped.
        try harness.receive("2/custom,8[\"save\"]")
        let late = try #require(try harness.onLoop { $0.recording.events.last?.ack })
        try harness.receive("1/custom,")
        #expect(late.send([]))
        #expect(try harness.onLoop { $0.channel.takeSent() }.isEmpty)
        #expect(try harness.onLoop { $0.recording.log.last } == "disconnected /custom clientDisconnect")
    }

    @Test func binaryAttachmentsBothWays() throws {
        let harness = try SocketIOHarness()
        defer { harness.shutdown() }
        try harness.receive("0")
        #expect(try harness.receive(.text("51-[\"up\",\"a\",{\"_placeholder\":true,\"num\":0}]"), .binary([1, 2, 255])).isEmpty)
        let event = try #require(try harness.onLoop { $0.recording.events.last.map { [$0.arguments, $0.argumentsWithAttachmentsAsBase64()] } })
        #expect(event[0] == ["a", ["_placeholder": true, "num": 0]])
        #expect(event[1] == ["a", "AQL/"])
        #expect(try harness.onLoop { $0.recording.events.last?.attachments } == [[1, 2, 255]])
        let sent = try harness.onLoop { harness in
            harness.connection.socket("/")?.emit("down", [SocketIOBinaryAssembler.placeholder(0)], attachments: [[7]])
            return harness.channel.takeSent()
        }
        #expect(sent == ["51-[\"down\",{\"_placeholder\":true,\"num\":0}]", "<bin:7>"])
        // A binary ack.
        try harness.receive(.text("51-3[\"b\",{\"_placeholder\":true,\"num\":0}]"), .binary([9]))
        let ack = try #require(try harness.onLoop { $0.recording.events.last?.ack })
        try harness.onLoop { _ in ack.send([SocketIOBinaryAssembler.placeholder(0)], attachments: [[8]]) }
        #expect(try harness.onLoop { $0.channel.takeSent() } == ["61-3[{\"_placeholder\":true,\"num\":0}]", "<bin:8>"])
    }

    /// A binary packet that names an attachment twice, or is larger than `maxPayload` in its
    /// base64 form, is an invalid packet: CONNECT_ERROR saying why, the connection is closed,
    /// and the application never sees it.
    @Test func binaryAmplificationClosesTheConnection() throws {
        let placeholder = "{\"_placeholder\":true,\"num\":0}"
        let cases: [(EngineIOMessage, EngineIOMessage, String)] = [
            (.text("51-[\"chatMessage\",\(placeholder),\(placeholder)]"), .binary([1, 2, 3]),
             "invalid packet: placeholder 0 is used more than once"),
            (.text("51-[\"chatMessage\",\(placeholder)]"), .binary(Array(repeating: 1, count: 750_000)),
             "invalid packet: binary packet too large"),
        ]
        for (header, attachment, error) in cases {
            let harness = try SocketIOHarness()
            defer { harness.shutdown() }
            try harness.receive("0")
            let sent = try harness.receive(header, attachment)
            #expect(sent.count == 1 && sent[0].hasPrefix("4{\"message\":\"\(error)"), "\(sent)")
            #expect(try harness.onLoop { $0.channel.closeReason } == "parse error")
            #expect(try harness.onLoop { $0.recording.events.isEmpty })
        }
    }

    @Test func emitWithAckGetsTheClientsAnswer() throws {
        let harness = try SocketIOHarness()
        defer { harness.shutdown() }
        try harness.receive("0")
        let replies = Locked<[SocketIOAckReply]>([])
        let sent = try harness.onLoop { harness in
            let socket = harness.connection.socket("/")
            socket?.emit("ask", [1]) { reply in replies.withLock { $0.append(reply) } }
            socket?.emit("ask", [2]) { reply in replies.withLock { $0.append(reply) } }
            return harness.channel.takeSent()
        }
        #expect(sent == ["20[\"ask\",1]", "21[\"ask\",2]"])
        try harness.receive("31[\"two\"]", "30[]", "30[\"dup\"]", "39[]")
        #expect(replies.value == [SocketIOAckReply(arguments: ["two"], attachments: []), SocketIOAckReply(arguments: [], attachments: [])])
    }

    @Test func pendingAcksHaveALimit() throws {
        let harness = try SocketIOHarness()
        defer { harness.shutdown() }
        try harness.receive("0")
        let results = try harness.onLoop { harness -> [Bool] in
            let socket = harness.connection.socket("/")!
            return (0...SocketIOSocket.maxPendingAcks).map { _ in socket.emit("ask") { _ in } }
        }
        #expect(results.filter { $0 }.count == SocketIOSocket.maxPendingAcks)
        #expect(results.last == false)
    }

    @Test func closingTellsTheApplicationOncePerAttachedSocket() throws {
        let harness = try SocketIOHarness()
        defer { harness.shutdown() }
        try harness.onLoop { $0.recording.decide = { $0.auth == nil ? .accept() : .refuse("no") } }
        try harness.receive("0", "0/custom,{}")
        try harness.onLoop { $0.connection.engineIOSessionClosed(reason: "ping timeout") }
        try harness.onLoop { $0.connection.engineIOSessionClosed(reason: "again") }
        let log = try harness.onLoop { $0.recording.log.filter { $0.hasPrefix("disconnected") } }
        #expect(log == ["disconnected / connectionClosed(\"ping timeout\")"])
        // Nothing more reaches the application.
        try harness.receive("2[\"late\"]")
        #expect(try harness.onLoop { $0.recording.events.isEmpty })
    }
}

/// The protocol suite's test application, on the Socket.IO layer: one file, no transport code.
@Suite struct SocketIOTestApplicationTests {
    @Test func referenceBehaviour() throws {
        let harness = try SocketIOHarness { SocketIOTestApplication() }
        let connect = try harness.receive("0/custom,{\"token\":\"abc\"}")
        #expect(connect.count == 1)
        #expect(connect.first?.hasPrefix("0/custom,{\"sid\":") == true)
        // `auth` follows a moment later, in a write of its own (see authDelayMillis).
        #expect(try harness.waitForSent() == ["2/custom,[\"auth\",{\"token\":\"abc\"}]"])
        #expect(try harness.receive("0").count == 1)
        #expect(try harness.waitForSent() == ["2[\"auth\",{}]"])
        #expect(try harness.receive("0/other,") == ["4/other,{\"message\":\"Invalid namespace\"}"])
        #expect(try harness.receive("2[\"message\",1,\"2\",{\"3\":[4]}]") == ["2[\"message-back\",1,\"2\",{\"3\":[4]}]"])
        #expect(try harness.receive(.text("51-[\"message\",{\"_placeholder\":true,\"num\":0}]"), .binary([1, 2, 3]))
                == ["51-[\"message-back\",{\"_placeholder\":true,\"num\":0}]", "<bin:1,2,3>"])
        #expect(try harness.receive("2/custom,5[\"message-with-ack\",1,\"2\"]") == ["3/custom,5[1,\"2\"]"])
        #expect(try harness.receive(.text("51-6[\"message-with-ack\",{\"_placeholder\":true,\"num\":0}]"), .binary([9]))
                == ["61-6[{\"_placeholder\":true,\"num\":0}]", "<bin:9>"])
        #expect(try harness.receive("2[\"unknown\"]").isEmpty)
    }
}
