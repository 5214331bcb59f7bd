import Foundation
import ParleyCore
import Testing
@testable import ParleyServer

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

@Suite struct EngineIOPacketTests {
    @Test func versionFromQuery() {
        #expect(EngineIOVersion(query: "4") == .v4)
        #expect(EngineIOVersion(query: "3") == .v3)
        #expect(EngineIOVersion(query: nil) == .v3)
        #expect(EngineIOVersion(query: "5") == nil)
        #expect(EngineIOVersion(query: "") == nil)
    }

    @Test func textPacketsRoundTrip() throws {
        for (wire, kind, data) in [("0{\"sid\":\"a\"}", EngineIOPacket.Kind.open, "{\"sid\":\"a\"}"), ("1", .close, ""),
                                   ("2", .ping, ""), ("2probe", .ping, "probe"), ("3probe", .pong, "probe"),
                                   ("42[\"a\"]", .message, "2[\"a\"]"), ("5", .upgrade, ""), ("6", .noop, ""),
                                   ("4héllo 👋", .message, "héllo 👋")] {
            let packet = try EngineIOPacket.decode(text: wire)
            #expect(packet == EngineIOPacket(kind, data))
            #expect(packet.encodedText == wire)
        }
    }

    @Test func malformedTextPackets() {
        for wire in ["", "7", "9x", "a", " 4", "-1", "\u{1e}"] {
            #expect(throws: EngineIOError.self) { try EngineIOPacket.decode(text: wire) }
        }
    }

    @Test func webSocketBinaryFramingDiffersByVersion() throws {
        let packet = EngineIOPacket(binary: [1, 2, 3])
        #expect(packet.webSocketBinary(version: .v4) == [1, 2, 3])
        #expect(packet.webSocketBinary(version: .v3) == [4, 1, 2, 3])
        #expect(try EngineIOPacket.decode(webSocketBinary: [4, 1, 2, 3], version: .v3) == packet)
        #expect(try EngineIOPacket.decode(webSocketBinary: [1, 2, 3], version: .v4) == packet)
        #expect(throws: EngineIOError.self) { try EngineIOPacket.decode(webSocketBinary: [], version: .v3) }
        #expect(throws: EngineIOError.self) { try EngineIOPacket.decode(webSocketBinary: [2, 0], version: .v3) }
    }
}

@Suite struct EngineIOPayloadTests {
    let packets = [EngineIOPacket(.message, "2[\"chatMessage\",\"bob\",\"hi\"]"), EngineIOPacket(.ping),
                   EngineIOPacket(binary: [0, 255, 7]), EngineIOPacket(.message, "2[\"é👋\"]")]

    @Test func v4EncodesWithRecordSeparatorAndBase64() throws {
        let encoded = EngineIOPayload.encode(packets, version: .v4)
        #expect(text(encoded) == "42[\"chatMessage\",\"bob\",\"hi\"]\u{1e}2\u{1e}bAP8H\u{1e}42[\"é👋\"]")
        #expect(try EngineIOPayload.decode(encoded, version: .v4) == packets)
        #expect(text(EngineIOPayload.encode([EngineIOPacket(.noop)], version: .v4)) == "6")
    }

    @Test func v3EncodesLengthsInUTF16Units() throws {
        let encoded = EngineIOPayload.encode(packets, version: .v3)
        // "42[\"é👋\"]" is 9 UTF-16 units (👋 is a surrogate pair) but 12 UTF-8 bytes.
        #expect(text(encoded) == "28:42[\"chatMessage\",\"bob\",\"hi\"]1:26:b4AP8H9:42[\"é👋\"]")
        #expect(try EngineIOPayload.decode(encoded, version: .v3) == packets)
    }

    @Test func v3DecodesTheXHR2BinaryForm() throws {
        // What python-engineio 3 POSTs: 0x00 = text, 0x01 = binary, decimal digits, 0xFF.
        let body: [UInt8] = [0, 1, 0xFF] + bytes("2") + [0, 2, 0xFF] + bytes("40") + [1, 4, 0xFF, 4, 9, 8, 7]
        #expect(try EngineIOPayload.decode(body, version: .v3)
                == [EngineIOPacket(.ping), EngineIOPacket(.message, "0"), EngineIOPacket(binary: [9, 8, 7])])
        for bad: [UInt8] in [[0, 0xFF], [0, 5, 0xFF, 0x34], [0, 1], [2, 1, 0xFF, 0x34], [0, 10, 0xFF, 0x34],
                             [1, 1, 0xFF, 2]] {
            #expect(throws: EngineIOError.self) { try EngineIOPayload.decodeV3Binary(bad) }
        }
    }

    @Test func malformedPayloadsAreRefused() {
        for (body, version) in [("", EngineIOVersion.v4), ("", .v3), ("4a\u{1e}\u{1e}2", .v4), ("x", .v4), ("b!!!", .v4),
                                ("2:4", .v3), ("a:4", .v3), (":4", .v3), ("0:", .v3), ("3:b4%", .v3), ("3:b3A", .v3),
                                ("12345678901:4", .v3), ("1:9", .v3), ("1:2x", .v3)] {
            #expect(throws: EngineIOError.self, "\(body.debugDescription) v\(version.rawValue)") {
                try EngineIOPayload.decode(bytes(body), version: version)
            }
        }
        #expect(throws: EngineIOError.self) { try EngineIOPayload.decode([0x34, 0xC3], version: .v4) }
    }

    /// Every truncation of a valid payload, byte by byte, either decodes to packets or throws
    /// a clear error (never traps); the whole decodes to the original.
    @Test func everyTruncationIsSafe() throws {
        for version in [EngineIOVersion.v3, .v4] {
            let encoded = EngineIOPayload.encode(packets, version: version)
            for length in 0..<encoded.count {
                _ = try? EngineIOPayload.decode(Array(encoded[..<length]), version: version)
            }
            #expect(try EngineIOPayload.decode(encoded, version: version) == packets)
        }
        let xhr2: [UInt8] = [0, 1, 0, 0xFF] + bytes(String(repeating: "4", count: 10))
        for length in 0..<xhr2.count { _ = try? EngineIOPayload.decodeV3Binary(Array(xhr2[..<length])) }
    }

    @Test func oversizedPayloadDecodesOrFailsWithoutTrapping() throws {
        let big = String(repeating: "x", count: 1_000_000)
        let encoded = EngineIOPayload.encode([EngineIOPacket(.message, big)], version: .v3)
        #expect(try EngineIOPayload.decode(encoded, version: .v3).first?.text?.count == 1_000_000)
        // A length far beyond the body is "truncated", not an allocation.
        #expect(throws: EngineIOError.self) { try EngineIOPayload.decode(bytes("999999999:4x"), version: .v3) }
    }
}
