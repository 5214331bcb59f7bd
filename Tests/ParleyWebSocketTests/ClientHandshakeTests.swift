import Testing
@testable import ParleyWebSocket

/// The RFC 6455 §1.3 sample key and its accept value.
private let sampleKey = "dGhlIHNhbXBsZSBub25jZQ=="
private let sampleAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

private func response(status: String = "101 Switching Protocols", accept: String = sampleAccept,
                      extra: [String] = []) -> [UInt8] {
    var lines = ["HTTP/1.1 \(status)", "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: \(accept)"]
    lines += extra
    return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
}

private func makeHandshake(offersDeflate: Bool = false,
                           limits: WebSocketClientHandshake.Limits = .init()) -> WebSocketClientHandshake {
    WebSocketClientHandshake(host: "example.com", target: "/chat?room=1", key: sampleKey, offersDeflate: offersDeflate,
                             limits: limits)
}

/// What a whole response amounts to: the final event with every byte after the head
/// gathered into `leftover`, however the bytes were fed.
private enum Outcome: Equatable {
    case needMoreData
    case upgraded(deflate: PerMessageDeflateParameters?, leftover: [UInt8])
    case failed(WebSocketHandshakeError)
}

private func outcome(feeding pieces: [ArraySlice<UInt8>], to handshake: inout WebSocketClientHandshake) -> Outcome {
    var result = Outcome.needMoreData
    for piece in pieces {
        switch (result, handshake.feed(Array(piece))) {
        case (.needMoreData, .needMoreData): break
        case (.needMoreData, .upgraded(let deflate, let leftover)): result = .upgraded(deflate: deflate, leftover: leftover)
        case (.needMoreData, .failed(let error)): result = .failed(error)
        case (.upgraded(let deflate, let before), .upgraded(let again, let leftover)):
            #expect(again == deflate)
            result = .upgraded(deflate: deflate, leftover: before + leftover)
        case (.failed(let error), .failed(let again)):
            #expect(again == error, "the failure sticks")
        default:
            Issue.record("the outcome changed after it was final")
        }
    }
    return result
}

/// Feeds `bytes` to fresh handshakes in one piece, one byte at a time and in random chunks
/// (several seeds); expects the same outcome each time and returns it.
@discardableResult
private func dripFeed(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation,
                      _ make: () -> WebSocketClientHandshake = { makeHandshake() }) -> Outcome {
    var whole = make()
    let expected = outcome(feeding: [bytes[...]], to: &whole)
    var byByte = make()
    #expect(outcome(feeding: bytes.indices.map { bytes[$0...$0] }, to: &byByte) == expected,
            "byte by byte differs", sourceLocation: sourceLocation)
    for seed in 1...4 as ClosedRange<UInt64> {
        var rng = SeededRNG(seed: seed)
        var pieces: [ArraySlice<UInt8>] = []
        var i = 0
        while i < bytes.count {
            let n = min(bytes.count - i, Int.random(in: 1...(seed.isMultiple(of: 2) ? 7 : 300), using: &rng))
            pieces.append(bytes[i..<(i + n)])
            i += n
        }
        var chunked = make()
        #expect(outcome(feeding: pieces, to: &chunked) == expected, "random chunks (seed \(seed)) differ",
                sourceLocation: sourceLocation)
    }
    return expected
}

private func failureMessage(_ outcome: Outcome) -> String? {
    if case .failed(let error) = outcome { return error.message }
    return nil
}

@Suite struct ClientHandshakeTests {
    @Test func requestCarriesHostTargetKeyOfferAndExtraHeaders() {
        let handshake = WebSocketClientHandshake(host: "example.com:8080", target: "/v3/websocket?x=1", key: sampleKey,
                                                 offersDeflate: true, extraHeaders: [("Origin", "http://example.com")])
        let text = String(decoding: handshake.request, as: UTF8.self)
        #expect(text.hasPrefix("GET /v3/websocket?x=1 HTTP/1.1\r\nHost: example.com:8080\r\n"))
        #expect(text.contains("Upgrade: websocket\r\nConnection: Upgrade\r\n"))
        #expect(text.contains("Sec-WebSocket-Key: \(sampleKey)\r\nSec-WebSocket-Version: 13\r\n"))
        #expect(text.contains("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"))
        #expect(text.hasSuffix("Origin: http://example.com\r\n\r\n"))
        // A fresh key by default.
        let a = WebSocketClientHandshake(host: "h", target: "/", offersDeflate: false)
        let b = WebSocketClientHandshake(host: "h", target: "/", offersDeflate: false)
        #expect(a.key != b.key && WebSocketHandshake.isValidKey(a.key))
        #expect(!String(decoding: a.request, as: UTF8.self).contains("Sec-WebSocket-Extensions"))
    }

    @Test func upgradesOnAValid101() {
        #expect(dripFeed(response()) == .upgraded(deflate: nil, leftover: []))
    }

    @Test func handsBackTheFrameBytesAfterTheHead() throws {
        let frames = WebSocketFrameEncoder.encode(opcode: .text, payload: Array("first".utf8))
            + WebSocketFrameEncoder.encode(opcode: .binary, payload: [1, 2, 3])
        guard case .upgraded(nil, let leftover) = dripFeed(response() + frames) else {
            Issue.record("no upgrade")
            return
        }
        #expect(leftover == frames)
        let machine = WebSocketProtocolMachine(role: .client, deflate: nil)
        #expect(machine.receive(leftover) == [.text("first"), .binary([1, 2, 3])])
    }

    @Test func negotiatesDeflateWhenOffered() {
        let accepted = response(extra: ["Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover"])
        #expect(dripFeed(accepted) { makeHandshake(offersDeflate: true) }
                == .upgraded(deflate: PerMessageDeflateParameters(serverNoContextTakeover: true), leftover: []))
        // Not offered, yet accepted: the client must fail the connection.
        #expect(failureMessage(dripFeed(accepted)) == "server accepted an extension we did not offer")
        // Offered and declined is fine.
        #expect(dripFeed(response()) { makeHandshake(offersDeflate: true) } == .upgraded(deflate: nil, leftover: []))
    }

    @Test func rejectsAWrongAcceptValue() {
        let outcome = dripFeed(response(accept: WebSocketHandshake.acceptValue(forKey: "AAAAAAAAAAAAAAAAAAAAAA==")))
        guard case .failed(let error) = outcome else { Issue.record("accepted"); return }
        #expect(error.status == 101)
        #expect(error.message == "wrong Sec-WebSocket-Accept")
    }

    @Test(arguments: ["403 Forbidden", "200 OK", "401 Unauthorized", "426 Upgrade Required"])
    func rejectsAStatusOtherThan101(status: String) {
        let code = Int(status.prefix(3))!
        let refusal = Array("HTTP/1.1 \(status)\r\nContent-Length: 5\r\n\r\nnope!".utf8)
        guard case .failed(let error) = dripFeed(refusal) else { Issue.record("accepted"); return }
        #expect(error.status == code)
        #expect(error.message == "expected 101 Switching Protocols, got \(code)")
    }

    @Test func rejectsMissingUpgradeOrConnection() {
        let noUpgrade = Array("HTTP/1.1 101 OK\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(sampleAccept)\r\n\r\n".utf8)
        #expect(failureMessage(dripFeed(noUpgrade)) == "missing Upgrade: websocket")
        let noConnection = Array("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: \(sampleAccept)\r\n\r\n".utf8)
        #expect(failureMessage(dripFeed(noConnection)) == "missing Connection: Upgrade")
    }

    @Test func oversizeHeadFailsAtTheLimitWithoutWaitingForTheEnd() {
        let limit = WebSocketClientHandshake.Limits().maxHeadBytes
        // A complete head one byte over the limit.
        let padding = "X-Pad: " + String(repeating: "p", count: limit)
        let big = response(extra: [padding])
        #expect(failureMessage(dripFeed(big))?.contains("larger than \(limit) bytes") == true)
        // A head that never ends fails once the limit is crossed, not later.
        var endless = makeHandshake()
        let stream = Array("HTTP/1.1 101 OK\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: limit)
        guard case .failed = endless.feed(stream) else { Issue.record("kept buffering"); return }
        // Exactly at the limit is fine.
        var small = WebSocketClientHandshake.Limits()
        small.maxHeadBytes = response().count
        #expect(dripFeed(response()) { makeHandshake(limits: small) } == .upgraded(deflate: nil, leftover: []))
        small.maxHeadBytes -= 1
        #expect(failureMessage(dripFeed(response()) { makeHandshake(limits: small) })?.contains("larger than") == true)
    }

    @Test func tooManyHeaderFields() {
        var limits = WebSocketClientHandshake.Limits()
        limits.maxHeaderCount = 4
        #expect(dripFeed(response(extra: ["X-A: 1"])) { makeHandshake(limits: limits) } == .upgraded(deflate: nil, leftover: []))
        #expect(failureMessage(dripFeed(response(extra: ["X-A: 1", "X-B: 2"])) { makeHandshake(limits: limits) })
                == "bad upgrade response: more than 4 header fields")
    }

    @Test func headerLookupIsCaseInsensitiveAndJoinsRepeats() {
        var handshake = makeHandshake()
        let bytes = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-A: 1\r\nx-a: 2\r\nSec-WebSocket-Accept: \(sampleAccept)\r\n\r\n\u{81}\u{01}a".utf8)
        #expect(handshake.feed(bytes) == .upgraded(deflate: nil, leftover: Array("\u{81}\u{01}a".utf8)))
        let head = handshake.response
        #expect(head?.status == 101)
        #expect(head?.reason == "Switching Protocols")
        #expect(head?.header("upgrade") == "websocket")
        #expect(head?.header("X-A") == "1, 2")
        #expect(head?.header("missing") == nil)
    }

    @Test func needsMoreDataUntilTheBlankLine() {
        let text = Array(response())
        for cut in 0..<text.count {
            var handshake = makeHandshake()
            #expect(handshake.feed(Array(text.prefix(cut))) == .needMoreData)
        }
    }

    @Test(arguments: [
        "HTTP/2 101 x\r\n\r\n", "HTTP/1.1 1010 x\r\n\r\n", "ICY 200 OK\r\n\r\n", "HTTP/1.1 10a x\r\n\r\n",
        "HTTP/1.1  101 x\r\n\r\n", "HTTP/1.1 101\tx\r\n\r\n", "HTTP/1.2 101 x\r\n\r\n",
        "HTTP/1.1 101 x\r\nNoColon\r\n\r\n", "HTTP/1.1 101 x\r\n folded: y\r\n\r\n",
        "HTTP/1.1 101 x\r\nBad Name: y\r\n\r\n", "HTTP/1.1 101 x\r\nName : y\r\n\r\n",
        "HTTP/1.1 101 x\r\n: empty name\r\n\r\n", "HTTP/1.1 101 x\nUpgrade: websocket\r\n\r\n",
        "HTTP/1.1 101 x\r\nUpgrade: web\u{0}socket\r\n\r\n", "HTTP/1.1 101 x\r\nUpgrade: web\rsocket\r\n\r\n",
    ])
    func rejectsMalformedHeads(text: String) {
        guard case .failed(let error) = dripFeed(Array(text.utf8)) else {
            Issue.record("accepted \(text.debugDescription)")
            return
        }
        #expect(error.message.hasPrefix("bad upgrade response: "))
    }

    @Test func rejectsHeaderValuesThatAreNotUTF8() {
        var bytes = Array("HTTP/1.1 101 x\r\nX-A: ".utf8)
        bytes += [0xC3, 0x28]
        bytes += Array("\r\n\r\n".utf8)
        #expect(failureMessage(dripFeed(bytes)) == "bad upgrade response: bad header value")
    }

    @Test func acceptsAStatusLineWithoutReasonAndHTTP10Refusals() {
        let bare = Array("HTTP/1.1 101\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(sampleAccept)\r\n\r\n".utf8)
        #expect(dripFeed(bare) == .upgraded(deflate: nil, leftover: []))
        guard case .failed(let error) = dripFeed(Array("HTTP/1.0 404 Not Found\r\n\r\n".utf8)) else {
            Issue.record("accepted")
            return
        }
        #expect(error.status == 404)
    }
}
