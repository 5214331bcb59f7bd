import Testing
@testable import ParleyWebSocket

/// An echo endpoint over a machine, as `EchoSession` and `autobahn-client` run it: replies
/// are produced from inside `receive(_:perform:)`. Returns every byte written, in order, and
/// whether the connection was closed. Feeds `stream` whole, or one byte at a time.
func echo(_ stream: [UInt8], role: WebSocketRole = .server, deflate: PerMessageDeflateParameters? = nil,
          byteByByte: Bool = false) -> (written: [UInt8], closed: Bool) {
    let machine = WebSocketProtocolMachine(role: role, deflate: deflate)
    var written: [UInt8] = []
    var closed = false
    let perform: (WebSocketAction) -> Void = { action in
        guard !closed else { return }
        switch action {
        case .text(let text): written += machine.sendText(text)
        case .binary(let bytes): written += machine.sendBinary(bytes)
        case .send(let bytes): written += bytes
        case .closeConnection: closed = true
        case .peerClosed: break
        }
    }
    if byteByByte {
        for byte in stream { machine.receive([byte], perform: perform) }
    } else {
        machine.receive(stream, perform: perform)
    }
    return (written, closed)
}

/// Autobahn|Testsuite cases reproduced byte for byte from the fuzzing client's wire log
/// (`Tests/conformance`, `make conformance`).
@Suite struct AutobahnCaseTests {
    /// Unmasked server text frame "Hello, world!".
    static let helloEcho = hex("81 0d 48 65 6c 6c 6f 2c 20 77 6f 72 6c 64 21")

    private func expectEchoThenClose(_ stream: [UInt8], echoed: [UInt8], closeCode: UInt16,
                                     sourceLocation: SourceLocation = #_sourceLocation) {
        for byteByByte in [false, true] {
            let (written, closed) = echo(stream, byteByByte: byteByByte)
            #expect(Array(written.prefix(echoed.count)) == echoed, "byteByByte: \(byteByByte)", sourceLocation: sourceLocation)
            let close = Array(written.dropFirst(echoed.count))
            #expect(close.count >= 4 && close[0] == 0x88, sourceLocation: sourceLocation)
            if close.count >= 4 {
                #expect(UInt16(close[2]) << 8 | UInt16(close[3]) == closeCode, sourceLocation: sourceLocation)
            }
            #expect(closed, sourceLocation: sourceLocation)
        }
    }

    /// 3.2: a text message, then a frame with RSV2 set, then a ping, in one read. The echo
    /// must precede the 1002 close (the machine used to fail first, so the echo was dropped:
    /// NON-STRICT).
    @Test func case3_2_echoBeforeFailingOnRSV() {
        let stream = hex("81 8d 9a 14 e0 64 d2 71 8c 08 f5 38 c0 13 f5 66 8c 00 bb")
            + hex("a1 8d 82 3b ed b7 ca 5e 81 db ed 17 cd c0 ed 49 81 d3 a3")
            + hex("89 80 b6 be 8b 51")
        expectEchoThenClose(stream, echoed: Self.helloEcho, closeCode: 1002)
    }

    /// 4.1.3: a text message, then reserved opcode 5, then a ping.
    @Test func case4_1_3_echoBeforeFailingOnReservedOpcode() {
        let stream = hex("81 8d 3f c3 e7 57 77 a6 8b 3b 50 ef c7 20 50 b1 8b 33 1e")
            + hex("85 80 ff fc 88 22") + hex("89 80 d6 b3 69 66")
        expectEchoThenClose(stream, echoed: Self.helloEcho, closeCode: 1002)
    }

    /// 5.15: two fragments of a text message, then a continuation with nothing to continue.
    @Test func case5_15_echoBeforeFailingOnStrayContinuation() {
        let stream = hex("01 89 0d 86 6f 1c 6b f4 0e 7b 60 e3 01 68 3c")
            + hex("80 89 59 0c 45 47 3f 7e 24 20 34 69 2b 33 6b")
            + hex("00 89 97 b0 f6 4c f1 c2 97 2b fa d5 98 38 a4")
            + hex("81 89 26 66 5a 79 40 14 3b 1e 4b 03 34 0d 12")
        let echoed = [0x81, 0x12] + Array("fragment1fragment2".utf8)
        expectEchoThenClose(stream, echoed: echoed, closeCode: 1002)
    }

    /// The array-returning `receive` still reports everything in order.
    @Test func arrayReceiveKeepsOrder() {
        let stream = hex("81 8d 9a 14 e0 64 d2 71 8c 08 f5 38 c0 13 f5 66 8c 00 bb")
            + hex("a1 8d 82 3b ed b7 ca 5e 81 db ed 17 cd c0 ed 49 81 d3 a3")
        let actions = WebSocketProtocolMachine(role: .server, deflate: nil).receive(stream)
        #expect(actions.first == .text("Hello, world!"))
        #expect(sentCloseCode(actions) == 1002)
        #expect(actions.last == .closeConnection)
    }
}
