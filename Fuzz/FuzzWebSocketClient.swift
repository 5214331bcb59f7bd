// libFuzzer target: the client side of a WebSocket. The input (after a control byte) is a
// server's answer to our upgrade request, frames included.
// Invariants: the handshake's outcome (and the bytes it hands back after the head) does not
// depend on how the answer was split; after an upgrade, a client-role machine reading those
// bytes gives the same messages and actions whole and split, borrowing or copying; nothing
// follows .closeConnection.
import ParleyWebSocket

/// RFC 6455's sample key: a seed answer carries its accept value, so the fuzzer starts from
/// a successful upgrade.
private let key = "dGhlIHNhbXBsZSBub25jZQ=="

private func handshake(offeringDeflate: Bool) -> WebSocketClientHandshake {
    WebSocketClientHandshake(host: "example.com", target: "/", key: key, offersDeflate: offeringDeflate,
                             limits: .init(maxHeadBytes: 2048, maxHeaderCount: 32))
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebSocketClient(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let control = data[0]
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let offer = control & 1 == 1
    let cut = Int(control >> 1) % (input.count + 1)

    var whole = handshake(offeringDeflate: offer)
    let one = whole.feed(input)
    var split = handshake(offeringDeflate: offer)
    var two = split.feed(Array(input[..<cut]))
    let rest = split.feed(Array(input[cut...]))
    switch (two, rest) {
    case (.needMoreData, _):
        two = rest
    case (.upgraded(let deflate, let first), .upgraded(let again, let second)):
        precondition(again == deflate, "the negotiated deflate changed")
        two = .upgraded(deflate: deflate, leftover: first + second)
    case (.failed(let error), .failed(let again)):
        precondition(again == error, "the failure did not stick")
    default:
        preconditionFailure("the outcome changed after it was final")
    }
    precondition(one == two, "split feeding changed the handshake's outcome")
    guard case .upgraded(let deflate, let frames) = one else { return 0 }

    // Same masking keys for both machines, so their close and pong frames compare equal.
    let configuration = WebSocketConfiguration(maxMessageSize: 64 * 1024, maxFrameSize: 64 * 1024,
                                               maskingKeys: .fastPseudoRandom(seed: 42))
    let copying = WebSocketProtocolMachine(role: .client, configuration: configuration, deflate: deflate)
    let expected = copying.receive(frames)
    let borrowing = WebSocketProtocolMachine(role: .client, configuration: configuration, deflate: deflate)
    var actions: [WebSocketAction] = []
    let frameCut = cut % (frames.count + 1)
    for piece in [frames[..<frameCut], frames[frameCut...]] {
        Array(piece).withUnsafeBytes { bytes in
            borrowing.receive(bytes, onMessage: { kind, payload in
                actions.append(kind == .text ? .text(String(decoding: payload, as: UTF8.self)) : .binary(Array(payload)))
            }, perform: { actions.append($0) })
        }
    }
    precondition(actions == expected, "borrowing or split reading changed the actions")
    if let index = expected.firstIndex(of: .closeConnection) {
        precondition(index == expected.count - 1, "actions after close")
    }
    return 0
}
