import Testing
@testable import ParleyWebSocket

@Suite struct PerMessageDeflateTests {
    @Test func rfc7692HelloExample() throws {
        // §7.2.3.1: "Hello" compressed is f2 48 cd c9 c9 07 00.
        let compressor = try #require(PerMessageDeflateCompressor(windowBits: 15, noContextTakeover: false))
        #expect(compressor.compress(Array("Hello".utf8)) == hex("f2 48 cd c9 c9 07 00"))
        let client = WebSocketProtocolMachine(role: .client, deflate: PerMessageDeflateParameters())
        #expect(client.receive(hex("c1 07 f2 48 cd c9 c9 07 00")) == [.text("Hello")])
    }

    @Test func rfc7692SharedWindowExample() throws {
        // §7.2.3.2: the second "Hello" refers back into the first message.
        let client = WebSocketProtocolMachine(role: .client, deflate: PerMessageDeflateParameters())
        #expect(client.receive(hex("c1 07 f2 48 cd c9 c9 07 00") + hex("c1 05 f2 00 11 00 00")) == [.text("Hello"), .text("Hello")])
        let compressor = try #require(PerMessageDeflateCompressor(windowBits: 15, noContextTakeover: false))
        _ = compressor.compress(Array("Hello".utf8))
        let second = compressor.compress(Array("Hello".utf8))
        #expect(second.count < 7)
        let decompressor = PerMessageDeflateDecompressor(noContextTakeover: false)
        var out: [UInt8] = []
        try decompressor.inflateFragment(hex("f2 48 cd c9 c9 07 00"), into: &out, limit: 100)
        try decompressor.finishMessage(into: &out, limit: 100)
        out = []
        try decompressor.inflateFragment(second, into: &out, limit: 100)
        try decompressor.finishMessage(into: &out, limit: 100)
        #expect(out == Array("Hello".utf8))
    }

    @Test func rfc7692OtherExamples() {
        let make = { WebSocketProtocolMachine(role: .client, deflate: PerMessageDeflateParameters()) }
        // §7.2.3.1 fragmented.
        #expect(dripFeed(hex("41 03 f2 48 cd") + hex("80 04 c9 c9 07 00"), makeMachine: make) == [.text("Hello")])
        // §7.2.3.3 stored block.
        #expect(make().receive(hex("c1 0b 00 05 00 fa ff 48 65 6c 6c 6f 00")) == [.text("Hello")])
        // §7.2.3.4 BFINAL set; the next message starts a fresh stream.
        #expect(dripFeed(hex("c1 08 f3 48 cd c9 c9 07 00 00") + hex("c1 07 f2 48 cd c9 c9 07 00"), makeMachine: make)
                == [.text("Hello"), .text("Hello")])
        // §7.2.3.5 two blocks in one message.
        #expect(make().receive(hex("c1 0d f2 48 05 00 00 00 ff ff ca c9 c9 07 00")) == [.text("Hello")])
        // Uncompressed message (RSV1 clear) on a deflate connection.
        #expect(make().receive(hex("81 05 48 65 6c 6c 6f")) == [.text("Hello")])
    }

    @Test(arguments: 9...15)
    func compressorStaysInsideTheNegotiatedWindow(windowBits: Int) throws {
        // A peer inflating with exactly the negotiated window must accept everything we send.
        let compressor = try #require(PerMessageDeflateCompressor(windowBits: windowBits, noContextTakeover: false))
        let decompressor = PerMessageDeflateDecompressor(noContextTakeover: false, windowBits: windowBits)
        var rng = SeededRNG(seed: UInt64(windowBits))
        let words = ["alpha", "beta", "gamma", "delta", "parley", "chat", "room", "κόσμε"]
        for _ in 0..<30 {
            let text = (0..<Int.random(in: 1...3000, using: &rng)).map { _ in words.randomElement(using: &rng)! }.joined(separator: " ")
            var out: [UInt8] = []
            try decompressor.inflateFragment(compressor.compress(Array(text.utf8)), into: &out, limit: 1 << 20)
            try decompressor.finishMessage(into: &out, limit: 1 << 20)
            #expect(out == Array(text.utf8))
        }
    }

    @Test func rsv1WithoutNegotiationIs1002() {
        let client = WebSocketProtocolMachine(role: .client, deflate: PerMessageDeflateParameters())
        let frame = client.sendText(String(repeating: "x", count: 200))
        #expect(frame[0] == 0xC1)
        expectServerFails(with: 1002, frame)
    }

    @Test func smallMessagesAreSentUncompressed() {
        let client = WebSocketProtocolMachine(role: .client, deflate: PerMessageDeflateParameters())
        #expect(client.sendText("hi")[0] == 0x81)
    }

    @Test func eightBitWindowSendsUncompressed() {
        // zlib raw deflate can't do an 8-bit window; messages go out uncompressed (RFC 7692 allows it).
        #expect(PerMessageDeflateCompressor(windowBits: 8, noContextTakeover: false) == nil)
        let params = PerMessageDeflateParameters(serverMaxWindowBits: 8)
        let server = WebSocketProtocolMachine(role: .server, deflate: params)
        let long = String(repeating: "abc", count: 100)
        let frame = server.sendText(long)
        #expect(frame[0] == 0x81)
        #expect(WebSocketProtocolMachine(role: .client, deflate: params).receive(frame) == [.text(long)])
    }

    @Test func negotiationAcceptsFirstValidOffer() throws {
        let result = try #require(PerMessageDeflateNegotiation.negotiateServer(offerHeader:
            "x-webkit-deflate-frame, permessage-deflate; foo=1, permessage-deflate; server_max_window_bits=\"10\"; client_max_window_bits, permessage-deflate"))
        #expect(result.responseHeaderValue == "permessage-deflate; server_max_window_bits=10")
        #expect(result.parameters == PerMessageDeflateParameters(serverMaxWindowBits: 10))
    }

    @Test func negotiationParameters() throws {
        let all = try #require(PerMessageDeflateNegotiation.negotiateServer(offerHeader:
            "Permessage-Deflate ;Server_No_Context_Takeover; client_no_context_takeover ; client_max_window_bits=9;server_max_window_bits=12"))
        #expect(all.parameters == PerMessageDeflateParameters(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                                              serverMaxWindowBits: 12, clientMaxWindowBits: 9))
        // The client reading our response agrees on the same parameters.
        #expect(try PerMessageDeflateNegotiation.acceptClient(responseHeader: all.responseHeaderValue) == all.parameters)
        let plain = try #require(PerMessageDeflateNegotiation.negotiateServer(offerHeader: PerMessageDeflateNegotiation.clientOffer()))
        #expect(plain.responseHeaderValue == "permessage-deflate")
        #expect(plain.parameters == PerMessageDeflateParameters())
    }

    @Test(arguments: [
        "permessage-deflate; server_max_window_bits",            // value required
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=010",
        "permessage-deflate; client_max_window_bits=abc",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; unknown_param",
        "permessage-deflate; server_max_window_bits=\"1 0\"",
        "permessage-deflate; server_max_window_bits=\"10",       // unterminated quote: syntax error
        "permessage-deflate;; x",
        "x-other-extension",
        "",
    ])
    func negotiationDeclines(offer: String) {
        #expect(PerMessageDeflateNegotiation.negotiateServer(offerHeader: offer) == nil)
    }

    @Test func clientRejectsBadResponses() throws {
        #expect(throws: WebSocketHandshakeError.self) { try PerMessageDeflateNegotiation.acceptClient(responseHeader: "permessage-deflate; foo") }
        #expect(throws: WebSocketHandshakeError.self) { try PerMessageDeflateNegotiation.acceptClient(responseHeader: "x-other") }
        #expect(throws: WebSocketHandshakeError.self) { try PerMessageDeflateNegotiation.acceptClient(responseHeader: "permessage-deflate, permessage-deflate") }
        #expect(throws: WebSocketHandshakeError.self) { try PerMessageDeflateNegotiation.acceptClient(responseHeader: "permessage-deflate; client_max_window_bits") }
        #expect(try PerMessageDeflateNegotiation.acceptClient(responseHeader: nil) == nil)
        #expect(try PerMessageDeflateNegotiation.acceptClient(responseHeader: "permessage-deflate; server_max_window_bits=\"9\"")
                == PerMessageDeflateParameters(serverMaxWindowBits: 9))
    }
}

/// Messages above the configured limit go uncompressed on a deflate connection (RSV1 clear),
/// and the peer reads both kinds, in order, with the shared window intact.
@Suite struct CompressionLimitTests {
    @Test func messagesAboveTheLimitAreSentUncompressed() {
        var configuration = WebSocketConfiguration()
        configuration.compressionLimit = 1_000
        let server = WebSocketProtocolMachine(role: .server, configuration: configuration, deflate: PerMessageDeflateParameters())
        let client = WebSocketProtocolMachine(role: .client, deflate: PerMessageDeflateParameters())
        let small = String(repeating: "chat ", count: 40)      // 200 bytes
        let large = String(repeating: "history ", count: 500)  // 4,000 bytes
        let frames = [server.sendText(small), server.sendText(large), server.sendText(small)]
        #expect(frames.map { $0[0] } == [0xC1, 0x81, 0xC1], "FIN+RSV1+text, FIN+text, FIN+RSV1+text")
        #expect(frames[1].count == 4 + 4_000, "sent as it is")
        #expect(frames[2].count < 20, "the second small one refers back to the first")
        #expect(client.receive(frames.flatMap { $0 }) == [.text(small), .text(large), .text(small)])
        // The default (no limit) compresses everything past the threshold.
        let unlimited = WebSocketProtocolMachine(role: .server, deflate: PerMessageDeflateParameters())
        #expect(unlimited.sendText(large)[0] == 0xC1)
    }
}
