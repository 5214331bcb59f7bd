import Testing
@_exported import ParleyTestSupport
@testable import ParleyWebSocket

let testMaskingKey: UInt32 = 0x37FA_213D

/// A frame as a client sends it (masked unless told otherwise).
func clientFrame(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true, rsv1: Bool = false,
                 masked: Bool = true) -> [UInt8] {
    WebSocketFrameEncoder.encode(opcode: opcode, payload: payload, fin: fin, rsv1: rsv1,
                                 maskingKey: masked ? testMaskingKey : nil)
}

func clientFrame(_ opcode: WebSocketOpcode, _ text: String, fin: Bool = true, masked: Bool = true) -> [UInt8] {
    clientFrame(opcode, Array(text.utf8), fin: fin, masked: masked)
}

/// A raw first byte + rest, for frames the encoder refuses to make (reserved bits/opcodes).
func rawClientFrame(firstByte: UInt8, payload: [UInt8]) -> [UInt8] {
    var frame = clientFrame(.binary, payload)
    frame[0] = firstByte
    return frame
}

func closePayload(_ code: UInt16, _ reason: String = "") -> [UInt8] {
    [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8)
}

/// Feeds `stream` to a fresh machine in one piece, byte by byte, and in random chunks with
/// several seeds; expects identical action lists and returns them.
@discardableResult
func dripFeed(_ stream: [UInt8], sourceLocation: SourceLocation = #_sourceLocation,
              makeMachine: () -> WebSocketProtocolMachine) -> [WebSocketAction] {
    let whole = makeMachine().receive(stream)
    let byByte = makeMachine()
    var byteActions: [WebSocketAction] = []
    for b in stream { byteActions += byByte.receive([b]) }
    #expect(byteActions == whole, "byte-by-byte differs", sourceLocation: sourceLocation)
    for seed in 1...4 as ClosedRange<UInt64> {
        var rng = SeededRNG(seed: seed)
        let machine = makeMachine()
        var actions: [WebSocketAction] = []
        var i = 0
        while i < stream.count {
            let n = min(stream.count - i, Int.random(in: 1...(seed.isMultiple(of: 2) ? 7 : 4000), using: &rng))
            actions += stream[i..<(i + n)].withUnsafeBytes { machine.receive($0) }
            i += n
        }
        #expect(actions == whole, "random chunks (seed \(seed)) differ", sourceLocation: sourceLocation)
    }
    return whole
}

/// The close code of the close frame in a `.send` action produced by a server-role machine
/// (unmasked), or nil if there is none.
func sentCloseCode(_ actions: [WebSocketAction]) -> UInt16? {
    for case .send(let bytes) in actions where bytes.count >= 2 && bytes[0] == 0x88 {
        return bytes.count >= 4 ? UInt16(bytes[2]) << 8 | UInt16(bytes[3]) : 1005
    }
    return nil
}

/// Feeds bytes to a fresh server machine and expects a failure with `code`: a close frame
/// carrying it, then `.closeConnection` as the last action.
func expectServerFails(with code: UInt16, _ stream: [UInt8],
                       configuration: WebSocketConfiguration = WebSocketConfiguration(),
                       deflate: PerMessageDeflateParameters? = nil,
                       sourceLocation: SourceLocation = #_sourceLocation) {
    let actions = dripFeed(stream, sourceLocation: sourceLocation) {
        WebSocketProtocolMachine(role: .server, configuration: configuration, deflate: deflate)
    }
    #expect(sentCloseCode(actions) == code, "actions: \(actions.map(describe))", sourceLocation: sourceLocation)
    #expect(actions.last == .closeConnection, sourceLocation: sourceLocation)
}

func describe(_ action: WebSocketAction) -> String {
    switch action {
    case .text(let s): return "text(\(s.prefix(40)))"
    case .binary(let b): return "binary(\(b.count))"
    case .send(let b): return "send(\(b.prefix(8).map { String($0, radix: 16) }) \(b.count))"
    case .closeConnection: return "closeConnection"
    case .peerClosed(let c, let r): return "peerClosed(\(c.map(String.init) ?? "nil"), \(r))"
    }
}

func hex(_ s: String) -> [UInt8] {
    s.split(separator: " ").map { UInt8($0, radix: 16)! }
}
