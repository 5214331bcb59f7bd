import Testing
@testable import ParleyWebSocket

@Suite struct FrameCodecTests {
    @Test func encodesLengthForms() {
        #expect(WebSocketFrameEncoder.encodeHeader(opcode: .text, payloadLength: 125) == [0x81, 125])
        #expect(WebSocketFrameEncoder.encodeHeader(opcode: .binary, payloadLength: 126) == [0x82, 126, 0, 126])
        #expect(WebSocketFrameEncoder.encodeHeader(opcode: .binary, payloadLength: 65535) == [0x82, 126, 0xFF, 0xFF])
        #expect(WebSocketFrameEncoder.encodeHeader(opcode: .binary, payloadLength: 65536)
                == [0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0])
        #expect(WebSocketFrameEncoder.encodeHeader(opcode: .text, payloadLength: 5, fin: false, rsv1: true,
                                                   maskingKey: 0x0102_0304) == [0x41, 0x85, 1, 2, 3, 4])
    }

    @Test func rfcMaskedHelloExample() throws {
        // RFC 6455 §5.7: a single-frame masked text message "Hello".
        let bytes = hex("81 85 37 fa 21 3d 7f 9f 4d 51 58")
        #expect(WebSocketFrameEncoder.encode(opcode: .text, payload: Array("Hello".utf8), maskingKey: 0x37FA_213D) == bytes)
        var decoder = WebSocketFrameDecoder(role: .server, maxFramePayload: 1000)
        decoder.feed(bytes)
        #expect(try decoder.nextFrame() == WebSocketFrame(opcode: .text, payload: Array("Hello".utf8)))
        #expect(try decoder.nextFrame() == nil)
    }

    @Test func maskingAtEveryOffsetAndLength() {
        var rng = SeededRNG(seed: 7)
        for length in 0..<40 {
            let payload = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            for offset in 0..<4 {
                var bytes = payload
                bytes.withUnsafeMutableBytes { WebSocketFrameEncoder.mask($0, maskingKey: 0xA1B2_C3D4, keyOffset: offset) }
                let key: [UInt8] = [0xA1, 0xB2, 0xC3, 0xD4]
                #expect(bytes == payload.enumerated().map { $0.element ^ key[($0.offset + offset) & 3] })
            }
        }
    }

    @Test(arguments: [0, 1, 125, 126, 65535, 65536, 70_000])
    func roundTripsEveryLengthForm(length: Int) throws {
        let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        for (role, key) in [(WebSocketRole.server, UInt32?.some(0xDEAD_BEEF)), (.client, nil)] {
            var decoder = WebSocketFrameDecoder(role: role, maxFramePayload: 1 << 20)
            decoder.feed(WebSocketFrameEncoder.encode(opcode: .binary, payload: payload, maskingKey: key))
            #expect(try decoder.nextFrame() == WebSocketFrame(opcode: .binary, payload: payload))
            #expect(decoder.bufferedByteCount == 0)
        }
    }

    @Test func acceptsNonMinimalLengthEncoding() throws {
        var decoder = WebSocketFrameDecoder(role: .client, maxFramePayload: 100)
        decoder.feed([0x82, 126, 0, 3, 1, 2, 3])
        decoder.feed([0x82, 127, 0, 0, 0, 0, 0, 0, 0, 2, 9, 9])
        #expect(try decoder.nextFrame()?.payload == [1, 2, 3])
        #expect(try decoder.nextFrame()?.payload == [9, 9])
    }

    @Test func rejectsFramingViolations() {
        func error(_ bytes: [UInt8], role: WebSocketRole = .server, max: Int = 1 << 20) -> UInt16? {
            var decoder = WebSocketFrameDecoder(role: role, maxFramePayload: max)
            decoder.feed(bytes)
            do {
                while try decoder.nextFrame() != nil {}
                return nil
            } catch {
                return error.closeCode.rawValue
            }
        }
        #expect(error(clientFrame(.text, "hi", masked: false)) == 1002)
        #expect(error(clientFrame(.text, "hi"), role: .client) == 1002)
        #expect(error(rawClientFrame(firstByte: 0x83, payload: [])) == 1002)   // reserved data opcode
        #expect(error(rawClientFrame(firstByte: 0x8B, payload: [])) == 1002)   // reserved control opcode
        #expect(error(rawClientFrame(firstByte: 0xC2, payload: [])) == 1002)   // RSV1 without extension
        #expect(error(rawClientFrame(firstByte: 0xA2, payload: [])) == 1002)   // RSV2
        #expect(error(rawClientFrame(firstByte: 0x92, payload: [])) == 1002)   // RSV3
        #expect(error(clientFrame(.ping, [UInt8](repeating: 0, count: 126))) == 1002)
        #expect(error(clientFrame(.ping, [], fin: false)) == 1002)
        #expect(error([0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 1]) == 1002)     // 64-bit length, MSB set
        #expect(error([0x82, 0xFF, 0, 0, 0x10, 0, 0, 0, 0, 0]) == 1009)     // 2^44 bytes, header only
        #expect(error([0x82, 0xFE, 0x10, 0x00], max: 1000) == 1009)          // 4096 > 1000, header only
        #expect(error(clientFrame(.binary, [UInt8](repeating: 1, count: 1000)), max: 1000) == nil)
        var rsv1Allowed = WebSocketFrameDecoder(role: .server, maxFramePayload: 100, allowsRSV1: true)
        rsv1Allowed.feed(clientFrame(.continuation, [1], rsv1: true))
        #expect(throws: WebSocketProtocolError.self) { try rsv1Allowed.nextFrame() }
        // The error sticks.
        #expect(throws: WebSocketProtocolError.self) { try rsv1Allowed.nextFrame() }
    }
}

@Suite struct UTF8ValidatorTests {
    @Test func agreesWithTheStandardLibrary() {
        var rng = SeededRNG(seed: 42)
        let interesting: [UInt8] = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2,
                                    0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...12, using: &rng)
            let bytes = (0..<count).map { _ in interesting.randomElement(using: &rng)! }
            let expected = String(validating: bytes, as: UTF8.self) != nil
            #expect(UTF8Validator.isValid(bytes) == expected, "\(bytes)")
            // Chunked feeding gives the same answer.
            var v = UTF8Validator()
            var ok = true
            for b in bytes where ok { ok = v.validate([b]) }
            #expect((ok && v.isAtBoundary) == expected)
        }
    }

    @Test func knownCases() {
        #expect(UTF8Validator.isValid(Array("κόσμε 𝄞 ascii only and then some more ascii".utf8)))
        #expect(!UTF8Validator.isValid([0xC0, 0xAF]))               // overlong '/'
        #expect(!UTF8Validator.isValid([0xE0, 0x80, 0xAF]))         // overlong
        #expect(!UTF8Validator.isValid([0xED, 0xA0, 0x80]))         // surrogate U+D800
        #expect(!UTF8Validator.isValid([0xF4, 0x90, 0x80, 0x80]))   // U+110000
        #expect(!UTF8Validator.isValid([0xE2, 0x82]))               // truncated
        var v = UTF8Validator()
        let lead = v.validate([0xF4])
        let next = v.validate([0x90])                                // certain at once
        #expect(lead && !next)
    }
}
