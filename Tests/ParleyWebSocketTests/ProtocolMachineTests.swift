import Testing
@testable import ParleyWebSocket

private func server(_ configuration: WebSocketConfiguration = WebSocketConfiguration(),
                    deflate: PerMessageDeflateParameters? = nil) -> () -> WebSocketProtocolMachine {
    { WebSocketProtocolMachine(role: .server, configuration: configuration, deflate: deflate) }
}

@Suite struct DripFeedTests {
    @Test func maskedText() {
        let actions = dripFeed(clientFrame(.text, "Hello, Parley"), makeMachine: server())
        #expect(actions == [.text("Hello, Parley")])
    }

    @Test func fragmentedTextWithInterleavedPing() {
        let stream = clientFrame(.text, "Hel", fin: false) + clientFrame(.ping, [1, 2, 3])
            + clientFrame(.continuation, "lo ", fin: false) + clientFrame(.pong, [9])
            + clientFrame(.continuation, "κόσμε") + clientFrame(.binary, [7])
        let actions = dripFeed(stream, makeMachine: server())
        #expect(actions == [.send([0x8A, 3, 1, 2, 3]), .text("Hello κόσμε"), .binary([7])])
    }

    @Test(arguments: [65_536 - 1, 65_536, 70_000])
    func largeBinary(size: Int) {
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let actions = dripFeed(clientFrame(.binary, payload) + clientFrame(.text, "after"), makeMachine: server())
        #expect(actions == [.binary(payload), .text("after")])
    }

    @Test func closeHandshakeInitiatedByPeer() {
        let stream = clientFrame(.text, "bye") + clientFrame(.close, closePayload(1000, "done"))
            + clientFrame(.text, "ignored after close")
        let actions = dripFeed(stream, makeMachine: server())
        #expect(actions == [.text("bye"), .peerClosed(code: 1000, reason: "done"),
                            .send([0x88, 2, 0x03, 0xE8]), .closeConnection])
    }

    @Test func emptyCloseIsAnsweredWith1000() {
        let actions = dripFeed(clientFrame(.close, []), makeMachine: server())
        #expect(actions == [.peerClosed(code: nil, reason: ""), .send([0x88, 2, 0x03, 0xE8]), .closeConnection])
    }

    @Test func echoesPrivateCloseCode() {
        let actions = dripFeed(clientFrame(.close, closePayload(4001)), makeMachine: server())
        #expect(actions == [.peerClosed(code: 4001, reason: ""), .send([0x88, 2, 0x0F, 0xA1]), .closeConnection])
    }

    @Test func compressedMessagesFromAClientMachine() {
        let params = PerMessageDeflateParameters()
        let client = WebSocketProtocolMachine(role: .client, deflate: params)
        let texts = ["short", String(repeating: "compress me please ", count: 50), String(repeating: "é", count: 3000)]
        var stream: [UInt8] = []
        for t in texts { stream += client.sendText(t) }
        let blob = [UInt8](repeating: 0xAB, count: 70_000)
        stream += client.sendBinary(blob)
        #expect(stream.count < 10_000)  // really compressed
        let actions = dripFeed(stream, makeMachine: server(deflate: params))
        #expect(actions == texts.map(WebSocketAction.text) + [.binary(blob)])
    }

    @Test(arguments: [false, true])
    func contextTakeoverAcrossMessages(noContextTakeover: Bool) {
        let params = PerMessageDeflateParameters(clientNoContextTakeover: noContextTakeover)
        let client = WebSocketProtocolMachine(role: .client, deflate: params)
        let message = "the same long sentence repeated in every message, which a shared window compresses"
        var sizes: [Int] = []
        var stream: [UInt8] = []
        for i in 0..<6 {
            let frame = client.sendText(message + " #\(i)")
            sizes.append(frame.count)
            stream += frame
        }
        if noContextTakeover {
            #expect(sizes.max()! - sizes.min()! <= 2)  // every message compressed from scratch
        } else {
            #expect(sizes[1] < sizes[0] / 2)  // back-references into the previous message
        }
        let actions = dripFeed(stream, makeMachine: server(deflate: params))
        #expect(actions == (0..<6).map { .text(message + " #\($0)") })
    }

    @Test func serverInitiatedClose() {
        let machine = WebSocketProtocolMachine(role: .server, deflate: nil)
        #expect(machine.close(code: .goingAway, reason: "restart") == [.send([0x88, 9, 0x03, 0xE9] + Array("restart".utf8))])
        #expect(machine.state == .closing)
        #expect(machine.close(code: .normal, reason: "") == [])
        #expect(machine.sendText("late") == [])
        let actions = machine.receive(clientFrame(.text, "in flight") + clientFrame(.ping, [1])
                                      + clientFrame(.close, closePayload(1001)))
        #expect(actions == [.peerClosed(code: 1001, reason: ""), .closeConnection])
        #expect(machine.state == .closed)
        #expect(machine.receive(clientFrame(.text, "more")) == [])
    }

    @Test func closeReasonIsTruncatedOnACharacterBoundary() {
        let machine = WebSocketProtocolMachine(role: .server, deflate: nil)
        guard case .send(let bytes)? = machine.close(code: .normal, reason: String(repeating: "é", count: 100)).first else {
            Issue.record("no close frame"); return
        }
        #expect(bytes[1] == 2 + 122)
        #expect(UTF8Validator.isValid(Array(bytes[4...])))
    }

    @Test func unsentableCodeClosesWithoutStatus() {
        let machine = WebSocketProtocolMachine(role: .server, deflate: nil)
        #expect(machine.close(code: .noStatus, reason: "x") == [.send([0x88, 0])])
    }

    /// The frame written straight into an IOBuffer is byte for byte the array frame, at every
    /// length encoding (7-bit, 16-bit, 64-bit) and at their edges.
    @Test func serverTextFrameBufferIsTheSameFrame() {
        for length in [0, 1, 125, 126, 127, 65_535, 65_536, 70_000] {
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let buffer = WebSocketProtocolMachine.serverTextFrameBuffer(payload)
            #expect(buffer.bytes == WebSocketProtocolMachine.serverTextFrame(payload), "length \(length)")
        }
    }

    @Test func sharedServerTextFrame() {
        let frame = WebSocketProtocolMachine.serverTextFrame(Array("fan-out".utf8))
        let client = WebSocketProtocolMachine(role: .client, deflate: nil)
        #expect(client.receive(frame) == [.text("fan-out")])
        #expect(!client.usesDeflate)
        #expect(WebSocketProtocolMachine(role: .server, deflate: PerMessageDeflateParameters()).usesDeflate)
    }
}

@Suite struct ProtocolErrorTests {
    @Test func unmaskedClientFrame() { expectServerFails(with: 1002, clientFrame(.text, "x", masked: false)) }
    @Test func reservedOpcodes() {
        for op: UInt8 in [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] {
            expectServerFails(with: 1002, rawClientFrame(firstByte: 0x80 | op, payload: [1]))
        }
    }
    @Test func reservedBitsWithoutExtension() {
        expectServerFails(with: 1002, rawClientFrame(firstByte: 0xC1, payload: [0x41]))
        expectServerFails(with: 1002, rawClientFrame(firstByte: 0xA1, payload: [0x41]))
        expectServerFails(with: 1002, rawClientFrame(firstByte: 0x91, payload: [0x41]))
        // RSV2 is never allowed, even with deflate.
        expectServerFails(with: 1002, rawClientFrame(firstByte: 0xA1, payload: [0x41]), deflate: PerMessageDeflateParameters())
    }
    @Test func rsv1OnContinuationWithDeflate() {
        let d = PerMessageDeflateParameters()
        // RSV1 on a control frame is inflated instead (CompressedControlFrameTests).
        expectServerFails(with: 1002, clientFrame(.binary, [1], fin: false) + clientFrame(.continuation, [2], rsv1: true), deflate: d)
    }
    @Test func badControlFrames() {
        expectServerFails(with: 1002, clientFrame(.ping, [UInt8](repeating: 0, count: 126)))
        expectServerFails(with: 1002, clientFrame(.close, [UInt8](repeating: 0x41, count: 126)))
        expectServerFails(with: 1002, clientFrame(.ping, [1], fin: false))
        expectServerFails(with: 1002, clientFrame(.pong, [1], fin: false))
    }
    @Test func continuationWithoutStart() {
        expectServerFails(with: 1002, clientFrame(.continuation, "x"))
        expectServerFails(with: 1002, clientFrame(.text, "a") + clientFrame(.continuation, "x"))
    }
    @Test func newMessageDuringFragmentation() {
        expectServerFails(with: 1002, clientFrame(.text, "a", fin: false) + clientFrame(.text, "b"))
        expectServerFails(with: 1002, clientFrame(.binary, [1], fin: false) + clientFrame(.binary, [2], fin: false))
    }
    @Test func invalidUTF8() {
        expectServerFails(with: 1007, clientFrame(.text, [0xCE, 0xBA, 0xC0, 0xAF]))
        // A scalar split across fragments is fine, an invalid one split across them is not.
        #expect(dripFeed(clientFrame(.text, [0xCE], fin: false) + clientFrame(.continuation, [0xBA]),
                         makeMachine: server()) == [.text("κ")])
        expectServerFails(with: 1007, clientFrame(.text, [0xF4], fin: false) + clientFrame(.continuation, [0x90, 0x80, 0x80]))
        // Truncated at the end of the message.
        expectServerFails(with: 1007, clientFrame(.text, [0x41, 0xE2, 0x82], fin: false) + clientFrame(.continuation, []))
    }
    @Test func invalidUTF8FailsFastBeforeTheMessageEnds() {
        let machine = WebSocketProtocolMachine(role: .server, deflate: nil)
        // First fragment contains a surrogate; the message is not finished.
        let actions = machine.receive(clientFrame(.text, Array("κόσμε".utf8) + [0xED, 0xA0, 0x80] + Array("edited".utf8), fin: false))
        #expect(sentCloseCode(actions) == 1007)
        #expect(actions.last == .closeConnection)
        // Even a partial frame header of a lone bad lead byte is detected once its frame is in.
        let m2 = WebSocketProtocolMachine(role: .server, deflate: nil)
        #expect(sentCloseCode(m2.receive(clientFrame(.text, [0x41, 0xFF], fin: false))) == 1007)
    }
    @Test func invalidUTF8FailsFastInsideAFrameStillArriving() {
        // Autobahn 6.4.3/6.4.4: one long text frame whose invalid bytes arrive before its end.
        let good = Array("κόσμε".utf8)
        let frame = clientFrame(.text, good + [0xF4, 0x90, 0x80, 0x80] + Array(repeating: 0x41, count: 5000))
        let machine = WebSocketProtocolMachine(role: .server, deflate: nil)
        #expect(machine.receive(Array(frame.prefix(frame.count - 5000 - 4))) == [])  // valid so far
        let actions = machine.receive(Array(frame.dropFirst(frame.count - 5000 - 4).prefix(2)))
        #expect(sentCloseCode(actions) == 1007)
        #expect(actions.last == .closeConnection)
        // Same inside a continuation frame, and the drip-fed results agree.
        expectServerFails(with: 1007, clientFrame(.text, good, fin: false)
                          + clientFrame(.continuation, [0xED, 0xA0, 0x80] + Array(repeating: 0x41, count: 300)))
        // Valid text split over many partial deliveries still arrives intact.
        let text = String(repeating: "κόσμε 😀 ", count: 500)
        #expect(dripFeed(clientFrame(.text, Array(text.utf8).prefix(1001).map { $0 }, fin: false)
                         + clientFrame(.ping, []) + clientFrame(.continuation, Array(Array(text.utf8).dropFirst(1001))),
                         makeMachine: server()) == [.send([0x8A, 0]), .text(text)])
    }

    @Test func badClosePayloads() {
        expectServerFails(with: 1002, clientFrame(.close, [0x03]))
        for code: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] {
            expectServerFails(with: 1002, clientFrame(.close, closePayload(code)))
        }
        expectServerFails(with: 1007, clientFrame(.close, closePayload(1000) + [0xC0, 0xAF]))
        for code: UInt16 in [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4999] {
            let actions = WebSocketProtocolMachine(role: .server, deflate: nil).receive(clientFrame(.close, closePayload(code)))
            #expect(actions.first == .peerClosed(code: code, reason: ""))
            #expect(sentCloseCode(actions) == code)
        }
    }
    @Test func oversizeFrameHeaderFailsWithoutBuffering() {
        // Header claims 2^40 bytes; only the header arrives.
        let machine = WebSocketProtocolMachine(role: .server, deflate: nil)
        let actions = machine.receive([0x82, 0xFF, 0, 0, 1, 0, 0, 0, 0, 0])
        #expect(sentCloseCode(actions) == 1009)
        #expect(actions.last == .closeConnection)
        let config = WebSocketConfiguration(maxFrameSize: 1000)
        expectServerFails(with: 1009, [0x82, 0xFE, 0x03, 0xE9], configuration: config)
    }
    @Test func oversizeMessageFromManyFragments() {
        let config = WebSocketConfiguration(maxMessageSize: 1000, maxFrameSize: 400)
        let chunk = [UInt8](repeating: 0x41, count: 300)
        expectServerFails(with: 1009, clientFrame(.binary, chunk, fin: false) + clientFrame(.continuation, chunk, fin: false)
                          + clientFrame(.continuation, chunk, fin: false) + clientFrame(.continuation, chunk), configuration: config)
        // Exactly at the limit is fine.
        let ok = dripFeed(clientFrame(.text, Array(chunk.prefix(250)), fin: false) + clientFrame(.continuation, chunk, fin: false)
                          + clientFrame(.continuation, chunk, fin: false) + clientFrame(.continuation, Array(chunk.prefix(150)))) {
            WebSocketProtocolMachine(role: .server, configuration: config, deflate: nil)
        }
        #expect(ok == [.text(String(repeating: "A", count: 1000))])
    }
    @Test func inflateBomb() {
        let params = PerMessageDeflateParameters()
        let client = WebSocketProtocolMachine(role: .client, configuration: WebSocketConfiguration(maxMessageSize: 1 << 26), deflate: params)
        let bomb = client.sendBinary([UInt8](repeating: 0, count: 16 << 20))
        #expect(bomb.count < 64 * 1024)
        expectServerFails(with: 1009, bomb, deflate: params)
        // The cap is the inflate limit when it is lower than the message limit.
        let small = client.sendText(String(repeating: "z", count: 5000))
        expectServerFails(with: 1009, small, configuration: WebSocketConfiguration(inflateLimit: 4096), deflate: params)
    }
    @Test func corruptCompressedData() {
        let params = PerMessageDeflateParameters()
        expectServerFails(with: 1007, clientFrame(.binary, [0xFF, 0xFF, 0xFF, 0xFF], rsv1: true), deflate: params)
    }
    @Test func clientRejectsMaskedServerFrames() {
        let client = WebSocketProtocolMachine(role: .client, deflate: nil)
        let actions = client.receive(clientFrame(.text, "masked"))
        #expect(actions.last == .closeConnection)
        guard case .send(let bytes)? = actions.first else { Issue.record("no close"); return }
        // The client's close frame is masked: decode it as a server would.
        var decoder = WebSocketFrameDecoder(role: .server)
        decoder.feed(bytes)
        let frame = try? decoder.nextFrame()
        #expect(frame?.opcode == .close)
        #expect(frame?.payload.prefix(2) == [0x03, 0xEA])
    }
    @Test func errorsAfterOurCloseDoNotSendASecondClose() {
        let machine = WebSocketProtocolMachine(role: .server, deflate: nil)
        _ = machine.close(code: .normal, reason: "")
        #expect(machine.receive(clientFrame(.text, "x", masked: false)) == [.closeConnection])
    }
}
