import Testing
@testable import ParleyWebSocket

/// Starscream 4 with `.compress` (Socket.IO-Client-Swift as the SocketChat tutorial sets it
/// up) compresses its control frames too, through the stream its messages use. RFC 7692
/// forbids RSV1 there; Parley inflates them on a deflate connection instead of failing it.
@Suite struct CompressedControlFrameTests {
    /// A client's compressor, shared by its messages and control frames as in Starscream.
    let compressor = PerMessageDeflateCompressor(windowBits: 15, noContextTakeover: false)!
    func compressed(_ opcode: WebSocketOpcode, _ payload: [UInt8]) -> [UInt8] {
        clientFrame(opcode, compressor.compress(payload), rsv1: true)
    }
    func server() -> WebSocketProtocolMachine { WebSocketProtocolMachine(role: .server, deflate: PerMessageDeflateParameters()) }

    @Test func aCompressedPingIsAnsweredWithItsInflatedPayload() {
        let stream = compressed(.text, Array("hello".utf8)) + compressed(.ping, Array("are you there".utf8))
            + compressed(.text, Array("hello again".utf8))
        let actions = dripFeed(stream, makeMachine: server)
        let pong = WebSocketFrameEncoder.encode(opcode: .pong, payload: Array("are you there".utf8))
        #expect(actions == [.text("hello"), .send(pong), .text("hello again")])
    }

    @Test func aCompressedPongIsTakenAndTheStreamGoesOn() {
        let stream = compressed(.pong, Array("x".utf8)) + compressed(.text, Array("after the pong".utf8))
        #expect(dripFeed(stream, makeMachine: server) == [.text("after the pong")])
    }

    @Test func aCompressedCloseEndsWithItsCode() {
        let machine = server()
        let actions = machine.receive(compressed(.close, closePayload(1001, "going away")))
        #expect(sentCloseCode(actions) == 1001)
        #expect(actions.contains(.closeConnection))
    }

    @Test func withoutDeflateOrInsideACompressedMessageItIsStill1002() {
        // No permessage-deflate negotiated: RSV1 is a protocol error, as before.
        expectServerFails(with: 1002, clientFrame(.ping, [1, 2], rsv1: true))
        // Inside a compressed fragmented message the inflater is busy with that message.
        let first = clientFrame(.text, compressor.compress(Array("part".utf8)), fin: false, rsv1: true)
        let actions = server().receive(first + compressed(.ping, [1]))
        #expect(sentCloseCode(actions) == 1002)
    }

    @Test func anInflatedControlPayloadStaysWithin125Bytes() {
        let actions = server().receive(compressed(.ping, [UInt8](repeating: 0x61, count: 400)))
        #expect(sentCloseCode(actions) != nil)
        #expect(!actions.contains { if case .send(let bytes) = $0 { bytes.first == 0x8A } else { false } })
    }
}
